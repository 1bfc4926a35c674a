/* ctorloop: a C reactor whose constructor never returns, during _initialize; the host must
 * stop it at the batch time limit and refuse the instance. Build: see probe.c, with this
 * file in place of probe.c. */
#include <stdint.h>

#include "statehost.h"

STATEHOST_DECLARE_ABI_VERSION;

static volatile uint32_t spin;

__attribute__((constructor)) static void ctor(void) {
	for (;;) spin = spin * 31 + 7;
}

SH_EXPORT("statehost_process_batch") int32_t statehost_process_batch(int32_t count) {
	(void)count;
	uint8_t buf[256];
	while (sh_record_next(buf, sizeof buf) > 0) {}
	return SH_OK;
}
