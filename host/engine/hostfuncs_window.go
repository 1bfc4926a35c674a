package engine

import (
	"encoding/binary"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/store"
)

// The host functions of window and session stores, stream time and punctuation schedules.

// storeInfo describes an open store for store_info.
func (s *openStore) info() abi.StoreInfo {
	var spec store.WindowSpec
	switch s.kind {
	case abi.StoreWindow:
		spec = s.win.Spec()
		return abi.StoreInfo{Type: abi.StoreWindow, WindowSize: spec.Size, Advance: spec.Advance, Grace: spec.Grace, Retention: spec.Retention}
	case abi.StoreSession:
		spec = s.sess.Spec()
		return abi.StoreInfo{Type: abi.StoreSession, Grace: spec.Grace, Retention: spec.Retention, InactivityGap: spec.Gap}
	}
	return abi.StoreInfo{Type: abi.StoreKeyValue}
}

func hostStoreInfo(c call) int32 {
	s, _ := c.storeOf(0, -1)
	buf := c.bytes(1)
	if c.code != abi.CodeOK {
		return c.code
	}
	if len(buf) < abi.StoreInfoSize {
		c.in.needed = abi.StoreInfoSize
		return abi.CodeBufferTooSmall
	}
	abi.PutStoreInfo(buf, s.info())
	return abi.StoreInfoSize
}

// dropped turns a write's result into a status code.
func dropped(stored bool) int32 {
	if stored {
		return abi.CodeOK
	}
	return abi.CodeDropped
}

// getInto answers a get (state_get, window_get, session_get): it copies a found value into
// buf, or returns CodeNotFound, CodeBufferTooSmall or CodeStoreFailed.
func (c *call) getInto(s *openStore, buf, v []byte, found bool, err error) int32 {
	switch {
	case err != nil:
		return c.in.storeFailed(s, "get", err)
	case !found:
		return abi.CodeNotFound
	case len(v) > len(buf):
		c.in.needed = int32(len(v))
		return abi.CodeBufferTooSmall
	}
	return int32(copy(buf, v))
}

func hostWindowPut(c call) int32 {
	s, _ := c.storeOf(0, abi.StoreWindow)
	key, start, value := c.bytes(1), c.i64(3), c.nullable(4)
	if c.code != abi.CodeOK {
		return c.code
	}
	if !c.writeFits(s, "window_put", len(key), len(value)) {
		return abi.CodeLimit
	}
	stored, err := s.win.Put(key, start, value) // the store copies key and value
	if err != nil {
		return c.in.storeFailed(s, "window put", err)
	}
	return dropped(stored)
}

func hostWindowGet(c call) int32 {
	s, _ := c.storeOf(0, abi.StoreWindow)
	key, start, buf := c.bytes(1), c.i64(3), c.bytes(4)
	if c.code != abi.CodeOK {
		return c.code
	}
	v, found, err := s.win.Get(key, start)
	return c.getInto(s, buf, v, found, err)
}

func hostWindowFetch(c call) int32 {
	s, h := c.storeOf(0, abi.StoreWindow)
	key, from, to := c.bytes(1), c.i64(3), c.i64(4)
	if c.code != abi.CodeOK {
		return c.code
	}
	// The store copies the key (the iterator keeps it).
	return c.in.openWindowIterator(s, h, "window fetch", func() (store.WindowIterator, error) { return s.win.Fetch(key, from, to) })
}

func hostWindowFetchAll(c call) int32 {
	s, h := c.storeOf(0, abi.StoreWindow)
	from, to := c.i64(1), c.i64(2)
	if c.code != abi.CodeOK {
		return c.code
	}
	return c.in.openWindowIterator(s, h, "window fetch all", func() (store.WindowIterator, error) { return s.win.FetchAll(from, to) })
}

func hostSessionPut(c call) int32 {
	s, _ := c.storeOf(0, abi.StoreSession)
	key, start, end, value := c.bytes(1), c.i64(3), c.i64(4), c.nullable(5)
	if c.code != abi.CodeOK {
		return c.code
	}
	if start > end {
		return abi.CodeBadArgument
	}
	if !c.writeFits(s, "session_put", len(key), len(value)) {
		return abi.CodeLimit
	}
	stored, err := s.sess.Put(key, start, end, value)
	if err != nil {
		return c.in.storeFailed(s, "session put", err)
	}
	return dropped(stored)
}

func hostSessionGet(c call) int32 {
	s, _ := c.storeOf(0, abi.StoreSession)
	key, start, end, buf := c.bytes(1), c.i64(3), c.i64(4), c.bytes(5)
	if c.code != abi.CodeOK {
		return c.code
	}
	v, found, err := s.sess.Get(key, start, end)
	return c.getInto(s, buf, v, found, err)
}

func hostSessionFind(c call) int32 {
	s, h := c.storeOf(0, abi.StoreSession)
	key, earliestEnd, latestStart := c.bytes(1), c.i64(3), c.i64(4)
	if c.code != abi.CodeOK {
		return c.code
	}
	return c.in.openWindowIterator(s, h, "session find", func() (store.WindowIterator, error) {
		return s.sess.Find(key, earliestEnd, latestStart)
	})
}

func hostSessionFindAll(c call) int32 {
	s, h := c.storeOf(0, abi.StoreSession)
	earliestEnd, latestEnd := c.i64(1), c.i64(2)
	if c.code != abi.CodeOK {
		return c.code
	}
	return c.in.openWindowIterator(s, h, "session find all", func() (store.WindowIterator, error) {
		return s.sess.FindAll(earliestEnd, latestEnd)
	})
}

func hostStreamTime(c call) int32 {
	if c.in.initializing {
		c.in.mod.initState.Store(true) // the task's time
	}
	out, ok := c.mem.Read(uint32(c.i32(0)), 8)
	if !ok {
		return abi.CodeOutOfBounds
	}
	binary.LittleEndian.PutUint64(out, uint64(c.in.task.Clock.StreamTime()))
	return abi.CodeOK
}

func hostSchedule(c call) int32 {
	kind, interval := c.i32(0), c.i64(1)
	in := c.in
	switch {
	case !in.initializing, kind != abi.ScheduleStreamTime && kind != abi.ScheduleWallClock, interval < 1, !in.mod.hasPunctuate:
		return abi.CodeBadArgument
	case len(in.defs) >= abi.MaxSchedules:
		return abi.CodeLimit
	}
	// The times are the task's: Instantiate hands the schedules to its TaskState (adopt).
	in.defs = append(in.defs, schedule{kind: kind, interval: interval, next: abi.NoTime})
	return int32(len(in.defs) - 1)
}
