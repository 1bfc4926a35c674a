/* badimport: imports env.getenv_raw, a state_get of the wrong signature and an unknown
 * statehost function; the host must refuse it, naming each. Build: see probe.c, with this file in place of probe.c. */
#include <stdint.h>
__attribute__((import_module("env"), import_name("getenv_raw"))) int32_t getenv_raw(int32_t);
__attribute__((import_module("statehost"), import_name("state_get"))) int32_t state_get(int32_t);
__attribute__((import_module("statehost"), import_name("state_frobnicate"))) int32_t frob(void);
__attribute__((export_name("statehost_abi_version_1"))) void v1(void) {}
__attribute__((export_name("statehost_process_batch"))) int32_t pb(int32_t n) { return getenv_raw(n) + state_get(n) + frob(); }
