package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/statehost/statehost/store"
)

// TestWriteWhileIterating: a guest may write to a store while an iterator on it is open
// (abi/doc.go, "Writes while an iterator is open"). The C probe opens an iterator, takes one
// entry, writes (a new key, an overwrite and a delete), then takes the rest; on every backend
// and layer stack, with the entries committed before or written in the same call:
//   - the writes succeed and the iterator goes on without an error;
//   - a key-value iterator returns the store as it was when it was opened: not the new key,
//     the overwritten key with its old value, the deleted key;
//   - a window iterator returns, in order and once each, the windows that were there when it
//     was opened and were not written since (whether it returns the writes is not promised);
//   - a new iterator sees every write.
func TestWriteWhileIterating(t *testing.T) {
	e, _ := testEngine(t, Config{})
	for _, tc := range []struct {
		name      string
		opts      store.Options
		committed bool
	}{
		{"memory", store.Options{Backend: store.Memory}, false},
		{"memory/committed", store.Options{Backend: store.Memory}, true},
		{"pebble", store.Options{Backend: store.Pebble}, false},
		{"pebble/committed", store.Options{Backend: store.Pebble}, true},
		{"pebble+coalescing/committed", store.Options{Backend: store.Pebble, Coalesce: true}, true},
		{"memory+coalescing", store.Options{Backend: store.Memory, Coalesce: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newRig(t).st
			s, err := st.Open("s", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			wo := store.Options{Backend: tc.opts.Backend, Kind: store.Window, Window: store.WindowSpec{Size: 10_000, SegmentInterval: 60_000}}
			w, err := st.OpenWindow("w", wo)
			if err != nil {
				t.Fatal(err)
			}
			emitted := &collector{}
			task := Task{Processor: "probe", Stores: map[string]Store{"s": s}, Windows: map[string]store.WindowStore{"w": w},
				Outputs: []string{"out"}, Emitter: emitted, Clock: st}
			in := instantiate(t, e, "probe", task)
			ctx := context.Background()
			cmd := func(off int64, value string) Record {
				r := timed(off, "k", 1)
				r.Value = []byte(value)
				return r
			}
			batch := []Record{cmd(0, "iterwrite-setup")}
			if tc.committed {
				if err := in.ProcessBatch(ctx, batch); err != nil {
					t.Fatal(err)
				}
				if err := st.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := st.Apply(nil); err != nil {
					t.Fatal(err)
				}
				batch = nil
			}
			if err := in.ProcessBatch(ctx, append(batch, cmd(1, "iterwrite"))); err != nil {
				t.Fatal(err)
			}
			got := emitted.values()
			for k, want := range map[string]string{
				"kv_writes": "0,0,0", "kv_during": "a=1,b=1,c=1,", "kv_after": "a=1,b=9,b2=2,",
				"w_writes": "0,0,0", "w_after": "j@0=2,k@0=1,k@70000=9,k@140000=1,k@210000=2,",
			} {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
			// During: k@0 first (taken before the writes), then the rest in order, once each;
			// k@140000 as it was; the written windows may or may not show.
			during := strings.Split(strings.TrimSuffix(got["w_during"], ","), ",")
			rank := map[string]int{"j@0": 1, "k@0": 2, "k@70000": 3, "k@140000": 4, "k@210000": 5}
			last := 0
			for _, e := range during {
				r := rank[strings.SplitN(e, "=", 2)[0]]
				if r <= last {
					t.Errorf("w_during = %q: %s out of order, twice or unknown", got["w_during"], e)
				}
				last = r
			}
			if len(during) == 0 || during[0] != "k@0=1" || !strings.Contains(got["w_during"], "k@140000=1,") {
				t.Errorf("w_during = %q, want k@0=1 first and k@140000=1", got["w_during"])
			}
		})
	}
}
