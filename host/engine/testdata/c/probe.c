/*
 * probe: a C guest that drives the statehost ABI directly, for the engine's tests. Each
 * record's value is a command; see the switch in run(). Results are emitted to output 0.
 *
 * Build (from the repository root; the engine's tests rebuild it when clang is present, and
 * go test ./host/engine -run TestCPrebuiltsCurrent -rewrite refreshes the checked-in probe.wasm):
 *
 *   clang --target=wasm32-wasi --sysroot=/usr -isystem /usr/include/wasm32-wasi \
 *     -L/usr/lib/wasm32-wasi -O2 -mexec-model=reactor -nodefaultlibs -lc -I abi \
 *     -o host/engine/testdata/c/probe.wasm host/engine/testdata/c/probe.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wasi/api.h>

#include "statehost.h"

STATEHOST_DECLARE_ABI_VERSION;

static uint8_t rec[4096];
static volatile uint64_t sink;

#define BAD ((const void *)(uintptr_t)0xFFFFFFF0u)

static uint32_t mem_size(void) { return (uint32_t)__builtin_wasm_memory_size(0) * 65536u; }

static int32_t emit_str(const char *k, const char *v) {
	return sh_emit(0, k, (int32_t)strlen(k), v, v ? (int32_t)strlen(v) : SH_NULL_LEN, NULL, 0);
}

/* report emits key name with the decimal code as value. */
static void report(const char *name, int32_t code) {
	char v[16];
	snprintf(v, sizeof v, "%d", code);
	emit_str(name, v);
}

static int32_t store(const char *name) { return sh_store_open(name, (int32_t)strlen(name)); }

/* oob calls host functions with bad pointers, lengths and handles and reports each code. */
static void oob(void) {
	int32_t s = store("s");
	uint8_t buf[8];
	const void *end = (const void *)(uintptr_t)(mem_size() - 4);
	sh_state_put(s, "k", 1, "value", 5);

	report("get_key_oob", sh_state_get(s, BAD, 100, buf, sizeof buf));
	report("get_key_wraps", sh_state_get(s, (const void *)(uintptr_t)0xFFFFFFFFu, 0x7FFFFFFF, buf, sizeof buf));
	report("get_buf_oob", sh_state_get(s, "k", 1, (void *)end, 100));
	report("get_buf_neg", sh_state_get(s, "k", 1, buf, -8));
	report("get_key_neg", sh_state_get(s, "k", -2, buf, sizeof buf));
	report("get_null_key", sh_state_get(s, "k", SH_NULL_LEN, buf, sizeof buf));
	report("get_missing", sh_state_get(s, "nope", 4, buf, sizeof buf));
	report("get_small", sh_state_get(s, "k", 1, buf, 2));
	report("get_small_needed", sh_buffer_needed());
	report("get_ok", sh_state_get(s, "k", 1, buf, sizeof buf));
	report("get_bad_handle", sh_state_get(99, "k", 1, buf, sizeof buf));
	report("get_neg_handle", sh_state_get(-1, "k", 1, buf, sizeof buf));
	report("put_val_huge", sh_state_put(s, "k", 1, "v", 0x7FFFFFFF));
	report("put_val_oob", sh_state_put(s, "k", 1, end, 64));
	report("put_key_neg", sh_state_put(s, "k", -5, "v", 1));
	report("put_val_neg", sh_state_put(s, "k", 1, "v", -2));
	report("delete_oob", sh_state_delete(s, BAD, 64));
	report("range_oob", sh_state_range(s, BAD, 64, NULL, SH_NULL_LEN));
	report("prefix_oob", sh_state_prefix(s, BAD, 64));
	report("prefix_null", sh_state_prefix(s, NULL, SH_NULL_LEN));
	report("iter_next_bad", sh_iter_next(7, buf, sizeof buf));
	report("iter_close_bad", sh_iter_close(-3));
	report("record_next_oob", sh_record_next((void *)end, 4096));
	report("record_headers_oob", sh_record_headers((void *)BAD, 64));
	report("emit_key_oob", sh_emit(0, BAD, 64, "v", 1, NULL, 0));
	report("emit_val_oob", sh_emit(0, "k", 1, BAD, 64, NULL, 0));
	report("emit_hdr_oob", sh_emit(0, "k", 1, "v", 1, BAD, 64));
	uint8_t hdr[8] = {5, 0, 0, 0, 0, 0, 0, 0}; /* key_len 5 but no key bytes */
	report("emit_hdr_malformed", sh_emit(0, "k", 1, "v", 1, hdr, sizeof hdr));
	report("emit_bad_output", sh_emit(5, "k", 1, "v", 1, NULL, 0));
	report("emit_neg_output", sh_emit(-1, "k", 1, "v", 1, NULL, 0));
	report("log_bad_level", sh_log(9, "x", 1));
	report("log_oob", sh_log(SH_LEVEL_INFO, BAD, 64));
	report("set_error_oob", sh_set_error(BAD, 64));
	report("store_open_empty", sh_store_open("s", 0));
	report("store_open_long", sh_store_open(rec, 300));
	report("store_open_oob", sh_store_open(BAD, 64));
	report("store_open_unknown", store("nope"));
	report("output_open_unknown", sh_output_open("nope", 4));
	report("output_open_first", sh_output_open("out", 3));

	/* Regions whose end wraps past 2^32 must be refused, not read at the wrapped address:
	 * 0xFFFFFFF0 + 0x20 wraps to 0x10, 0xFFFFFFFF + 1 to 0. */
	report("get_key_wraps_small", sh_state_get(s, BAD, 0x20, buf, sizeof buf));
	report("get_buf_wraps_small", sh_state_get(s, "k", 1, (void *)BAD, 0x20));
	report("put_val_wraps_small", sh_state_put(s, "k", 1, BAD, 0x20));
	report("log_wraps_to_zero", sh_log(SH_LEVEL_INFO, (const void *)(uintptr_t)0xFFFFFFFFu, 1));
	report("emit_hdr_wraps_small", sh_emit(0, "k", 1, "v", 1, BAD, 0x20));
	/* The last bytes of memory: a region may end exactly at the memory size. */
	uint8_t *top = (uint8_t *)(uintptr_t)mem_size();
	report("get_key_at_end_empty", sh_state_get(s, top, 0, buf, sizeof buf));     /* key "": not found */
	report("get_buf_at_end_empty", sh_state_get(s, "k", 1, top, 0));               /* valid, too small */
	uint8_t saved[5];
	memcpy(saved, top - 5, 5); /* the heap may own the last bytes: put them back */
	int32_t rc = sh_state_get(s, "k", 1, top - 5, 5);                               /* fits exactly */
	int ok = memcmp(top - 5, "value", 5) == 0;
	memcpy(top - 5, saved, 5);
	report("get_buf_last_5", rc);
	report("get_buf_last_5_written", ok);
	report("get_buf_last_5_plus_1", sh_state_get(s, "k", 1, top - 4, 5));          /* one past the end */
	report("log_last_byte", sh_log(SH_LEVEL_TRACE, top - 1, 1));
	report("log_at_end_1", sh_log(SH_LEVEL_TRACE, top, 1));
	report("put_key_at_end_1", sh_state_put(s, top, 1, "v", 1));
}

/* limits emits past abi.MaxEmitBytes and abi.MaxEmitHeaders, and exactly at them. A zeroed
 * buffer is a sequence of empty headers (key_len 0, value_len 0), 8 bytes each. */
static void limits(void) {
	const int32_t big = 50000000;
	uint8_t *b = calloc(1, (size_t)big);
	if (b == NULL) {
		report("calloc", -1);
		return;
	}
	report("emit_hdr_50mb", sh_emit(0, "k", 1, "v", 1, b, big));
	report("emit_hdr_count_over", sh_emit(0, "k", 1, "v", 1, b, (SH_MAX_EMIT_HEADERS + 1) * SH_ENTRY_HEADER_SIZE));
	report("emit_hdr_count_max", sh_emit(0, "k", 1, "v", 1, b, SH_MAX_EMIT_HEADERS * SH_ENTRY_HEADER_SIZE));
	report("emit_value_over", sh_emit(0, "k", 1, b, SH_MAX_EMIT_BYTES, NULL, 0));
	report("emit_key_over", sh_emit(0, b, SH_MAX_EMIT_BYTES + 1, NULL, SH_NULL_LEN, NULL, 0));
	report("emit_value_max", sh_emit(0, "k", 1, b, SH_MAX_EMIT_BYTES - 1, NULL, 0));
	report("emit_null_key_value_max", sh_emit(0, NULL, SH_NULL_LEN, b, SH_MAX_EMIT_BYTES, NULL, 0));
	report("emit_all_max", sh_emit(0, "k", 1, b, SH_MAX_EMIT_BYTES - 1 - 8, b, 8));
	report("emit_all_over", sh_emit(0, "k", 1, b, SH_MAX_EMIT_BYTES - 1 - 7, b, 8));
	free(b);
}

/* stale checks that a closed iterator handle stays invalid when its slot is reused: it
 * opens and closes one iterator, opens another, and uses the first handle. */
static void stale(void) {
	int32_t s = store("s");
	uint8_t buf[64];
	int32_t first = sh_state_prefix(s, "a", 1);
	report("stale_first_ok", first >= 0);
	report("stale_first_close", sh_iter_close(first));
	int32_t second = sh_state_prefix(s, "zz", 2); /* the same free slot */
	report("stale_second_ok", second >= 0);
	report("stale_differ", second != first);
	report("stale_next", sh_iter_next(first, buf, sizeof buf));
	report("stale_close", sh_iter_close(first));
	report("stale_second_next", sh_iter_next(second, buf, sizeof buf)); /* 0: no key under zz */
	report("stale_second_close", sh_iter_close(second));
	report("stale_second_again", sh_iter_close(second));
}

/* scan emits every entry of a prefix (arg: the prefix) or range ("a".."c") scan of store s,
 * through a buffer that starts at 8 bytes so that the grow path is taken. */
static int32_t scan(int prefix, const char *arg) {
	int32_t s = store("s");
	int32_t it = prefix ? sh_state_prefix(s, arg, (int32_t)strlen(arg))
	                    : sh_state_range(s, "a", 1, "c", 1);
	if (it < 0) return it;
	int32_t cap = 8;
	uint8_t *buf = malloc((size_t)cap);
	for (;;) {
		int32_t n = sh_iter_next(it, buf, cap);
		if (n == SH_BUFFER_TOO_SMALL) {
			cap = sh_buffer_needed();
			buf = realloc(buf, (size_t)cap);
			continue;
		}
		if (n < 0) return n;
		if (n == 0) break;
		for (int32_t off = 0; off < n;) {
			int32_t kl = sh_read_i32(buf + off + SH_ENTRY_KEY_LEN_AT);
			int32_t vl = sh_read_i32(buf + off + SH_ENTRY_VALUE_LEN_AT);
			const uint8_t *k = buf + off + SH_ENTRY_HEADER_SIZE;
			sh_emit(0, k, kl, k + kl, vl, NULL, 0);
			off += SH_ENTRY_HEADER_SIZE + kl + (vl > 0 ? vl : 0);
		}
	}
	free(buf);
	return sh_iter_close(it);
}

/* take_one reads the next entry of the iterator it, with a buffer that holds one entry of the
 * iterwrite command (keys of up to 2 bytes, values of 1) and not two, and appends it to out
 * as "key=value," (a window entry as "key@start=value,"). It returns 0 at the end, 1 after
 * an entry, and the code of a failure. */
static int32_t take_one(int32_t it, int window, char *out, size_t cap) {
	uint8_t buf[SH_WINDOW_ENTRY_HEADER_SIZE + 4];
	int32_t hdr = window ? SH_WINDOW_ENTRY_HEADER_SIZE : SH_ENTRY_HEADER_SIZE;
	int32_t n = sh_iter_next(it, buf, hdr + 4);
	if (n <= 0) return n;
	int32_t kl = sh_read_i32(buf + (window ? SH_WINDOW_ENTRY_KEY_LEN_AT : SH_ENTRY_KEY_LEN_AT));
	int32_t vl = sh_read_i32(buf + (window ? SH_WINDOW_ENTRY_VALUE_LEN_AT : SH_ENTRY_VALUE_LEN_AT));
	size_t used = strlen(out);
	const char *k = (const char *)buf + hdr;
	if (window)
		snprintf(out + used, cap - used, "%.*s@%lld=%.*s,", (int)kl, k,
		         (long long)sh_read_i64(buf + SH_WINDOW_ENTRY_START_AT), (int)vl, k + kl);
	else
		snprintf(out + used, cap - used, "%.*s=%.*s,", (int)kl, k, (int)vl, k + kl);
	return 1;
}

/* take_rest reads the rest of it into out, closes it and emits out under name, or the code of
 * a failure under name_error. */
static void take_rest(int32_t it, int window, char *out, size_t cap, const char *name) {
	int32_t n;
	while ((n = take_one(it, window, out, cap)) == 1) {}
	sh_iter_close(it);
	if (n < 0) {
		char k[32];
		snprintf(k, sizeof k, "%s_error", name);
		report(k, n);
		return;
	}
	emit_str(name, out);
}

/* iterwrite writes to a store while an iterator on it is open, between its first and second
 * entries, and emits what the iterator returned ("kv_during", "w_during"), what a new
 * iterator returns after ("kv_after", "w_after") and the codes of the writes ("kv_writes",
 * "w_writes"). "iterwrite-setup" wrote what they hold: a=1, b=1 and c=1 in the key-value
 * store "s", k's windows at 0, 70000 and 140000 in the window store "w". The writes put b2=2,
 * overwrite b with 9 and delete c; put j@0, overwrite k@70000 with 9 and put k@210000. */
static void iterwrite(void) {
	int32_t s = store("s"), w = store("w");
	char out[256] = "", codes[64];
	int32_t it = sh_state_range(s, NULL, SH_NULL_LEN, NULL, SH_NULL_LEN);
	take_one(it, 0, out, sizeof out);
	snprintf(codes, sizeof codes, "%d,%d,%d", sh_state_put(s, "b2", 2, "2", 1), sh_state_put(s, "b", 1, "9", 1),
	         sh_state_delete(s, "c", 1));
	emit_str("kv_writes", codes);
	take_rest(it, 0, out, sizeof out, "kv_during");
	out[0] = 0;
	take_rest(sh_state_range(s, NULL, SH_NULL_LEN, NULL, SH_NULL_LEN), 0, out, sizeof out, "kv_after");

	out[0] = 0;
	it = sh_window_fetch_all(w, 0, 1000000);
	take_one(it, 1, out, sizeof out);
	snprintf(codes, sizeof codes, "%d,%d,%d", sh_window_put(w, "j", 1, 0, "2", 1), sh_window_put(w, "k", 1, 70000, "9", 1),
	         sh_window_put(w, "k", 1, 210000, "2", 1));
	emit_str("w_writes", codes);
	take_rest(it, 1, out, sizeof out, "w_during");
	out[0] = 0;
	take_rest(sh_window_fetch_all(w, 0, 1000000), 1, out, sizeof out, "w_after");
}

/* iterwrite_setup writes what iterwrite reads (a commit between them makes it committed
 * state). */
static void iterwrite_setup(void) {
	int32_t s = store("s"), w = store("w");
	sh_state_put(s, "a", 1, "1", 1);
	sh_state_put(s, "b", 1, "1", 1);
	sh_state_put(s, "c", 1, "1", 1);
	sh_window_put(w, "k", 1, 0, "1", 1);
	sh_window_put(w, "k", 1, 70000, "1", 1);
	sh_window_put(w, "k", 1, 140000, "1", 1);
}

/* iters opens iterators until the host refuses, reports how many, and leaves them open
 * (the host closes them at the end of the call). */
static void iters(void) {
	int32_t s = store("s"), n = 0, rc;
	while ((rc = sh_state_range(s, NULL, SH_NULL_LEN, NULL, SH_NULL_LEN)) >= 0) n++;
	report("iters_opened", n);
	report("iters_refused", rc);
}

/* headers emits each header of the current record as a record. */
static int32_t headers(void) {
	uint8_t buf[512];
	int32_t n = sh_record_headers(buf, sizeof buf);
	if (n < 0) return n;
	for (int32_t off = 0; off < n;) {
		int32_t kl = sh_read_i32(buf + off), vl = sh_read_i32(buf + off + 4);
		sh_emit(0, buf + off + 8, kl, buf + off + 8 + kl, vl, NULL, 0);
		off += 8 + kl + (vl > 0 ? vl : 0);
	}
	return SH_OK;
}

/* meta emits the current record's metadata, as decoded from the record layout. */
static void meta(void) {
	char v[256];
	int32_t tl = sh_read_i32(rec + SH_RECORD_TOPIC_LEN_AT);
	snprintf(v, sizeof v, "topic=%.*s partition=%d offset=%lld ts=%lld key=%d value=%d headers=%d/%d",
	         (int)tl, (const char *)rec + SH_RECORD_HEADER_SIZE, sh_read_i32(rec + SH_RECORD_PARTITION_AT),
	         (long long)sh_read_i64(rec + SH_RECORD_OFFSET_AT), (long long)sh_read_i64(rec + SH_RECORD_TIMESTAMP_AT),
	         sh_read_i32(rec + SH_RECORD_KEY_LEN_AT), sh_read_i32(rec + SH_RECORD_VALUE_LEN_AT),
	         sh_read_i32(rec + SH_RECORD_HEADER_COUNT_AT), sh_read_i32(rec + SH_RECORD_HEADERS_SIZE_AT));
	emit_str("meta", v);
}

/* windows calls the window, session, store_info, stream_time and schedule functions with
 * bad and good arguments and reports each result. It needs a key-value store "s", a window
 * store "w" (window_size 10000) and a session store "ss", and a record at 1500. */
static void windows(void) {
	int32_t s = store("s"), w = store("w"), ss = store("ss"), n;
	uint8_t buf[64], small[4];
	int64_t t = 0;
	const void *end = (const void *)(uintptr_t)(mem_size() - 4);
	report("wput_on_kv", sh_window_put(s, "k", 1, 0, "v", 1));
	report("get_on_window", sh_state_get(w, "k", 1, buf, sizeof buf));
	report("range_on_session", sh_state_range(ss, NULL, SH_NULL_LEN, NULL, SH_NULL_LEN));
	report("sput_on_window", sh_session_put(w, "k", 1, 0, 1, "v", 1));
	report("wput_ok", sh_window_put(w, "k", 1, 1000, "v1", 2));
	report("wput_key_oob", sh_window_put(w, BAD, 100, 1000, "v", 1));
	report("wput_val_neg", sh_window_put(w, "k", 1, 1000, "v", -2));
	report("wput_bad_handle", sh_window_put(99, "k", 1, 1000, "v", 1));
	report("wget_ok", sh_window_get(w, "k", 1, 1000, buf, sizeof buf));
	report("wget_small", sh_window_get(w, "k", 1, 1000, small, 1));
	report("wget_missing", sh_window_get(w, "k", 1, 2000, buf, sizeof buf));
	report("wget_buf_oob", sh_window_get(w, "k", 1, 1000, (void *)end, 100));
	int32_t it = sh_window_fetch(w, "k", 1, 0, 5000);
	report("wfetch_small", sh_iter_next(it, small, sizeof small));
	report("wfetch_needed", sh_buffer_needed());
	n = sh_iter_next(it, buf, sizeof buf);
	report("wfetch_bytes", n);
	report("wfetch_start", n > 0 ? (int32_t)sh_read_i64(buf + SH_WINDOW_ENTRY_START_AT) : -1);
	report("wfetch_end", n > 0 ? (int32_t)sh_read_i64(buf + SH_WINDOW_ENTRY_END_AT) : -1);
	report("wfetch_done", sh_iter_next(it, buf, sizeof buf));
	report("wfetch_close", sh_iter_close(it));
	report("wfetch_key_oob", sh_window_fetch(w, BAD, 100, 0, 1));
	report("wfetch_all_on_kv", sh_window_fetch_all(s, 0, 1));
	report("sput_inverted", sh_session_put(ss, "u", 1, 10, 5, "v", 1));
	report("sput_ok", sh_session_put(ss, "u", 1, 1400, 1500, "sv", 2));
	report("sget_ok", sh_session_get(ss, "u", 1, 1400, 1500, buf, sizeof buf));
	report("sfind_on_kv", sh_session_find(s, "u", 1, 0, 100));
	it = sh_session_find(ss, "u", 1, 0, 2000);
	n = sh_iter_next(it, buf, sizeof buf);
	report("sfind_bytes", n);
	report("sfind_start", n > 0 ? (int32_t)sh_read_i64(buf + SH_WINDOW_ENTRY_START_AT) : -1);
	report("sfind_end", n > 0 ? (int32_t)sh_read_i64(buf + SH_WINDOW_ENTRY_END_AT) : -1);
	sh_iter_close(it);
	it = sh_session_find_all(ss, 1500, 1500);
	report("sfind_all_bytes", sh_iter_next(it, buf, sizeof buf));
	sh_iter_close(it);
	report("info_small", sh_store_info(w, small, sizeof small));
	report("info_ok", sh_store_info(w, buf, sizeof buf));
	report("info_type", sh_read_i32(buf + SH_STORE_INFO_TYPE_AT));
	report("info_size", (int32_t)sh_read_i64(buf + SH_STORE_INFO_WINDOW_SIZE_AT));
	sh_store_info(ss, buf, sizeof buf);
	report("info_gap", (int32_t)sh_read_i64(buf + SH_STORE_INFO_INACTIVITY_GAP_AT));
	sh_store_info(s, buf, sizeof buf);
	report("info_kv_type", sh_read_i32(buf + SH_STORE_INFO_TYPE_AT));
	report("time_oob", sh_stream_time((int64_t *)end));
	report("time_ok", sh_stream_time(&t));
	report("time", (int32_t)t);
	report("schedule_bad_kind", sh_schedule(7, 1000));
	report("schedule_zero", sh_schedule(SH_SCHEDULE_STREAM_TIME, 0));
}

/* The schedules statehost_init made: a wall-clock one every 100ms, a stream-time one every
 * second, then rarely firing wall-clock ones until the host refused one. */
static int32_t sched_wall, sched_stream, sched_more, sched_refused;

SH_EXPORT("statehost_init") int32_t statehost_init(void) {
	sched_wall = sh_schedule(SH_SCHEDULE_WALL_CLOCK, 100);
	sched_stream = sh_schedule(SH_SCHEDULE_STREAM_TIME, 1000);
	while ((sched_refused = sh_schedule(SH_SCHEDULE_WALL_CLOCK, INT64_MAX)) >= 0) sched_more++;
	return SH_OK;
}

/* punct_fail makes the next punctuation fail. */
static int punct_fail;

SH_EXPORT("statehost_punctuate") int32_t statehost_punctuate(int32_t id, int64_t time_ms) {
	char k[32], v[64];
	if (punct_fail) {
		sh_set_error("punctuation failed on purpose", 29);
		return SH_PROCESSOR_FAILED;
	}
	snprintf(k, sizeof k, "punct%d", id);
	snprintf(v, sizeof v, "%lld record_next=%d", (long long)time_ms, sh_record_next(rec, sizeof rec));
	emit_str(k, v);
	return SH_OK;
}

/* arg parses cmd as word followed by a space and a decimal number into *n. */
static int arg(const char *cmd, const char *word, long *n) {
	size_t l = strlen(word);
	if (strncmp(cmd, word, l) != 0 || cmd[l] != ' ' || cmd[l + 1] == 0) return 0;
	*n = 0;
	for (const char *p = cmd + l + 1; *p; p++) {
		if (*p < '0' || *p > '9') return 0;
		*n = *n * 10 + (*p - '0');
	}
	return 1;
}

/* run executes one command; a non-zero result ends the batch with it. */
static int32_t run(const char *cmd) {
	long n = 0;
	if (strcmp(cmd, "oob") == 0) oob();
	else if (strcmp(cmd, "limits") == 0) limits();
	else if (strcmp(cmd, "stale") == 0) stale();
	else if (strcmp(cmd, "keep") == 0) {
		/* an iterator left open until the next batch: its handle is then stale */
		static int32_t kept = -1;
		uint8_t buf[64];
		if (kept >= 0) report("kept_next", sh_iter_next(kept, buf, sizeof buf));
		kept = sh_state_prefix(store("s"), "a", 1);
	}
	else if (strncmp(cmd, "prefix ", 7) == 0) return scan(1, cmd + 7);
	else if (strcmp(cmd, "range") == 0) return scan(0, "");
	else if (strcmp(cmd, "iters") == 0) iters();
	else if (strcmp(cmd, "iterwrite-setup") == 0) iterwrite_setup();
	else if (strcmp(cmd, "iterwrite") == 0) iterwrite();
	else if (strcmp(cmd, "headers") == 0) return headers();
	else if (strcmp(cmd, "meta") == 0) meta();
	else if (strcmp(cmd, "windows") == 0) windows();
	else if (strcmp(cmd, "punctfail") == 0) punct_fail = 1;
	else if (strcmp(cmd, "schedules") == 0) {
		report("wall", sched_wall);
		report("stream", sched_stream);
		report("schedules_opened", sched_more);
		report("schedules_refused", sched_refused);
		report("schedule_in_batch", sh_schedule(SH_SCHEDULE_WALL_CLOCK, 100));
	}
	else if (strcmp(cmd, "sandbox") == 0) {
		/* No preopened directories, no environment, no arguments; stdout goes to the log. */
		FILE *f = fopen("/etc/passwd", "r");
		emit_str("fopen", f ? "opened" : "refused");
		emit_str("getenv", getenv("PATH") ? "set" : "unset");
		size_t argc = 0, argv_size = 0;
		(void)!__wasi_args_sizes_get(&argc, &argv_size);
		report("argc", (int32_t)argc);
		printf("hello on stdout\n");
		fflush(stdout);
	} else if (strcmp(cmd, "nulls") == 0) {
		sh_emit(0, NULL, SH_NULL_LEN, NULL, SH_NULL_LEN, NULL, 0);
		sh_emit(0, "", 0, "", 0, NULL, 0);
		uint8_t hdr[8 + 1 + 8 + 1] = {1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 'a', 1, 0, 0, 0, 0, 0, 0, 0, 'b'};
		sh_emit(0, "h", 1, "v", 1, hdr, sizeof hdr);
	} else if (strcmp(cmd, "put") == 0) {
		int32_t s = store("s");
		sh_state_put(s, "a1", 2, "x", 1);
		sh_state_put(s, "a2", 2, "", 0);
		sh_state_put(s, "b1", 2, "y", 1);
		sh_state_put(s, "c1", 2, "z", 1);
		sh_state_put(s, "gone", 4, "q", 1);
		sh_state_put(s, "gone", 4, NULL, SH_NULL_LEN); /* null value: a delete */
	} else if (strcmp(cmd, "trap") == 0) __builtin_trap();
	else if (strcmp(cmd, "loop") == 0) for (;;) sink++;
	else if (strcmp(cmd, "bomb") == 0) {
		for (;;) {
			uint8_t *p = malloc(1 << 20);
			if (p == NULL) __builtin_trap();
			memset(p, 1, 1 << 20);
			sink += (uintptr_t)p; /* keeps the allocation from being optimized away */
		}
	} else if (strcmp(cmd, "fail") == 0) {
		sh_set_error("probe failed on purpose", 23);
		return SH_PROCESSOR_FAILED;
	} else if (strcmp(cmd, "exit") == 0) exit(7);
	else if (strcmp(cmd, "stop") == 0) return 1; /* "stop" returns a positive code */
	else if (arg(cmd, "spin", &n)) {
		uint64_t x = 1;
		for (long i = 0; i < n; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
		sink = x;
	} else if (arg(cmd, "get", &n)) {
		int32_t s = store("s");
		uint8_t buf[64];
		for (long i = 0; i < n; i++) sink += (uint64_t)sh_state_get(s, "key", 3, buf, sizeof buf);
	} else if (arg(cmd, "put", &n)) {
		int32_t s = store("s");
		for (long i = 0; i < n; i++) sh_state_put(s, "key", 3, "value", 5);
	} else if (arg(cmd, "log", &n)) {
		char line[48];
		for (long i = 0; i < n; i++) sh_log(SH_LEVEL_INFO, line, snprintf(line, sizeof line, "probe log line %ld", i));
	} else if (arg(cmd, "print", &n)) {
		for (long i = 0; i < n; i++) fprintf(stderr, "probe stderr line %ld\n", i);
	} else if (strncmp(cmd, "say ", 4) == 0) fprintf(stderr, "%s\n", cmd + 4); /* one line to stderr */
	return SH_OK;
}

SH_EXPORT("statehost_process_batch") int32_t statehost_process_batch(int32_t count) {
	(void)count;
	for (;;) {
		int32_t n = sh_record_next(rec, sizeof rec - 1);
		if (n < 0) return n;
		if (n == 0) return SH_OK;
		int32_t tl = sh_read_i32(rec + SH_RECORD_TOPIC_LEN_AT);
		int32_t kl = sh_read_i32(rec + SH_RECORD_KEY_LEN_AT);
		int32_t vl = sh_read_i32(rec + SH_RECORD_VALUE_LEN_AT);
		if (vl < 0) continue;
		char *v = (char *)rec + SH_RECORD_HEADER_SIZE + tl + (kl > 0 ? kl : 0);
		v[vl] = 0; /* rec has a spare byte past the largest record */
		if (strcmp(v, "skip") == 0) return SH_OK; /* returns without taking the rest */
		int32_t rc = run(v);
		if (rc != SH_OK) return rc;
	}
}
