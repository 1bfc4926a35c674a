/*
 * abifuzz: a C guest that calls the statehost host functions (and WASI's fd_write) with the
 * pointers, lengths, handles and times the engine's FuzzABI chose, and logs each call with
 * the arguments it passed and the result it got, for the test to check.
 *
 * The value of each record is a program; a record with a shorter value does nothing:
 *
 *   u32 data_len, then data_len bytes, copied to the start of the scratch area
 *   ops of 64 bytes each: u8 fn, then 7 arguments of 9 bytes: u8 mode, i64 value
 *
 * fn indexes the switch in call() (the order of fuzzFuncs in fuzz_abi_test.go). An argument
 * is, by mode: 0 the value; 1 the result of an earlier op of the program (value & 0xff,
 * modulo the ops done) + (value >> 8), for handles. Pointers and i32 parameters take the low
 * 32 bits. The scratch area, where the data goes, is the memory from __heap_base (exported
 * as abifuzz_scratch) to its end: this guest never allocates, so only the host writes there,
 * and the test keeps the host's output buffers out of the rest (where the log is, exported as
 * abifuzz_log).
 *
 * Build (from the repository root; the engine's tests rebuild it when clang is present, and
 * go test ./host/engine -run TestCPrebuiltsCurrent -rewrite refreshes abifuzz.wasm):
 *
 *   clang --target=wasm32-wasi --sysroot=/usr -isystem /usr/include/wasm32-wasi \
 *     -L/usr/lib/wasm32-wasi -O2 -mexec-model=reactor -nodefaultlibs -lc -I abi \
 *     -o host/engine/testdata/c/abifuzz.wasm host/engine/testdata/c/abifuzz.c
 */
#include <stdint.h>
#include <string.h>
#include <wasi/api.h>

#include "statehost.h"

STATEHOST_DECLARE_ABI_VERSION;

#define NARGS 7
#define OP_SIZE (1 + NARGS * 9)
#define MAX_OPS 128

extern unsigned char __heap_base;

static uint8_t rec[64 << 10];

/* The log the test reads: one entry per op done in the current batch. */
struct entry {
	int32_t fn;
	int32_t result;
	int64_t args[NARGS];
};
static struct {
	uint32_t count;
	uint32_t reserved;
	struct entry e[MAX_OPS];
} oplog;

SH_EXPORT("abifuzz_log") uint32_t abifuzz_log(void) { return (uint32_t)(uintptr_t)&oplog; }
SH_EXPORT("abifuzz_scratch") uint32_t abifuzz_scratch(void) { return (uint32_t)(uintptr_t)&__heap_base; }

static uint32_t mem_size(void) { return (uint32_t)__builtin_wasm_memory_size(0) * 65536u; }

#define I(k) ((int32_t)a[k])
#define P(k) ((void *)(uintptr_t)(uint32_t)a[k])

static int32_t call(uint32_t fn, const int64_t *a) {
	switch (fn) {
	case 0: return sh_store_open(P(0), I(1));
	case 1: return sh_output_open(P(0), I(1));
	case 2: return sh_state_get(I(0), P(1), I(2), P(3), I(4));
	case 3: return sh_state_put(I(0), P(1), I(2), P(3), I(4));
	case 4: return sh_state_delete(I(0), P(1), I(2));
	case 5: return sh_state_range(I(0), P(1), I(2), P(3), I(4));
	case 6: return sh_state_prefix(I(0), P(1), I(2));
	case 7: return sh_iter_next(I(0), P(1), I(2));
	case 8: return sh_iter_close(I(0));
	case 9: return sh_record_next(P(0), I(1));
	case 10: return sh_record_headers(P(0), I(1));
	case 11: return sh_emit(I(0), P(1), I(2), P(3), I(4), P(5), I(6));
	case 12: return sh_log(I(0), P(1), I(2));
	case 13: return sh_set_error(P(0), I(1));
	case 14: return sh_buffer_needed();
	case 15: return sh_store_info(I(0), P(1), I(2));
	case 16: return sh_window_put(I(0), P(1), I(2), a[3], P(4), I(5));
	case 17: return sh_window_get(I(0), P(1), I(2), a[3], P(4), I(5));
	case 18: return sh_window_fetch(I(0), P(1), I(2), a[3], a[4]);
	case 19: return sh_window_fetch_all(I(0), a[1], a[2]);
	case 20: return sh_session_put(I(0), P(1), I(2), a[3], a[4], P(5), I(6));
	case 21: return sh_session_get(I(0), P(1), I(2), a[3], a[4], P(5), I(6));
	case 22: return sh_session_find(I(0), P(1), I(2), a[3], a[4]);
	case 23: return sh_session_find_all(I(0), a[1], a[2]);
	case 24: return sh_stream_time(P(0));
	case 25: return sh_schedule(I(0), a[1]);
	case 26: return __wasi_fd_write((__wasi_fd_t)I(0), P(1), (size_t)(uint32_t)a[2], P(3));
	}
	return -1000;
}

/* run does the program p of n bytes. */
static void run(const uint8_t *p, uint32_t n) {
	if (n < 4) return;
	uint32_t data_len = (uint32_t)sh_read_i32(p);
	uint8_t *scratch = &__heap_base;
	uint32_t room = mem_size() - (uint32_t)(uintptr_t)scratch;
	if (data_len > n - 4 || data_len > room) return;
	memcpy(scratch, p + 4, data_len);
	uint32_t done = 0; /* ops done by this program */
	for (const uint8_t *op = p + 4 + data_len; op + OP_SIZE <= p + n && oplog.count < MAX_OPS; op += OP_SIZE) {
		struct entry *e = &oplog.e[oplog.count];
		e->fn = op[0];
		for (int k = 0; k < NARGS; k++) {
			uint8_t mode = op[1 + k * 9];
			int64_t v = sh_read_i64(op + 2 + k * 9);
			if (mode == 1)
				v = (v >> 8) + (done ? oplog.e[oplog.count - done + (uint32_t)(v & 0xff) % done].result : 0);
			e->args[k] = v;
		}
		e->result = call((uint32_t)e->fn, e->args);
		oplog.count++;
		done++;
	}
}

SH_EXPORT("statehost_process_batch") int32_t statehost_process_batch(int32_t count) {
	(void)count;
	oplog.count = 0;
	for (;;) {
		int32_t n = sh_record_next(rec, sizeof rec);
		if (n <= 0) return n;
		int32_t topic_len = sh_read_i32(rec + SH_RECORD_TOPIC_LEN_AT);
		int32_t key_len = sh_read_i32(rec + SH_RECORD_KEY_LEN_AT);
		int32_t value_len = sh_read_i32(rec + SH_RECORD_VALUE_LEN_AT);
		if (value_len <= 0) continue;
		run(rec + SH_RECORD_HEADER_SIZE + topic_len + (key_len > 0 ? key_len : 0), (uint32_t)value_len);
	}
}
