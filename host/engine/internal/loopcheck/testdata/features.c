// features.c exercises the instruction encodings loopcheck must walk: SIMD (0xfd, with
// memory arguments, lanes, constants and shuffles), bulk memory and saturating truncation
// (0xfc), sign extension, multi-value blocks, call_indirect, br_table, loops of every kind.
// Build (checked in as features.wasm):
//   clang --target=wasm32 -O2 -nostdlib -msimd128 -mbulk-memory -mnontrapping-fptoint \
//     -msign-ext -Wl,--no-entry -Wl,--export-dynamic -o features.wasm features.c
#include <wasm_simd128.h>

typedef int (*op_fn)(int);

static int twice(int x) { return 2 * x; }
static int plus3(int x) { return x + 3; }
static op_fn ops[] = {twice, plus3};

static unsigned char buf[256];
static unsigned char dst[256];

__attribute__((export_name("simd")))
int simd(int n) {
	v128_t acc = wasm_i32x4_splat(0);
	v128_t k = wasm_i32x4_const(1, 2, 3, 4);
	for (int i = 0; i < n; i++) {
		acc = wasm_i32x4_add(acc, wasm_i32x4_mul(k, wasm_i32x4_splat(i)));
		acc = wasm_i8x16_shuffle(acc, acc, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
	}
	wasm_v128_store(buf, acc);
	v128_t l = wasm_v128_load32_zero(buf + 4);
	l = wasm_v128_load8_lane(buf + 1, l, 3);
	wasm_v128_store16_lane(buf + 32, l, 1);
	return wasm_i32x4_extract_lane(acc, 0) + wasm_i32x4_extract_lane(acc, 3) +
		wasm_i32x4_extract_lane(l, 0) + buf[32];
}

__attribute__((export_name("bulk")))
int bulk(int n) {
	__builtin_memset(buf, n, sizeof buf);
	__builtin_memcpy(dst, buf, (unsigned)n & 0xff);
	int s = 0;
	for (int i = 0; i < 256; i++) s += dst[i];
	return s;
}

__attribute__((export_name("conv")))
int conv(float f, double d, int x) {
	int a = (int)f;            // i32.trunc_sat_f32_s with -mnontrapping-fptoint
	long long b = (long long)d; // i64.trunc_sat_f64_s
	signed char c = (signed char)x;
	short e = (short)x;
	return a + (int)b + c + e;
}

__attribute__((export_name("dispatch")))
int dispatch(int which, int x) {
	int r = 0;
	do {
		switch (which & 7) {
		case 0: r += ops[0](x); break;
		case 1: r += ops[1](x); break;
		case 2: r -= x; break;
		case 3: r ^= x; break;
		case 4: r *= 3; break;
		case 5: r |= 1; break;
		default: r += 7;
		}
		which >>= 3;
	} while (which);
	return r;
}

__attribute__((export_name("nested")))
long long nested(int n) {
	long long s = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++) {
			if ((i ^ j) & 1) continue;
			s += (long long)i * 1000003 + j;
		}
	return s;
}

// spin never returns on its own: the host must stop it.
__attribute__((export_name("spin")))
int spin(int x) {
	volatile int v = x;
	for (;;) v = v * 31 + 7;
}

// fib runs for ages on large n, through calls more than loops.
__attribute__((export_name("fib")))
long long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
