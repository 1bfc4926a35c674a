// Command ttl is a test guest of the runtime's TTL tests: it writes and reads the key-value
// store "kv" as its records say, and emits what it read, so that a test sees the store as the
// plugin does. For a record with key k, the value is a command:
//
//	put V      set k to V
//	get        emit k with k's value, or "<none>"
//	range      emit k with every entry of the store, "key=value" joined by ",", from Range
//	prefix P   emit k with the entries whose keys begin with P, as range does, from Prefix
//
// Built by the tests (ttl_test.go) with:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o ttl.wasm ./host/runtime/testdata/ttl
package main

import (
	"fmt"
	"strings"

	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(process)
}

func process(ctx pluginsdk.Context) error {
	rec := ctx.Record()
	kv := ctx.Store("kv")
	verb, arg, _ := strings.Cut(string(rec.Value), " ")
	switch verb {
	case "put":
		return kv.Put(rec.Key, []byte(arg))
	case "get":
		v, found, err := kv.Get(rec.Key)
		if err != nil {
			return err
		}
		if !found {
			v = []byte("<none>")
		}
		return ctx.Emit(rec.Key, v)
	case "range":
		return emitAll(ctx, rec.Key, kv.Range(nil, nil))
	case "prefix":
		return emitAll(ctx, rec.Key, kv.Prefix([]byte(arg)))
	}
	return fmt.Errorf("unknown command %q", rec.Value)
}

// emitAll emits key with the entries of it, "key=value" joined by ",".
func emitAll(ctx pluginsdk.Context, key []byte, it *pluginsdk.Iterator) error {
	defer it.Close()
	var entries []string
	for it.Next() {
		entries = append(entries, string(it.Key())+"="+string(it.Value()))
	}
	if err := it.Err(); err != nil {
		return err
	}
	return ctx.Emit(key, []byte(strings.Join(entries, ",")))
}

func main() {}
