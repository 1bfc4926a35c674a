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
