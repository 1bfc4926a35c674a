package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// The user data that statehost members exchange through the consumer protocol: in a member's
// join metadata, the state it holds (memberState); in its sync assignment, its standby tasks
// (standbyAssignment). Both start with a version byte; a member that cannot read the other's
// data treats it as empty, and the group goes on (a member of another version gets no
// standbys, and looks stateless to a leader that cannot read it).

const metaVersion = 1

// The tags of the sections that follow what the first statehost of metaVersion wrote, which
// a reader of that version does not know (it fails on them, and goes on without the data).
const (
	sectionProcs   = 'p' // memberState.procs
	sectionEnabled = 'e' // standbyAssignment.enabled
)

// offsetRunning is the offset sum a member reports for a task it runs: caught up by definition.
const offsetRunning = -2

// memberState is what a member reports when it joins: its admin address, and for every task it
// has local state for, the sum over the task's logged stores of the next changelog offset it
// would restore from (checkpoint + 1; 0 without a checkpoint), or offsetRunning; and the
// processors of its configuration (reload.go), after the rest: a member of an older statehost
// reports none (nil), and an older leader cannot read a report with them (the member then
// looks stateless to it).
type memberState struct {
	admin   string
	offsets map[taskID]int64
	procs   []advertisedProc
}

// advertisedProc is a processor of a member's configuration: its inputs, and whether it runs
// it (false: a reload added it, and it waits for the group: reload.go).
type advertisedProc struct {
	name    string
	inputs  []string
	enabled bool
}

func (s memberState) encode() []byte {
	b := []byte{metaVersion}
	b = appendString(b, s.admin)
	ids := make([]taskID, 0, len(s.offsets))
	for id := range s.offsets {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, compareTaskID)
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = appendString(b, id.Processor)
		b = binary.AppendVarint(b, int64(id.Partition))
		b = binary.AppendVarint(b, s.offsets[id])
	}
	if s.procs == nil {
		return b
	}
	b = append(b, sectionProcs)
	b = binary.AppendUvarint(b, uint64(len(s.procs)))
	for _, p := range s.procs {
		b = appendString(b, p.name)
		b = appendStrings(b, p.inputs)
		enabled := byte(0)
		if p.enabled {
			enabled = 1
		}
		b = append(b, enabled)
	}
	return b
}

func decodeMemberState(b []byte) (memberState, error) {
	s := memberState{offsets: map[taskID]int64{}}
	if len(b) == 0 {
		return s, nil // a member without user data: no state
	}
	r := metaReader{b: b}
	if v := r.byte(); v != metaVersion {
		return s, fmt.Errorf("member state version %d, want %d", v, metaVersion)
	}
	s.admin = r.string()
	n := r.uvarint()
	for i := uint64(0); i < n && r.err == nil; i++ {
		proc := r.string()
		part := r.varint()
		off := r.varint()
		if part < 0 || part > 1<<31-1 {
			r.fail()
		}
		s.offsets[taskID{Processor: proc, Partition: int32(part)}] = off
	}
	if r.err == nil && len(r.b) > 0 && r.b[0] == sectionProcs { // a member of an older statehost has none
		r.byte()
		n := r.uvarint()
		if n > uint64(len(r.b)) {
			r.fail()
		}
		s.procs = make([]advertisedProc, 0, min(n, 1024))
		for i := uint64(0); i < n && r.err == nil; i++ {
			p := advertisedProc{name: r.string(), inputs: r.strings()}
			p.enabled = r.byte() == 1
			s.procs = append(s.procs, p)
		}
	}
	return s, r.finish()
}

// standbyAssignment is a member's part of the assignment besides its partitions: the tasks it
// keeps standby copies of, as the input partitions of their units (every topic of the unit,
// as for active tasks), and which of them are warmups; and, for interactive queries, the
// partitions every member runs, by the admin address it published (members without one are
// left out). When the members disagree on their processors (gated), it ends with the
// processors the group runs (enabled; reload.go); without that section, every member runs
// all of its own.
type standbyAssignment struct {
	standby map[string][]int32
	warmup  map[string][]int32
	hosts   map[string]map[string][]int32 // admin address -> its active partitions
	gated   bool
	enabled []string
}

func (a standbyAssignment) encode() []byte {
	b := []byte{metaVersion}
	b = appendPartitions(b, a.standby)
	b = appendPartitions(b, a.warmup)
	addrs := make([]string, 0, len(a.hosts))
	for addr := range a.hosts {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs)
	b = binary.AppendUvarint(b, uint64(len(addrs)))
	for _, addr := range addrs {
		b = appendString(b, addr)
		b = appendPartitions(b, a.hosts[addr])
	}
	if a.gated {
		b = append(b, sectionEnabled)
		b = appendStrings(b, a.enabled)
	}
	return b
}

func decodeStandbyAssignment(b []byte) (standbyAssignment, error) {
	var a standbyAssignment
	if len(b) == 0 {
		return a, nil
	}
	r := metaReader{b: b}
	if v := r.byte(); v != metaVersion {
		return a, fmt.Errorf("standby assignment version %d, want %d", v, metaVersion)
	}
	a.standby = r.partitions()
	a.warmup = r.partitions()
	if r.err == nil && len(r.b) == 0 {
		return a, nil // from a member without the hosts (an older statehost)
	}
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
	}
	a.hosts = make(map[string]map[string][]int32, min(n, 1024))
	for i := uint64(0); i < n && r.err == nil; i++ {
		addr := r.string()
		a.hosts[addr] = r.partitions()
	}
	if r.err == nil && len(r.b) > 0 && r.b[0] == sectionEnabled {
		r.byte()
		a.gated, a.enabled = true, r.strings()
	}
	return a, r.finish()
}

func compareTaskID(a, b taskID) int {
	if a.Processor != b.Processor {
		if a.Processor < b.Processor {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

func appendPartitions(b []byte, tps map[string][]int32) []byte {
	topics := make([]string, 0, len(tps))
	for t := range tps {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	b = binary.AppendUvarint(b, uint64(len(topics)))
	for _, t := range topics {
		b = appendString(b, t)
		b = binary.AppendUvarint(b, uint64(len(tps[t])))
		for _, p := range tps[t] {
			b = binary.AppendVarint(b, int64(p))
		}
	}
	return b
}

// metaReader reads what the append functions write; the first problem sticks in err.
type metaReader struct {
	b   []byte
	err error
}

var errMetaShort = errors.New("truncated or malformed user data")

func (r *metaReader) fail() {
	if r.err == nil {
		r.err = errMetaShort
	}
}

func (r *metaReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *metaReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *metaReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *metaReader) string() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *metaReader) strings() []string {
	n := r.uvarint()
	if n > uint64(len(r.b)) { // each string takes at least a byte
		r.fail()
		return nil
	}
	out := make([]string, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, r.string())
	}
	return out
}

func (r *metaReader) partitions() map[string][]int32 {
	n := r.uvarint()
	if n > uint64(len(r.b)) { // each topic takes at least a byte
		r.fail()
		return nil
	}
	out := make(map[string][]int32, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		t := r.string()
		k := r.uvarint()
		if k > uint64(len(r.b)) {
			r.fail()
			break
		}
		for j := uint64(0); j < k && r.err == nil; j++ {
			p := r.varint()
			if p < 0 || p > 1<<31-1 {
				r.fail()
			}
			out[t] = append(out[t], int32(p))
		}
	}
	return out
}

func (r *metaReader) finish() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail()
	}
	return r.err
}
