/* badsig: exports statehost_process_batch with the wrong signature; the host must refuse it. Build: see probe.c, with this file in place of probe.c. */
#include <stdint.h>
__attribute__((export_name("statehost_abi_version_1"))) void v1(void) {}
__attribute__((export_name("statehost_process_batch"))) int64_t pb(int64_t n) { return n; }
