/*
 * count_c: the count processor of the word-count demo, written in C from the ABI's
 * documentation (package abi and abi/statehost.h) alone, as proof that the ABI is
 * language-neutral. Same contract as plugins/count:
 *
 *   For a record with key k and a null value, delete k from the store "counts" and emit a
 *   tombstone for k to the first output. Otherwise increment the count stored under k
 *   (decimal ASCII; absent means 0), store it, and emit key k with the new count in
 *   decimal. Records with a null key are skipped with a warning.
 *
 * Build (from the repository root; go run ./plugins/build runs the same command):
 *
 *   clang --target=wasm32-wasi --sysroot=/usr -isystem /usr/include/wasm32-wasi \
 *     -L/usr/lib/wasm32-wasi -O2 -mexec-model=reactor -nodefaultlibs -lc -I abi \
 *     -o plugins/count_c/count_c.wasm plugins/count_c/count_c.c
 *
 * The build checked in as testdata/count_c.wasm is used where clang is missing
 * (go run ./plugins/build -update-prebuilt refreshes it).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "statehost.h"

STATEHOST_DECLARE_ABI_VERSION;

static int32_t counts = -1;
static uint8_t *rec_buf;
static int32_t rec_cap;
static uint8_t *val_buf;
static int32_t val_cap;

/* grow makes *buf hold at least need bytes; it returns 0 when memory runs out. */
static int grow(uint8_t **buf, int32_t *cap, int32_t need) {
	int32_t n = *cap * 2 > need ? *cap * 2 : need;
	if (n < 64) n = 64;
	uint8_t *b = realloc(*buf, (size_t)n);
	if (b == NULL) return 0;
	*buf = b;
	*cap = n;
	return 1;
}

static int32_t fail(const char *msg, int32_t code) {
	sh_set_error(msg, (int32_t)strlen(msg));
	return code;
}

SH_EXPORT("statehost_init") int32_t statehost_init(void) {
	counts = sh_store_open("counts", 6);
	if (counts < 0) return fail("count_c: cannot open store \"counts\"", counts);
	return SH_OK;
}

/* count_record processes the current record, laid out in rec_buf. */
static int32_t count_record(void) {
	int32_t topic_len = sh_read_i32(rec_buf + SH_RECORD_TOPIC_LEN_AT);
	int32_t key_len = sh_read_i32(rec_buf + SH_RECORD_KEY_LEN_AT);
	int32_t value_len = sh_read_i32(rec_buf + SH_RECORD_VALUE_LEN_AT);
	const uint8_t *key = rec_buf + SH_RECORD_HEADER_SIZE + topic_len;

	if (key_len == SH_NULL_LEN) {
		static const char msg[] = "count_c: skipping record with a null key";
		sh_log(SH_LEVEL_WARN, msg, (int32_t)sizeof msg - 1);
		return SH_OK;
	}
	if (value_len == SH_NULL_LEN) {
		int32_t rc = sh_state_delete(counts, key, key_len);
		if (rc < 0) return fail("count_c: state_delete failed", rc);
		rc = sh_emit(0, key, key_len, NULL, SH_NULL_LEN, NULL, 0);
		if (rc < 0) return fail("count_c: emit failed", rc);
		return SH_OK;
	}

	uint64_t count = 0;
	for (;;) {
		int32_t n = sh_state_get(counts, key, key_len, val_buf, val_cap);
		if (n == SH_BUFFER_TOO_SMALL) {
			if (!grow(&val_buf, &val_cap, sh_buffer_needed())) return fail("count_c: out of memory", SH_PROCESSOR_FAILED);
			continue;
		}
		if (n == SH_NOT_FOUND) break;
		if (n < 0) return fail("count_c: state_get failed", n);
		if (n == 0 || n > 19) return fail("count_c: stored count is not a decimal number", SH_PROCESSOR_FAILED);
		for (int32_t i = 0; i < n; i++) {
			if (val_buf[i] < '0' || val_buf[i] > '9') return fail("count_c: stored count is not a decimal number", SH_PROCESSOR_FAILED);
			count = count * 10 + (uint64_t)(val_buf[i] - '0');
		}
		break;
	}
	count++;

	char digits[20];
	int32_t len = 0;
	do {
		digits[sizeof digits - 1 - len++] = (char)('0' + count % 10);
		count /= 10;
	} while (count > 0);
	const char *num = digits + sizeof digits - len;

	int32_t rc = sh_state_put(counts, key, key_len, num, len);
	if (rc < 0) return fail("count_c: state_put failed", rc);
	rc = sh_emit(0, key, key_len, num, len, NULL, 0);
	if (rc < 0) return fail("count_c: emit failed", rc);
	return SH_OK;
}

SH_EXPORT("statehost_process_batch") int32_t statehost_process_batch(int32_t count) {
	(void)count;
	for (;;) {
		int32_t n = sh_record_next(rec_buf, rec_cap);
		if (n == SH_BUFFER_TOO_SMALL) {
			if (!grow(&rec_buf, &rec_cap, sh_buffer_needed())) return fail("count_c: out of memory", SH_PROCESSOR_FAILED);
			continue;
		}
		if (n < 0) return fail("count_c: record_next failed", n);
		if (n == 0) return SH_OK; /* end of the batch */
		int32_t rc = count_record();
		if (rc != SH_OK) return rc;
	}
}
