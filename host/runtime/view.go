package runtime

import (
	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
)

// The processors as the goroutines other than the loop and the jobs read them: the admin
// endpoint's handlers (queries, the list of stores), the group's goroutine (the balancer,
// the standby assignment) and Deploy.
//
// A reload replaces r.procs and r.readers whole and gives a live processor a new cfg and
// stores (reload_apply.go), in the loop under the table's lock. Those goroutines cannot take
// that lock: a restore holds it for its whole length, and an interactive query would wait
// for it. So the loop publishes an immutable procsView of them (publishView) at the start and
// after each change, under the table's lock, and they load it once (Runtime.view) and read
// that: a request sees one configuration from its start to its end, the one before a reload
// or the one after it, never a mix.

// procsView is a snapshot of the processors. Nothing in it changes once published.
type procsView struct {
	procs   []*procView            // in the order of r.procs
	readers map[string][]*procView // input topic -> the processors that read it
}

// procView is a processor as of a procsView.
type procView struct {
	proc       *processor        // the live processor: only its fields that never change, and pending (atomic)
	cfg        *config.Processor // its block; a reload gives the processor a new one, never changes it
	partitions int32
	stores     []changelog.StoreSpec // never changed in place: a reload gives the processor a new slice
	// unitTopic is the topic whose partitions stand for its units in the assignment's hosts:
	// the first (sorted) topic of its co-partition group, as the balancer publishes them (iq.go).
	unitTopic string
}

// newProcsView snapshots procs and readers. The caller holds the table's lock, or New does.
func newProcsView(procs []*processor, readers map[string][]*processor) *procsView {
	v := &procsView{readers: make(map[string][]*procView, len(readers))}
	of := make(map[*processor]*procView, len(procs))
	for _, p := range procs {
		pv := &procView{proc: p, cfg: p.cfg, partitions: p.partitions, stores: p.stores}
		of[p] = pv
		v.procs = append(v.procs, pv)
	}
	for t, ps := range readers {
		for _, p := range ps {
			v.readers[t] = append(v.readers[t], of[p])
		}
	}
	group := coPartitionGroups(v.procs)
	for _, pv := range v.procs {
		root := group[pv.cfg.Inputs[0]]
		for t, g := range group {
			if g == root && (pv.unitTopic == "" || t < pv.unitTopic) {
				pv.unitTopic = t
			}
		}
	}
	return v
}

// store returns the processor of the store called name, and its spec.
func (v *procsView) store(name string) (*procView, changelog.StoreSpec, bool) {
	for _, p := range v.procs {
		for _, s := range p.stores {
			if s.Name == name {
				return p, s, true
			}
		}
	}
	return nil, changelog.StoreSpec{}, false
}

// publishView publishes the processors as they are now (Runtime.view), and hands them to the
// group's balancer. The caller holds the table's lock, or New does.
func (r *Runtime) publishView() {
	v := newProcsView(r.procs, r.readers)
	r.procsView.Store(v)
	if b := r.reload.balancer.Load(); b != nil {
		b.setProcs(v.procs)
	}
}

// view returns the processors as the loop last published them. Load it once per request.
func (r *Runtime) view() *procsView { return r.procsView.Load() }
