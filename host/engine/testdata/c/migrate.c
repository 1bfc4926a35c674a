/* migrate: a C guest of store versions, written from abi/ alone. It declares version 2 of its
 * store "counts" (STATEHOST_DECLARE_STORE_VERSIONS) and migrates version 1 entries: the value
 * v becomes "v2:" v; a key that begins with "old:" moves to the same key with "new:" instead;
 * the key "drop" is deleted; the key "fail" fails the migration. A batch writes its records
 * into the store (below). Build: see probe.c, with this file in place of probe.c. */
#include <stdint.h>
#include <string.h>

#include "statehost.h"

STATEHOST_DECLARE_ABI_VERSION;
STATEHOST_DECLARE_STORE_VERSIONS({"counts", 2}, {"other", 1});

static int32_t counts = -1;
static uint8_t entries_buf[4096];
static uint8_t key[256], value[256];

SH_EXPORT("statehost_init") int32_t statehost_init(void) {
	counts = sh_store_open("counts", 6);
	return counts < 0 ? counts : SH_OK;
}

/* A record puts its key and value into "counts" as they are, and the put's result under the
 * key "rc", in decimal. */
SH_EXPORT("statehost_process_batch") int32_t statehost_process_batch(int32_t count) {
	(void)count;
	uint8_t rec[512];
	char rc[16];
	while (sh_record_next(rec, sizeof rec) > 0) {
		int32_t tl = sh_read_i32(rec + SH_RECORD_TOPIC_LEN_AT), kl = sh_read_i32(rec + SH_RECORD_KEY_LEN_AT);
		int32_t vl = sh_read_i32(rec + SH_RECORD_VALUE_LEN_AT);
		const uint8_t *k = rec + SH_RECORD_HEADER_SIZE + tl;
		int32_t code = sh_state_put(counts, k, kl, k + kl, vl);
		int n = 0;
		uint32_t u = code < 0 ? (uint32_t)-code : (uint32_t)code;
		char digits[12];
		do digits[n++] = (char)('0' + u % 10); while ((u /= 10) > 0);
		int32_t at = 0;
		if (code < 0) rc[at++] = '-';
		while (n > 0) rc[at++] = digits[--n];
		sh_state_put(counts, "rc", 2, rc, at);
	}
	return SH_OK;
}

static int32_t fail(const char *msg) {
	sh_set_error(msg, (int32_t)strlen(msg));
	return SH_PROCESSOR_FAILED;
}

/* migrate1 writes the new form of one version 1 entry. */
static int32_t migrate1(int32_t store, const uint8_t *k, int32_t kl, const uint8_t *v, int32_t vl) {
	if (kl == 4 && memcmp(k, "drop", 4) == 0) return SH_OK;
	if (kl == 4 && memcmp(k, "fail", 4) == 0) return fail("cannot migrate the entry \"fail\"");
	if (kl > (int32_t)sizeof key || vl + 3 > (int32_t)sizeof value) return fail("entry too large");
	memcpy(key, k, (size_t)kl);
	if (kl >= 4 && memcmp(k, "old:", 4) == 0) memcpy(key, "new:", 4);
	memcpy(value, "v2:", 3);
	memcpy(value + 3, v, (size_t)vl);
	return sh_state_put(store, key, kl, value, vl + 3);
}

SH_EXPORT("statehost_migrate") int32_t statehost_migrate(int32_t store, int32_t from_version, int32_t entries) {
	if (store != counts || from_version != 1) return fail("unexpected store or version");
	for (;;) {
		int32_t n = sh_iter_next(entries, entries_buf, sizeof entries_buf);
		if (n <= 0) return n; /* 0: every entry of this call was migrated */
		for (int32_t at = 0; at < n;) {
			int32_t kl = sh_read_i32(entries_buf + at + SH_ENTRY_KEY_LEN_AT);
			int32_t vl = sh_read_i32(entries_buf + at + SH_ENTRY_VALUE_LEN_AT);
			const uint8_t *k = entries_buf + at + SH_ENTRY_HEADER_SIZE;
			int32_t rc = migrate1(store, k, kl, k + kl, vl);
			if (rc < 0) return rc;
			at += SH_ENTRY_HEADER_SIZE + kl + vl;
		}
	}
}
