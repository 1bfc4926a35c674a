/* version2: declares ABI version 2; the host must refuse it. Build: see probe.c, with this file in place of probe.c. */
#include <stdint.h>
__attribute__((export_name("statehost_abi_version_2"))) void v2(void) {}
__attribute__((export_name("statehost_process_batch"))) int32_t pb(int32_t n) { (void)n; return 0; }
