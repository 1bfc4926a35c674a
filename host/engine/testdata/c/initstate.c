/* initstate: a C reactor whose statehost_init does per-task work: it counts, in its task's
 * store "counts" under the key "inits", how many times an init ran for the task. Each record
 * emits that count. Build: see probe.c, with this file in place of probe.c. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "statehost.h"

STATEHOST_DECLARE_ABI_VERSION;

static int32_t counts;

static long inits(void) {
	char buf[32];
	int32_t n = sh_state_get(counts, "inits", 5, buf, sizeof buf - 1);
	if (n < 0) return 0;
	long v = 0;
	for (int32_t i = 0; i < n; i++) v = v * 10 + (buf[i] - '0');
	return v;
}

SH_EXPORT("statehost_init") int32_t statehost_init(void) {
	char buf[32];
	counts = sh_store_open("counts", 6);
	if (counts < 0) return counts;
	int n = snprintf(buf, sizeof buf, "%ld", inits() + 1);
	return sh_state_put(counts, "inits", 5, buf, n);
}

SH_EXPORT("statehost_process_batch") int32_t statehost_process_batch(int32_t count) {
	(void)count;
	uint8_t rec[256];
	char buf[32];
	while (sh_record_next(rec, sizeof rec) > 0) {
		int n = snprintf(buf, sizeof buf, "%ld", inits());
		int32_t rc = sh_emit(0, "inits", 5, buf, n, 0, 0);
		if (rc < 0) return rc;
	}
	return SH_OK;
}
