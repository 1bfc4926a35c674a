//go:build !wasip1

package pluginsdk

import (
	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/pluginsdk/internal/hostcall"
)

// Natively the SDK calls the in-memory host that a driver (package sdktest) installs.

func host() hostcall.Host {
	if hostcall.Current == nil {
		return noHost{}
	}
	return hostcall.Current
}

func hStoreOpen(name string) int32                 { return host().StoreOpen([]byte(name)) }
func hOutputOpen(name string) int32                { return host().OutputOpen([]byte(name)) }
func hStateGet(store int32, key, buf []byte) int32 { return host().StateGet(store, nonNil(key), buf) }
func hStatePut(store int32, key, value []byte) int32 {
	return host().StatePut(store, nonNil(key), value)
}
func hStateDelete(store int32, key []byte) int32 { return host().StateDelete(store, nonNil(key)) }
func hStateRange(store int32, start, end []byte) int32 {
	return host().StateRange(store, start, end)
}
func hStatePrefix(store int32, prefix []byte) int32 { return host().StatePrefix(store, prefix) }
func hIterNext(iter int32, buf []byte) int32        { return host().IterNext(iter, buf) }
func hIterClose(iter int32) int32                   { return host().IterClose(iter) }
func hRecordNext(buf []byte) int32                  { return host().RecordNext(buf) }
func hRecordHeaders(buf []byte) int32               { return host().RecordHeaders(buf) }
func hEmit(output int32, key, value, hdrs []byte) int32 {
	return host().Emit(output, key, value, hdrs)
}
func hLog(level int32, msg string) int32 { return host().Log(level, msg) }
func hSetError(msg string) int32         { return host().SetError(msg) }
func hBufferNeeded() int32               { return host().BufferNeeded() }

func hStoreInfo(store int32, buf []byte) int32 { return host().StoreInfo(store, buf) }
func hWindowPut(store int32, key []byte, start int64, value []byte) int32 {
	return host().WindowPut(store, nonNil(key), start, value)
}
func hWindowGet(store int32, key []byte, start int64, buf []byte) int32 {
	return host().WindowGet(store, nonNil(key), start, buf)
}
func hWindowFetch(store int32, key []byte, from, to int64) int32 {
	return host().WindowFetch(store, nonNil(key), from, to)
}
func hWindowFetchAll(store int32, from, to int64) int32 {
	return host().WindowFetchAll(store, from, to)
}
func hSessionPut(store int32, key []byte, start, end int64, value []byte) int32 {
	return host().SessionPut(store, nonNil(key), start, end, value)
}
func hSessionGet(store int32, key []byte, start, end int64, buf []byte) int32 {
	return host().SessionGet(store, nonNil(key), start, end, buf)
}
func hSessionFind(store int32, key []byte, earliestEnd, latestStart int64) int32 {
	return host().SessionFind(store, nonNil(key), earliestEnd, latestStart)
}
func hSessionFindAll(store int32, earliestEnd, latestEnd int64) int32 {
	return host().SessionFindAll(store, earliestEnd, latestEnd)
}
func hStreamTime(out *[8]byte) int32               { return host().StreamTime(out[:]) }
func hSchedule(kind int32, intervalMs int64) int32 { return host().Schedule(kind, intervalMs) }

// nonNil turns a nil key into an empty one: keys are never null, as on the wasm side.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// noHost answers every call when no driver is installed.
type noHost struct{}

func (noHost) StoreOpen([]byte) int32                   { return abi.CodeNoRecord }
func (noHost) OutputOpen([]byte) int32                  { return abi.CodeNoRecord }
func (noHost) StateGet(int32, []byte, []byte) int32     { return abi.CodeNoRecord }
func (noHost) StatePut(int32, []byte, []byte) int32     { return abi.CodeNoRecord }
func (noHost) StateDelete(int32, []byte) int32          { return abi.CodeNoRecord }
func (noHost) StateRange(int32, []byte, []byte) int32   { return abi.CodeNoRecord }
func (noHost) StatePrefix(int32, []byte) int32          { return abi.CodeNoRecord }
func (noHost) IterNext(int32, []byte) int32             { return abi.CodeNoRecord }
func (noHost) IterClose(int32) int32                    { return abi.CodeNoRecord }
func (noHost) RecordNext([]byte) int32                  { return abi.CodeNoRecord }
func (noHost) RecordHeaders([]byte) int32               { return abi.CodeNoRecord }
func (noHost) Emit(int32, []byte, []byte, []byte) int32 { return abi.CodeNoRecord }
func (noHost) Log(int32, string) int32                  { return abi.CodeNoRecord }
func (noHost) SetError(string) int32                    { return abi.CodeNoRecord }
func (noHost) BufferNeeded() int32                      { return 0 }
func (noHost) StoreInfo(int32, []byte) int32            { return abi.CodeNoRecord }
func (noHost) WindowPut(int32, []byte, int64, []byte) int32 {
	return abi.CodeNoRecord
}
func (noHost) WindowGet(int32, []byte, int64, []byte) int32 {
	return abi.CodeNoRecord
}
func (noHost) WindowFetch(int32, []byte, int64, int64) int32 { return abi.CodeNoRecord }
func (noHost) WindowFetchAll(int32, int64, int64) int32      { return abi.CodeNoRecord }
func (noHost) SessionPut(int32, []byte, int64, int64, []byte) int32 {
	return abi.CodeNoRecord
}
func (noHost) SessionGet(int32, []byte, int64, int64, []byte) int32 {
	return abi.CodeNoRecord
}
func (noHost) SessionFind(int32, []byte, int64, int64) int32 { return abi.CodeNoRecord }
func (noHost) SessionFindAll(int32, int64, int64) int32      { return abi.CodeNoRecord }
func (noHost) StreamTime([]byte) int32                       { return abi.CodeNoRecord }
func (noHost) Schedule(int32, int64) int32                   { return abi.CodeNoRecord }
