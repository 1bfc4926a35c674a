package engine

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/statehost/statehost/abi"
)

// pooledTask returns a task of processor on partition, over a rig of its own (its stores,
// clock and emitter), with a TaskState of its own: what the runtime gives each task.
func pooledTask(t *testing.T, processor string, partition int32, stores ...string) (*rig, Task) {
	t.Helper()
	r := newRig(t, stores...)
	task := r.task(processor, "out")
	task.Partition, task.Clock, task.State = partition, r.st, &TaskState{}
	return r, task
}

// batchOn borrows an instance of p for task, runs records on it and gives it back; it
// returns the instance and the call's error.
func batchOn(t *testing.T, p *Pool, task Task, records ...Record) (*Instance, error) {
	t.Helper()
	ctx := context.Background()
	in, err := p.Get(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Put(ctx, in)
	return in, in.ProcessBatch(ctx, records)
}

// TestPoolTasksShareInstance: two tasks served in turn by one instance of the Go count
// plugin each see only their own store, outputs and stream time; the store handle the
// guest opened in statehost_init (for the first task) reaches the second task's store.
func TestPoolTasksShareInstance(t *testing.T) {
	e, _ := testEngine(t, Config{})
	p := NewPool(compile(t, e, "count"), 1)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	ra, a := pooledTask(t, "count", 0, "counts")
	rb, b := pooledTask(t, "count", 1, "counts")

	first, err := batchOn(t, p, a, timed(1, "a1", 1000), timed(2, "a2", 2000))
	if err != nil {
		t.Fatal(err)
	}
	second, err := batchOn(t, p, b, timed(1, "b1", 9000), timed(2, "a1", 8000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batchOn(t, p, a, timed(3, "a1", 3000)); err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Fatal("the pool of size 1 lent two instances to calls one after the other")
	}
	if got := p.Stats(); got.Created != 1 || got.Idle != 1 || got.Lent != 0 {
		t.Errorf("stats %+v, want 1 created, 1 idle, none lent", got)
	}
	if got, want := dump(t, ra.stores["counts"]), map[string]string{"a1": "2", "a2": "1"}; !maps.Equal(got, want) {
		t.Errorf("task a's store %v, want %v", got, want)
	}
	if got, want := dump(t, rb.stores["counts"]), map[string]string{"b1": "1", "a1": "1"}; !maps.Equal(got, want) {
		t.Errorf("task b's store %v, want %v", got, want)
	}
	if got, want := ra.emitted.strings(), []string{"out:a1=1", "out:a2=1", "out:a1=2"}; !slices.Equal(got, want) {
		t.Errorf("task a emitted %v, want %v", got, want)
	}
	if got, want := rb.emitted.strings(), []string{"out:b1=1", "out:a1=1"}; !slices.Equal(got, want) {
		t.Errorf("task b emitted %v, want %v", got, want)
	}
	if ta, tb := ra.st.StreamTime(), rb.st.StreamTime(); ta != 3000 || tb != 9000 {
		t.Errorf("stream times %d and %d, want 3000 and 9000", ta, tb)
	}
}

// TestPoolCallScopedState: what a call leaves in the instance stays out of the next task's
// call: an iterator task a left open is a stale handle for task b (not a's entries), and a
// record's offset in b's error is b's.
func TestPoolCallScopedState(t *testing.T) {
	e, _ := testEngine(t, Config{})
	p := NewPool(compile(t, e, "probe"), 1)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	ra, a := pooledTask(t, "probe", 0, "s")
	rb, b := pooledTask(t, "probe", 1, "s")

	r := recs("put", "keep") // a's store gets a1, a2 ...; "keep" leaves an iterator over them open
	if _, err := batchOn(t, p, a, r...); err != nil {
		t.Fatal(err)
	}
	if _, err := batchOn(t, p, b, recs("keep")...); err != nil {
		t.Fatal(err)
	}
	want := []string{"out:kept_next=" + strconv.Itoa(int(abi.CodeBadHandle))}
	if got := rb.emitted.strings(); !slices.Equal(got, want) {
		t.Errorf("task b emitted %v, want %v: the handle of a's iterator is stale", got, want)
	}
	if got := dump(t, rb.stores["s"]); len(got) != 0 {
		t.Errorf("task b's store %v, want it empty", got)
	}
	if got := dump(t, ra.stores["s"]); len(got) != 4 {
		t.Errorf("task a's store %v, want its 4 keys", got)
	}
}

// TestPoolTrapReplacesInstance: a trap in one task's batch kills only the instance it ran
// on: the pool closes it, the other task's next call gets a new instance and works, and the
// failed task's punctuation times survive the instance.
func TestPoolTrapReplacesInstance(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	e, _ := testEngine(t, Config{Now: func() time.Time { return now }})
	p := NewPool(compile(t, e, "probe"), 1)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	_, a := pooledTask(t, "probe", 0, "s")
	rb, b := pooledTask(t, "probe", 1, "s")

	ctx := context.Background()
	in, err := p.Get(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Punctuate(ctx); err != nil {
		t.Fatal(err)
	}
	p.Put(ctx, in)
	wantWall, ok := a.State.NextWallPunctuation()
	if !ok {
		t.Fatal("task a has no wall-clock punctuation")
	}

	dead, err := batchOn(t, p, a, recs("trap")...)
	ge := guestError(t, err, ErrTrap)
	if ge.Processor != "probe" || ge.Partition != 0 || ge.Offset != 100 {
		t.Errorf("error names %s partition %d offset %d, want probe partition 0 offset 100", ge.Processor, ge.Partition, ge.Offset)
	}
	if got := p.Stats(); got.Discarded != 1 || got.Idle != 0 {
		t.Errorf("stats %+v after the trap, want 1 discarded, none idle", got)
	}
	if err := dead.ProcessBatch(ctx, recs("put")); !errors.Is(err, ErrClosed) {
		t.Errorf("the dead instance's next call: %v, want ErrClosed (the pool closed it)", err)
	}

	fresh, err := batchOn(t, p, b, recs("put")...)
	if err != nil {
		t.Fatalf("task b after task a's trap: %v", err)
	}
	if fresh == dead {
		t.Fatal("the pool lent the dead instance again")
	}
	if got := dump(t, rb.stores["s"]); len(got) != 4 {
		t.Errorf("task b's store %v, want its 4 keys", got)
	}
	if got := p.Stats(); got.Created != 2 {
		t.Errorf("stats %+v, want 2 created", got)
	}
	if at, ok := a.State.NextWallPunctuation(); !ok || !at.Equal(wantWall) {
		t.Errorf("task a's next wall punctuation %v %v after the new instance, want %v", at, ok, wantWall)
	}
}

// TestPoolSize: Get never waits, and Put keeps at most Size idle instances.
func TestPoolSize(t *testing.T) {
	e, _ := testEngine(t, Config{})
	p := NewPool(compile(t, e, "count_c"), 1)
	_, a := pooledTask(t, "count_c", 0, "counts")
	_, b := pooledTask(t, "count_c", 1, "counts")
	ctx := context.Background()
	ia, err := p.Get(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := p.Get(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if ia == ib {
		t.Fatal("one instance lent twice at once")
	}
	if got := p.Stats(); got.Lent != 2 || got.Created != 2 {
		t.Errorf("stats %+v, want 2 lent, 2 created", got)
	}
	p.Put(ctx, ia)
	p.Put(ctx, ib)
	if got := p.Stats(); got.Lent != 0 || got.Idle != 1 {
		t.Errorf("stats %+v, want none lent, 1 idle", got)
	}
	if err := ib.ProcessBatch(ctx, recs("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("the instance past the size: %v, want ErrClosed", err)
	}
	if err := ia.ProcessBatch(ctx, recs("x")); !errors.Is(err, ErrNotBound) {
		t.Errorf("an idle instance: %v, want ErrNotBound", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, a); !errors.Is(err, ErrClosed) {
		t.Errorf("Get on a closed pool: %v, want ErrClosed", err)
	}
}

// TestPoolTrim: Trim closes the idle instances and the pool goes on lending, with new ones.
func TestPoolTrim(t *testing.T) {
	e, _ := testEngine(t, Config{})
	p := NewPool(compile(t, e, "count_c"), 2)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	_, a := pooledTask(t, "count_c", 0, "counts")
	ctx := context.Background()
	idle, err := batchOn(t, p, a, recs("x")...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.Stats(); got.Idle != 0 || got.Created != 1 {
		t.Errorf("stats after Trim %+v, want none idle, 1 created", got)
	}
	if err := idle.ProcessBatch(ctx, recs("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("a trimmed instance: %v, want ErrClosed", err)
	}
	next, err := batchOn(t, p, a, recs("y")...)
	if err != nil {
		t.Fatal(err)
	}
	if next == idle {
		t.Error("the pool lent the trimmed instance again")
	}
	if got := p.Stats(); got.Idle != 1 || got.Created != 2 {
		t.Errorf("stats after the next call %+v, want 1 idle, 2 created", got)
	}
}

// TestPoolInitUsesState: the instances of a module whose statehost_init does per-task work
// (it reads and writes its task's store) serve only the task their init ran for: each task
// gets its own init once, and an idle instance goes back to the task it was made for.
func TestPoolInitUsesState(t *testing.T) {
	e, _ := testEngine(t, Config{})
	mod := compile(t, e, "initstate")
	p := NewPool(mod, 2)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	ra, a := pooledTask(t, "initstate", 0, "counts")
	rb, b := pooledTask(t, "initstate", 1, "counts")
	for _, task := range []Task{a, b, a, b, a} {
		if _, err := batchOn(t, p, task, recs("x")...); err != nil {
			t.Fatal(err)
		}
	}
	if !mod.InitUsesState() {
		t.Error("InitUsesState is false for a module whose init reads and writes a store")
	}
	for name, r := range map[string]*rig{"a": ra, "b": rb} {
		if got := r.emitted.strings(); len(got) == 0 || got[len(got)-1] != "out:inits=1" {
			t.Errorf("task %s emitted %q, want its init to have run once: last out:inits=1", name, got)
		}
	}
	if got := p.Stats(); got.Created != 2 {
		t.Errorf("stats %+v, want 2 instances created, one per task", got)
	}
	if compile(t, e, "count_c").InitUsesState() {
		t.Error("InitUsesState is true before any instance of count_c ran its init")
	}
}

// TestPoolGetFresh: GetFresh makes a new instance even when one is idle, and the idle one
// stays for the next Get.
func TestPoolGetFresh(t *testing.T) {
	e, _ := testEngine(t, Config{})
	p := NewPool(compile(t, e, "count_c"), 2)
	_, a := pooledTask(t, "count_c", 0, "counts")
	ctx := context.Background()
	first, err := p.Get(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	p.Put(ctx, first)
	fresh, err := p.GetFresh(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if fresh == first {
		t.Fatal("GetFresh lent the idle instance")
	}
	if err := fresh.ProcessBatch(ctx, recs("x")); err != nil {
		t.Fatal(err)
	}
	p.Put(ctx, fresh)
	if got := p.Stats(); got.Created != 2 || got.Idle != 2 {
		t.Errorf("stats %+v, want 2 created, 2 idle", got)
	}
	if again, err := p.Get(ctx, a); err != nil || (again != first && again != fresh) {
		t.Fatalf("Get after GetFresh = %p, %v; want an idle instance", again, err)
	}
}

// TestBindMissingStore: an instance whose guest opened a store serves no task without it,
// nor a task of another processor.
func TestBindMissingStore(t *testing.T) {
	e, _ := testEngine(t, Config{})
	_, a := pooledTask(t, "count", 0, "counts")
	_, other := pooledTask(t, "count", 1, "other")
	in := instantiate(t, e, "count", a)
	if err := in.Bind(other); err == nil {
		t.Fatal("Bind to a task without the store the guest opened succeeded")
	}
	if err := in.ProcessBatch(context.Background(), recs("x")); !errors.Is(err, ErrNotBound) {
		t.Errorf("after a failed Bind: %v, want ErrNotBound", err)
	}
	otherProc := a
	otherProc.Processor = "another"
	if err := in.Bind(otherProc); err == nil {
		t.Fatal("Bind to a task of another processor succeeded")
	}
	if err := in.Bind(a); err != nil {
		t.Fatal(err)
	}
	if err := in.ProcessBatch(context.Background(), recs("x")); err != nil {
		t.Fatal(err)
	}
}
