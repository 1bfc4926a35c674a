/*
 * hostile: a C guest for the process tests of bad records (hardening_test.go and its
 * siblings). It counts its records like count_c, unless the record's value is one of the
 * commands below, so that one processor can take healthy and hostile records side by side.
 * Its store is the first of "counts", "counts1" .. "counts4" that the processor has (store
 * names are unique in an application).
 *
 *   (anything else)    count the key in its store and emit key -> the new count
 *   loop               loop forever (the batch time limit stops it)
 *   put N              state_put a value of N bytes under the key "big", then count
 *   putkey N           state_put "v" under a key of N bytes, then count the record's key
 *   emit N             emit a value of N bytes under the key to output 0, then count
 *   flood N SIZE       emit N values of SIZE bytes under the key to output 0
 *   log N              log N lines at info level, then count
 *   print N            write N lines to stderr, then count
 *   fail               set_error and return SH_PROCESSOR_FAILED
 *   trap               trap
 *
 * A host function that answers an error code to put, putkey, emit or flood makes the guest
 * fail, saying which call answered which code ("put 2097152: code -11"): the host's answer
 * decides, as in a guest that checks its codes. Records with a null key are ignored.
 *
 * Build (from the repository root; the tests rebuild it where clang is present, and
 * go test ./cmd/statehost -run TestHostilePrebuiltCurrent -rewrite refreshes hostile.wasm):
 *
 *   clang --target=wasm32-wasi --sysroot=/usr -isystem /usr/include/wasm32-wasi \
 *     -L/usr/lib/wasm32-wasi -O2 -mexec-model=reactor -nodefaultlibs -lc -I abi \
 *     -o cmd/statehost/testdata/hostile/hostile.wasm cmd/statehost/testdata/hostile/hostile.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "statehost.h"

STATEHOST_DECLARE_ABI_VERSION;

static int32_t counts = -1;
static uint8_t *rec_buf;
static int32_t rec_cap;
static volatile uint64_t sink;

static int32_t fail(const char *msg) {
	sh_set_error(msg, (int32_t)strlen(msg));
	return SH_PROCESSOR_FAILED;
}

/* failed reports that call (with argument n) answered code. */
static int32_t failed(const char *call, long n, int32_t code) {
	char msg[96];
	snprintf(msg, sizeof msg, "%s %ld: code %d", call, n, code);
	return fail(msg);
}

static int grow(uint8_t **buf, int32_t *cap, int32_t need) {
	int32_t n = *cap * 2 > need ? *cap * 2 : need;
	if (n < 256) n = 256;
	uint8_t *b = realloc(*buf, (size_t)n);
	if (b == NULL) return 0;
	*buf = b;
	*cap = n;
	return 1;
}

/* filled returns a buffer of n bytes 'x', kept between calls; NULL when memory runs out. */
static uint8_t *filled(long n) {
	static uint8_t *buf;
	static long cap;
	if (n > cap) {
		free(buf);
		buf = malloc((size_t)n);
		cap = buf ? n : 0;
		if (buf == NULL) return NULL;
		memset(buf, 'x', (size_t)n);
	}
	return buf;
}

SH_EXPORT("statehost_init") int32_t statehost_init(void) {
	/* Store names are unique in an application: each processor has one of these. */
	static const char *names[] = {"counts", "counts1", "counts2", "counts3", "counts4"};
	for (size_t i = 0; i < sizeof names / sizeof names[0] && counts < 0; i++) {
		counts = sh_store_open(names[i], (int32_t)strlen(names[i]));
	}
	return counts < 0 ? fail("hostile: the processor has none of the stores counts, counts1..counts4") : SH_OK;
}

/* number parses the decimal number at p into *v, counting it in *args when there is one. */
static const char *number(const char *p, long *v, int *args) {
	if (*p < '0' || *p > '9') return p;
	for (*v = 0; *p >= '0' && *p <= '9'; p++) *v = *v * 10 + (*p - '0');
	(*args)++;
	return p;
}

/* count increments the decimal count stored under key and emits it. */
static int32_t count(const uint8_t *key, int32_t key_len) {
	char val[24];
	int32_t n = sh_state_get(counts, key, key_len, val, sizeof val - 1);
	uint64_t c = 0;
	if (n > 0) {
		for (int32_t i = 0; i < n; i++) c = c * 10 + (uint64_t)(val[i] - '0');
	} else if (n != SH_NOT_FOUND) {
		return failed("state_get", key_len, n);
	}
	int len = snprintf(val, sizeof val, "%llu", (unsigned long long)(c + 1));
	int32_t rc = sh_state_put(counts, key, key_len, val, len);
	if (rc != SH_OK) return failed("state_put", len, rc);
	rc = sh_emit(0, key, key_len, val, len, NULL, 0);
	return rc == SH_OK ? SH_OK : failed("emit", len, rc);
}

static int32_t record(void) {
	int32_t topic_len = sh_read_i32(rec_buf + SH_RECORD_TOPIC_LEN_AT);
	int32_t key_len = sh_read_i32(rec_buf + SH_RECORD_KEY_LEN_AT);
	int32_t value_len = sh_read_i32(rec_buf + SH_RECORD_VALUE_LEN_AT);
	const uint8_t *key = rec_buf + SH_RECORD_HEADER_SIZE + topic_len;
	if (key_len == SH_NULL_LEN) return SH_OK;
	char cmd[64] = {0};
	if (value_len > 0) {
		const uint8_t *value = key + key_len;
		memcpy(cmd, value, value_len < (int32_t)sizeof cmd - 1 ? (size_t)value_len : sizeof cmd - 1);
	}
	char word[16] = {0};
	const char *p = cmd;
	for (size_t i = 0; *p && *p != ' ' && i < sizeof word - 1; i++) word[i] = *p++;
	long n = 0, size = 0;
	int args = word[0] != 0;
	if (args && *p == ' ') p = number(p + 1, &n, &args);
	if (args > 1 && *p == ' ') p = number(p + 1, &size, &args);
	if (!args) return count(key, key_len);

	if (strcmp(word, "loop") == 0) {
		for (;;) sink++;
	} else if (strcmp(word, "trap") == 0) {
		__builtin_trap();
	} else if (strcmp(word, "fail") == 0) {
		return fail("hostile: failing as told");
	} else if (strcmp(word, "put") == 0 && args >= 2) {
		uint8_t *v = filled(n);
		if (v == NULL) return fail("hostile: out of memory");
		int32_t rc = sh_state_put(counts, "big", 3, v, (int32_t)n);
		if (rc != SH_OK) return failed("put", n, rc);
	} else if (strcmp(word, "putkey") == 0 && args >= 2) {
		uint8_t *k = filled(n);
		if (k == NULL) return fail("hostile: out of memory");
		int32_t rc = sh_state_put(counts, k, (int32_t)n, "v", 1);
		if (rc != SH_OK) return failed("putkey", n, rc);
	} else if (strcmp(word, "emit") == 0 && args >= 2) {
		uint8_t *v = filled(n);
		if (v == NULL) return fail("hostile: out of memory");
		int32_t rc = sh_emit(0, key, key_len, v, (int32_t)n, NULL, 0);
		if (rc != SH_OK) return failed("emit", n, rc);
	} else if (strcmp(word, "flood") == 0 && args >= 3) {
		uint8_t *v = filled(size);
		if (v == NULL) return fail("hostile: out of memory");
		for (long i = 0; i < n; i++) {
			int32_t rc = sh_emit(0, key, key_len, v, (int32_t)size, NULL, 0);
			if (rc != SH_OK) return failed("flood", i, rc);
		}
		return SH_OK;
	} else if (strcmp(word, "log") == 0 && args >= 2) {
		for (long i = 0; i < n; i++) {
			char line[48];
			int len = snprintf(line, sizeof line, "hostile log line %ld", i);
			sh_log(SH_LEVEL_INFO, line, len);
		}
	} else if (strcmp(word, "print") == 0 && args >= 2) {
		for (long i = 0; i < n; i++) fprintf(stderr, "hostile stderr line %ld\n", i);
		fflush(stderr);
	}
	return count(key, key_len);
}

SH_EXPORT("statehost_process_batch") int32_t statehost_process_batch(int32_t n) {
	(void)n;
	for (;;) {
		int32_t got = sh_record_next(rec_buf, rec_cap);
		if (got == SH_BUFFER_TOO_SMALL) {
			if (!grow(&rec_buf, &rec_cap, sh_buffer_needed())) return fail("hostile: out of memory");
			continue;
		}
		if (got < 0) return failed("record_next", 0, got);
		if (got == 0) return SH_OK;
		int32_t rc = record();
		if (rc != SH_OK) return rc;
	}
}
