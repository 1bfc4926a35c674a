/* ctorexit: a C reactor whose constructor calls exit(0) during _initialize; the host must
 * refuse the instance (wazero closes the module and reports success). Build: see probe.c,
 * with this file in place of probe.c. */
#include <stdint.h>
#include <stdlib.h>

#include "statehost.h"

STATEHOST_DECLARE_ABI_VERSION;

__attribute__((constructor)) static void ctor(void) { exit(0); }

SH_EXPORT("statehost_process_batch") int32_t statehost_process_batch(int32_t count) {
	(void)count;
	uint8_t buf[256];
	while (sh_record_next(buf, sizeof buf) > 0) {}
	return SH_OK;
}
