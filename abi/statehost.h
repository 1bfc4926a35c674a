/*
 * statehost.h: ABI version 1 between the statehost host and a wasm32 guest, for C.
 *
 * The specification is the package documentation of github.com/statehost/statehost/abi
 * (abi/doc.go); this header restates its names, codes and layouts for C and must agree with
 * abi/abi.go and abi/layout.go (a Go test checks the numbers). Build a guest with clang and
 * wasi-libc, for example:
 *
 *   clang --target=wasm32-wasi --sysroot=/usr -isystem /usr/include/wasm32-wasi \
 *     -L/usr/lib/wasm32-wasi -O2 -mexec-model=reactor -nodefaultlibs -lc \
 *     -I abi -o guest.wasm guest.c
 *
 * A guest must not have a start section (the host refuses it): run setup in constructors
 * (called by _initialize) or in statehost_init, which runs once per instance. An instance
 * may serve many tasks, one call at a time (STATEHOST_DECLARE_INSTANCE_PER_TASK below).
 */
#ifndef STATEHOST_H
#define STATEHOST_H

#include <stdint.h>
#include <string.h>

#define STATEHOST_ABI_VERSION 1

/* Status codes: >= 0 success, < 0 as below. */
#define SH_OK 0
#define SH_NOT_FOUND (-1)
#define SH_BUFFER_TOO_SMALL (-2)
#define SH_OUT_OF_BOUNDS (-3)
#define SH_BAD_ARGUMENT (-4)
#define SH_UNKNOWN_STORE (-5)
#define SH_UNKNOWN_OUTPUT (-6)
#define SH_BAD_HANDLE (-7)
#define SH_NO_RECORD (-8)
#define SH_STORE_FAILED (-9)
#define SH_EMIT_FAILED (-10)
#define SH_LIMIT (-11) /* a host limit; also a state write or emit whose Kafka record would not
                        * fit its topic (max.message.bytes, about 1 MiB by default), or an emit
                        * past the record's emit budget (64 MiB by default; the batch fails):
                        * nothing changed. See "Size limits" in abi/doc.go. */
#define SH_PROCESSOR_FAILED (-12)
#define SH_WRONG_STORE_TYPE (-13)
#define SH_DROPPED 1 /* window_put, session_put: success without a write */

/* A length of SH_NULL_LEN is null (key, value or header value), 0 is empty. */
#define SH_NULL_LEN (-1)

/* Log levels. */
#define SH_LEVEL_TRACE 1
#define SH_LEVEL_DEBUG 2
#define SH_LEVEL_INFO 3
#define SH_LEVEL_WARN 4
#define SH_LEVEL_ERROR 5

/* Limits. */
#define SH_MAX_NAME_LEN 255
#define SH_MAX_OPEN_ITERATORS 16
#define SH_MAX_LOG_LEN 65536
#define SH_MAX_ERROR_LEN 4096
#define SH_MAX_EMIT_BYTES 1048576 /* key_len + val_len + hdr_len of one emit (null counts 0) */
#define SH_MAX_EMIT_HEADERS 1024  /* headers of one emit */
/* State writes and emits are also bounded by their Kafka topic's record size, and the emits of
 * one record by the processor's emit budget: SH_LIMIT. */
#define SH_MAX_SCHEDULES 16

/* Store types (store_info) and punctuation kinds (schedule). */
#define SH_STORE_KEYVALUE 0
#define SH_STORE_WINDOW 1
#define SH_STORE_SESSION 2
#define SH_SCHEDULE_STREAM_TIME 0
#define SH_SCHEDULE_WALL_CLOCK 1
#define SH_NO_TIME (-1)

/* Record header written by record_next (little-endian, unaligned). */
#define SH_RECORD_OFFSET_AT 0        /* int64 Kafka offset */
#define SH_RECORD_TIMESTAMP_AT 8     /* int64 ms since the Unix epoch */
#define SH_RECORD_PARTITION_AT 16    /* int32 */
#define SH_RECORD_TOPIC_LEN_AT 20    /* int32 >= 0 */
#define SH_RECORD_KEY_LEN_AT 24      /* int32, SH_NULL_LEN = null */
#define SH_RECORD_VALUE_LEN_AT 28    /* int32, SH_NULL_LEN = null (tombstone) */
#define SH_RECORD_HEADER_COUNT_AT 32 /* int32 */
#define SH_RECORD_HEADERS_SIZE_AT 36 /* int32, bytes record_headers needs */
#define SH_RECORD_HEADER_SIZE 40     /* then topic, key, value bytes */

/* Entry (iter_next, record_headers, emit headers): key_len, value_len, key, value. */
#define SH_ENTRY_KEY_LEN_AT 0
#define SH_ENTRY_VALUE_LEN_AT 4
#define SH_ENTRY_HEADER_SIZE 8

/* Window entry (iter_next on window and session iterators). */
#define SH_WINDOW_ENTRY_START_AT 0     /* int64 start, ms */
#define SH_WINDOW_ENTRY_END_AT 8       /* int64 end, ms */
#define SH_WINDOW_ENTRY_KEY_LEN_AT 16  /* int32 */
#define SH_WINDOW_ENTRY_VALUE_LEN_AT 20 /* int32 */
#define SH_WINDOW_ENTRY_HEADER_SIZE 24 /* then key, value bytes */

/* Store description (store_info); durations in ms. */
#define SH_STORE_INFO_TYPE_AT 0
#define SH_STORE_INFO_WINDOW_SIZE_AT 8
#define SH_STORE_INFO_ADVANCE_AT 16
#define SH_STORE_INFO_GRACE_AT 24
#define SH_STORE_INFO_RETENTION_AT 32
#define SH_STORE_INFO_INACTIVITY_GAP_AT 40
#define SH_STORE_INFO_SIZE 48

#define SH_IMPORT(name) __attribute__((import_module("statehost"), import_name(name)))
#define SH_EXPORT(name) __attribute__((export_name(name)))

SH_IMPORT("store_open") int32_t sh_store_open(const void *name, int32_t name_len);
SH_IMPORT("output_open") int32_t sh_output_open(const void *name, int32_t name_len);
SH_IMPORT("state_get") int32_t sh_state_get(int32_t store, const void *key, int32_t key_len, void *buf, int32_t buf_cap);
SH_IMPORT("state_put") int32_t sh_state_put(int32_t store, const void *key, int32_t key_len, const void *val, int32_t val_len);
SH_IMPORT("state_delete") int32_t sh_state_delete(int32_t store, const void *key, int32_t key_len);
SH_IMPORT("state_range") int32_t sh_state_range(int32_t store, const void *start, int32_t start_len, const void *end, int32_t end_len);
SH_IMPORT("state_prefix") int32_t sh_state_prefix(int32_t store, const void *prefix, int32_t prefix_len);
SH_IMPORT("iter_next") int32_t sh_iter_next(int32_t iterator, void *buf, int32_t buf_cap);
SH_IMPORT("iter_close") int32_t sh_iter_close(int32_t iterator);
SH_IMPORT("record_next") int32_t sh_record_next(void *buf, int32_t buf_cap);
SH_IMPORT("record_headers") int32_t sh_record_headers(void *buf, int32_t buf_cap);
SH_IMPORT("emit") int32_t sh_emit(int32_t output, const void *key, int32_t key_len, const void *val, int32_t val_len, const void *hdr, int32_t hdr_len);
SH_IMPORT("log") int32_t sh_log(int32_t level, const void *msg, int32_t msg_len);
SH_IMPORT("set_error") int32_t sh_set_error(const void *msg, int32_t msg_len);
SH_IMPORT("buffer_needed") int32_t sh_buffer_needed(void);
SH_IMPORT("store_info") int32_t sh_store_info(int32_t store, void *buf, int32_t buf_cap);
SH_IMPORT("window_put") int32_t sh_window_put(int32_t store, const void *key, int32_t key_len, int64_t start_ms, const void *val, int32_t val_len);
SH_IMPORT("window_get") int32_t sh_window_get(int32_t store, const void *key, int32_t key_len, int64_t start_ms, void *buf, int32_t buf_cap);
SH_IMPORT("window_fetch") int32_t sh_window_fetch(int32_t store, const void *key, int32_t key_len, int64_t from_ms, int64_t to_ms);
SH_IMPORT("window_fetch_all") int32_t sh_window_fetch_all(int32_t store, int64_t from_ms, int64_t to_ms);
SH_IMPORT("session_put") int32_t sh_session_put(int32_t store, const void *key, int32_t key_len, int64_t start_ms, int64_t end_ms, const void *val, int32_t val_len);
SH_IMPORT("session_get") int32_t sh_session_get(int32_t store, const void *key, int32_t key_len, int64_t start_ms, int64_t end_ms, void *buf, int32_t buf_cap);
SH_IMPORT("session_find") int32_t sh_session_find(int32_t store, const void *key, int32_t key_len, int64_t earliest_end_ms, int64_t latest_start_ms);
SH_IMPORT("session_find_all") int32_t sh_session_find_all(int32_t store, int64_t earliest_end_ms, int64_t latest_end_ms);
SH_IMPORT("stream_time") int32_t sh_stream_time(int64_t *out);
SH_IMPORT("schedule") int32_t sh_schedule(int32_t kind, int64_t interval_ms);
/* A guest that calls sh_schedule exports:
   SH_EXPORT("statehost_punctuate") int32_t punctuate(int32_t id, int64_t time_ms); */

/* Declares the ABI version: put STATEHOST_DECLARE_ABI_VERSION; once in a guest, at file
 * scope. The macro ends in a declaration that the semicolon closes, so that the line is
 * plain C (no empty declaration: -pedantic and -Wextra-semi have nothing to say). */
#define STATEHOST_DECLARE_ABI_VERSION \
	SH_EXPORT("statehost_abi_version_1") void statehost_abi_version_1(void) {} \
	void statehost_abi_version_1(void)

/* An instance may serve many tasks of its processor, one call at a time: keep per-task state
 * in stores, not in globals; statehost_init runs once per instance (see "Instances and tasks"
 * in abi/doc.go). A guest that needs an instance of its own per task puts
 * STATEHOST_DECLARE_INSTANCE_PER_TASK; once. */
#define STATEHOST_DECLARE_INSTANCE_PER_TASK \
	SH_EXPORT("statehost_instance_per_task") void statehost_instance_per_task(void) {} \
	void statehost_instance_per_task(void)

/* Store versions (see "Store versions and migration" in abi/doc.go). A guest whose stored
 * values change form declares the version of each store it changed, from 2 up (a store it
 * does not name is at version 1), once:
 *
 *   STATEHOST_DECLARE_STORE_VERSIONS({"counts", 2}, {"totals", 3});
 *
 * and exports statehost_migrate, which the host calls with the entries of an older version:
 *
 *   SH_EXPORT("statehost_migrate") int32_t migrate(int32_t store, int32_t from_version, int32_t entries);
 *
 * It reads the old entries with sh_iter_next(entries, ...) and writes each one's new form
 * with sh_state_put(store, ...), under the same key or another; an entry it does not write is
 * deleted. The macro defines statehost_store_version, which finds a store by its handle; put it
 * at file scope. */
typedef struct {
	const char *name;
	int32_t version;
} sh_store_version_t;
#define STATEHOST_DECLARE_STORE_VERSIONS(...) \
	SH_EXPORT("statehost_store_version") int32_t statehost_store_version(int32_t store) { \
		static const sh_store_version_t versions[] = {__VA_ARGS__}; \
		for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) \
			if (sh_store_open(versions[i].name, (int32_t)strlen(versions[i].name)) == store) \
				return versions[i].version; \
		return 1; \
	} \
	int32_t statehost_store_version(int32_t store)

/* Reversible migrations (see "Reversible migrations" in abi/doc.go). A guest whose migration
 * of a store can be undone, so that a rollback to the module before it is possible, declares
 * for each such store the lowest version it can bring the entries back to, once:
 *
 *   STATEHOST_DECLARE_STORE_REVERSIBLE({"counts", 1});
 *
 * and exports statehost_migrate_reverse, which the host calls with entries of the version the
 * guest declares, to be written in the form of to_version:
 *
 *   SH_EXPORT("statehost_migrate_reverse") int32_t migrate_reverse(int32_t store, int32_t to_version, int32_t entries);
 *
 * A store it does not name is not reversible (the macro answers INT32_MAX for it). */
#define STATEHOST_DECLARE_STORE_REVERSIBLE(...) \
	SH_EXPORT("statehost_store_reversible") int32_t statehost_store_reversible(int32_t store) { \
		static const sh_store_version_t floors[] = {__VA_ARGS__}; \
		for (size_t i = 0; i < sizeof floors / sizeof floors[0]; i++) \
			if (sh_store_open(floors[i].name, (int32_t)strlen(floors[i].name)) == store) \
				return floors[i].version; \
		return INT32_MAX; \
	} \
	int32_t statehost_store_reversible(int32_t store)

/* Unaligned little-endian reads (wasm32 is little-endian). */
static inline int32_t sh_read_i32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }
static inline int64_t sh_read_i64(const uint8_t *p) { int64_t v; memcpy(&v, p, 8); return v; }
static inline void sh_write_i32(uint8_t *p, int32_t v) { memcpy(p, &v, 4); }

#endif
