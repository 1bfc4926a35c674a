package engine

// Current returns the index, in the records of the running ProcessBatch call, of the record
// the guest took last with record_next: the record it works on; -1 before it took one.
// A Store or an Emitter of the instance calls it, from its host call, to tell which record a
// write or an emit belongs to. After a call it keeps its last value until the next call, so a
// failed call's caller can tell whether the record a *GuestError names was the current one
// (or the next, when the guest died growing its buffer for it). Like the rest of the
// Instance, it is not safe for concurrent use.
func (in *Instance) Current() int { return in.last }

// Record names the record that the guest call in progress works on (Instance.Current, the
// last it took): its topic, partition and offset, with ok false outside a batch (init, a
// punctuation, between calls) or before the guest took a record. A task's producer asks it, for each record the task writes or emits, which input
// record that belongs to (the runtime's changelog.Source); it is called on the call's
// goroutine, from its host functions.
func (w *HostWaits) Record() (topic string, partition int32, offset int64, ok bool) {
	c := w.running.Load()
	if c == nil {
		return "", 0, 0, false
	}
	in := c.in
	if in.last < 0 || in.last >= len(in.batch) {
		return "", 0, 0, false
	}
	r := &in.batch[in.last]
	return r.Topic, r.Partition, r.Offset, true
}
