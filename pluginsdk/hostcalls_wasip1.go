//go:build wasip1

package pluginsdk

import (
	"unsafe"

	"github.com/statehost/statehost/abi"
)

// The statehost imports (see package abi). Pointers are guest memory offsets; Go keeps the
// memory behind a pointer argument alive and in place for the duration of the call.

//go:wasmimport statehost store_open
func importStoreOpen(name unsafe.Pointer, nameLen int32) int32

//go:wasmimport statehost output_open
func importOutputOpen(name unsafe.Pointer, nameLen int32) int32

//go:wasmimport statehost state_get
func importStateGet(store int32, key unsafe.Pointer, keyLen int32, buf unsafe.Pointer, bufCap int32) int32

//go:wasmimport statehost state_put
func importStatePut(store int32, key unsafe.Pointer, keyLen int32, val unsafe.Pointer, valLen int32) int32

//go:wasmimport statehost state_delete
func importStateDelete(store int32, key unsafe.Pointer, keyLen int32) int32

//go:wasmimport statehost state_range
func importStateRange(store int32, start unsafe.Pointer, startLen int32, end unsafe.Pointer, endLen int32) int32

//go:wasmimport statehost state_prefix
func importStatePrefix(store int32, prefix unsafe.Pointer, prefixLen int32) int32

//go:wasmimport statehost iter_next
func importIterNext(iter int32, buf unsafe.Pointer, bufCap int32) int32

//go:wasmimport statehost iter_close
func importIterClose(iter int32) int32

//go:wasmimport statehost record_next
func importRecordNext(buf unsafe.Pointer, bufCap int32) int32

//go:wasmimport statehost record_headers
func importRecordHeaders(buf unsafe.Pointer, bufCap int32) int32

//go:wasmimport statehost emit
func importEmit(output int32, key unsafe.Pointer, keyLen int32, val unsafe.Pointer, valLen int32, hdr unsafe.Pointer, hdrLen int32) int32

//go:wasmimport statehost log
func importLog(level int32, msg unsafe.Pointer, msgLen int32) int32

//go:wasmimport statehost set_error
func importSetError(msg unsafe.Pointer, msgLen int32) int32

//go:wasmimport statehost buffer_needed
func importBufferNeeded() int32

// Window and session stores, stream time and punctuation: times and durations (the "_ms"
// parameters) are i64.

//go:wasmimport statehost store_info
func importStoreInfo(store int32, buf unsafe.Pointer, bufCap int32) int32

//go:wasmimport statehost window_put
func importWindowPut(store int32, key unsafe.Pointer, keyLen int32, startMs int64, val unsafe.Pointer, valLen int32) int32

//go:wasmimport statehost window_get
func importWindowGet(store int32, key unsafe.Pointer, keyLen int32, startMs int64, buf unsafe.Pointer, bufCap int32) int32

//go:wasmimport statehost window_fetch
func importWindowFetch(store int32, key unsafe.Pointer, keyLen int32, fromMs, toMs int64) int32

//go:wasmimport statehost window_fetch_all
func importWindowFetchAll(store int32, fromMs, toMs int64) int32

//go:wasmimport statehost session_put
func importSessionPut(store int32, key unsafe.Pointer, keyLen int32, startMs, endMs int64, val unsafe.Pointer, valLen int32) int32

//go:wasmimport statehost session_get
func importSessionGet(store int32, key unsafe.Pointer, keyLen int32, startMs, endMs int64, buf unsafe.Pointer, bufCap int32) int32

//go:wasmimport statehost session_find
func importSessionFind(store int32, key unsafe.Pointer, keyLen int32, earliestEndMs, latestStartMs int64) int32

//go:wasmimport statehost session_find_all
func importSessionFindAll(store int32, earliestEndMs, latestEndMs int64) int32

//go:wasmimport statehost stream_time
func importStreamTime(out unsafe.Pointer) int32

//go:wasmimport statehost schedule
func importSchedule(kind int32, intervalMs int64) int32

// The exports (see package abi).

//go:wasmexport statehost_abi_version_1
func exportABIVersion1() {}

//go:wasmexport statehost_init
func exportInit() int32 { return guestInit() }

//go:wasmexport statehost_process_batch
func exportProcessBatch(count int32) int32 { return processBatch(count) }

//go:wasmexport statehost_punctuate
func exportPunctuate(id int32, timeMs int64) int32 { return punctuate(id, timeMs) }

//go:wasmexport statehost_store_version
func exportStoreVersion(store int32) int32 { return guestStoreVersion(store) }

//go:wasmexport statehost_migrate
func exportMigrate(store, fromVersion, entries int32) int32 {
	return guestMigrate(store, fromVersion, entries)
}

//go:wasmexport statehost_store_reversible
func exportStoreReversible(store int32) int32 { return guestStoreReversible(store) }

//go:wasmexport statehost_migrate_reverse
func exportMigrateReverse(store, toVersion, entries int32) int32 {
	return guestMigrateReverse(store, toVersion, entries)
}

// ptr returns the address and length of b; a nil b is null (abi.NullLen).
func ptr(b []byte) (unsafe.Pointer, int32) {
	if b == nil {
		return nil, abi.NullLen
	}
	return unsafe.Pointer(unsafe.SliceData(b)), int32(len(b))
}

// nonNull returns the address and length of b; nil is empty.
func nonNull(b []byte) (unsafe.Pointer, int32) {
	return unsafe.Pointer(unsafe.SliceData(b)), int32(len(b))
}

func str(s string) (unsafe.Pointer, int32) {
	return unsafe.Pointer(unsafe.StringData(s)), int32(len(s))
}

func hStoreOpen(name string) int32 {
	p, n := str(name)
	return importStoreOpen(p, n)
}

func hOutputOpen(name string) int32 {
	p, n := str(name)
	return importOutputOpen(p, n)
}

// The wrappers on the per-record path (hRecordNext, hStateGet, hStatePut, hEmit) pass their
// arguments straight through, with as little work as possible: in wasm every Go call and
// branch on that path costs (hRecordNext and hStateGet fit the inlining budget).

func hStateGet(store int32, key, buf []byte) int32 {
	return importStateGet(store, unsafe.Pointer(unsafe.SliceData(key)), int32(len(key)),
		unsafe.Pointer(unsafe.SliceData(buf)), int32(len(buf)))
}

func hStatePut(store int32, key, value []byte) int32 {
	return importStatePut(store, unsafe.Pointer(unsafe.SliceData(key)), int32(len(key)),
		unsafe.Pointer(unsafe.SliceData(value)), nullableLen(value))
}

// nullableLen is the length of b, NullLen for nil.
func nullableLen(b []byte) int32 {
	if b == nil {
		return abi.NullLen
	}
	return int32(len(b))
}

func hStateDelete(store int32, key []byte) int32 {
	kp, kn := nonNull(key)
	return importStateDelete(store, kp, kn)
}

func hStateRange(store int32, start, end []byte) int32 {
	sp, sn := ptr(start)
	ep, en := ptr(end)
	return importStateRange(store, sp, sn, ep, en)
}

func hStatePrefix(store int32, prefix []byte) int32 {
	pp, pn := nonNull(prefix)
	return importStatePrefix(store, pp, pn)
}

func hIterNext(iter int32, buf []byte) int32 {
	bp, bn := nonNull(buf)
	return importIterNext(iter, bp, bn)
}

func hIterClose(iter int32) int32 { return importIterClose(iter) }

func hRecordNext(buf []byte) int32 {
	bp, bn := nonNull(buf)
	return importRecordNext(bp, bn)
}

func hRecordHeaders(buf []byte) int32 {
	bp, bn := nonNull(buf)
	return importRecordHeaders(bp, bn)
}

func hEmit(output int32, key, value, hdrs []byte) int32 {
	return importEmit(output, unsafe.Pointer(unsafe.SliceData(key)), nullableLen(key),
		unsafe.Pointer(unsafe.SliceData(value)), nullableLen(value),
		unsafe.Pointer(unsafe.SliceData(hdrs)), int32(len(hdrs)))
}

func hLog(level int32, msg string) int32 {
	p, n := str(msg)
	return importLog(level, p, n)
}

func hSetError(msg string) int32 {
	p, n := str(msg)
	return importSetError(p, n)
}

func hBufferNeeded() int32 { return importBufferNeeded() }

func hStoreInfo(store int32, buf []byte) int32 {
	bp, bn := nonNull(buf)
	return importStoreInfo(store, bp, bn)
}

func hWindowPut(store int32, key []byte, start int64, value []byte) int32 {
	return importWindowPut(store, unsafe.Pointer(unsafe.SliceData(key)), int32(len(key)), start,
		unsafe.Pointer(unsafe.SliceData(value)), nullableLen(value))
}

func hWindowGet(store int32, key []byte, start int64, buf []byte) int32 {
	return importWindowGet(store, unsafe.Pointer(unsafe.SliceData(key)), int32(len(key)), start,
		unsafe.Pointer(unsafe.SliceData(buf)), int32(len(buf)))
}

func hWindowFetch(store int32, key []byte, from, to int64) int32 {
	kp, kn := nonNull(key)
	return importWindowFetch(store, kp, kn, from, to)
}

func hWindowFetchAll(store int32, from, to int64) int32 {
	return importWindowFetchAll(store, from, to)
}

func hSessionPut(store int32, key []byte, start, end int64, value []byte) int32 {
	return importSessionPut(store, unsafe.Pointer(unsafe.SliceData(key)), int32(len(key)), start, end,
		unsafe.Pointer(unsafe.SliceData(value)), nullableLen(value))
}

func hSessionGet(store int32, key []byte, start, end int64, buf []byte) int32 {
	return importSessionGet(store, unsafe.Pointer(unsafe.SliceData(key)), int32(len(key)), start, end,
		unsafe.Pointer(unsafe.SliceData(buf)), int32(len(buf)))
}

func hSessionFind(store int32, key []byte, earliestEnd, latestStart int64) int32 {
	kp, kn := nonNull(key)
	return importSessionFind(store, kp, kn, earliestEnd, latestStart)
}

func hSessionFindAll(store int32, earliestEnd, latestEnd int64) int32 {
	return importSessionFindAll(store, earliestEnd, latestEnd)
}

// hStreamTime has the host write the stream time into *out (an SDK global, so the pointer
// does not make a local escape).
func hStreamTime(out *[8]byte) int32 { return importStreamTime(unsafe.Pointer(out)) }

func hSchedule(kind int32, intervalMs int64) int32 { return importSchedule(kind, intervalMs) }
