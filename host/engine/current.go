package engine

// Current returns the index, in the records of the running ProcessBatch call, of the record
// the guest took last with record_next: the record it works on; -1 before it took one.
// A Store or an Emitter of the instance calls it, from its host call, to tell which record a
// write or an emit belongs to. After a call it keeps its last value until the next call, so a
// failed call's caller can tell whether the record a *GuestError names was the current one
// (or the next, when the guest died growing its buffer for it). Like the rest of the
// Instance, it is not safe for concurrent use.
func (in *Instance) Current() int { return in.last }
