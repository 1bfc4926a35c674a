package runtime

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/store"
)

// TestUndoOfClosedWindowFails: a poison record whose timestamp closes a window (or session)
// that it deletes (a delete of a closed window is allowed) cannot be undone, since the store
// drops a put to a closed window as late. The guard must then fail the task rather than go on
// without the window's value.
func TestUndoOfClosedWindowFails(t *testing.T) {
	m, err := store.Open(store.Settings{Dir: t.TempDir(), MemoryBytes: store.MinMemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st, err := m.OpenTask("p", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hour := int64(time.Hour / time.Millisecond)
	ws, err := st.OpenWindow("w", store.Options{Backend: store.Memory, Kind: store.Window, Window: store.WindowSpec{Size: hour}})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := st.OpenSession("s", store.Options{Backend: store.Memory, Kind: store.Session, Window: store.WindowSpec{Gap: hour}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := int64(10 * hour)
	st.ObserveTime(t0)
	if _, err := ws.Put([]byte("a"), t0, []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Put([]byte("a"), t0, t0, []byte("1")); err != nil {
		t.Fatal(err)
	}

	g := newPoisonGuard(&task{})
	g.begin(nil)
	// The poison record: its timestamp closes window t0 and session [t0, t0]; it deletes them
	// (a delete of a closed window is allowed), then fails.
	st.ObserveTime(t0 + 2*hour)
	gw := guardedWindows{ws, g, "w"}
	gs := guardedSessions{ss, g, "s"}
	if ok, err := gw.Put([]byte("a"), t0, nil); err != nil || !ok {
		t.Fatalf("delete window: %v %v", ok, err)
	}
	if ok, err := gs.Put([]byte("a"), t0, t0, nil); err != nil || !ok {
		t.Fatalf("remove session: %v %v", ok, err)
	}
	err = g.failed(context.Background(), -1)
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("undo of a closed session's removal: %v, want an error saying it closed", err)
	}

	// The window alone.
	g = newPoisonGuard(&task{})
	g.begin(nil)
	st.ObserveTime(t0 + 3*hour)
	if _, err := ws.Put([]byte("b"), t0+3*hour, []byte("2")); err != nil {
		t.Fatal(err)
	}
	st.ObserveTime(t0 + 5*hour)
	if ok, err := (guardedWindows{ws, g, "w"}).Put([]byte("b"), t0+3*hour, nil); err != nil || !ok {
		t.Fatalf("delete window: %v %v", ok, err)
	}
	err = g.failed(context.Background(), -1)
	if err == nil || !strings.Contains(err.Error(), "window closed") {
		t.Fatalf("undo of a closed window's delete: %v, want an error saying it closed", err)
	}
}
