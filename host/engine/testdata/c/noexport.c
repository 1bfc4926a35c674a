/* noexport: lacks statehost_process_batch; the host must refuse it. Build: see probe.c, with this file in place of probe.c. */
#include <stdint.h>
__attribute__((export_name("statehost_abi_version_1"))) void v1(void) {}
__attribute__((export_name("process"))) int32_t pb(int32_t n) { (void)n; return 0; }
