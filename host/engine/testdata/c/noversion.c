/* noversion: declares no ABI version; the host must refuse it. Build: see probe.c, with this file in place of probe.c. */
#include <stdint.h>
__attribute__((export_name("statehost_process_batch"))) int32_t pb(int32_t n) { (void)n; return 0; }
