package store

import "fmt"

// The builder is the one place that decides the layers of a store partition and the order in
// which they wrap each other. Every kind of store (key-value, window, session) gets the same
// stack, outermost first:
//
//	metered -> ttl -> coalescing -> logging -> inner
//
// metered when Options.Metrics is set, ttl when Options.TTL is enabled and coalescing when
// Options.Coalesce is (both for key-value stores only, see planLayers), logging when
// Options.Changelog is set. Below the ttl layer values carry their write time (ttl.go), which
// the logging layer's changelog takes off again (Partition.timedLog). The inner store is the
// partition's pebble or memory store; for window and session stores, the time logic
// (segments, grace, expiry) over it. Each kind supplies its own type of each layer
// (layers.go for key-value stores, windowlayers.go for window and session stores); the
// builder stacks them.

// stackPlan is the layers one store partition gets.
type stackPlan struct {
	metrics  Metrics      // the metered layer's hook; nil: no metered layer
	coalesce bool         // a coalescing layer
	ttl      bool         // a ttl layer
	log      ChangeLogger // the logging layer's changelog; nil: no logging layer
}

// planLayers decides the layers of a store of kind k opened with o. It fails when o asks for
// a layer that kind cannot have.
func planLayers(k Kind, o Options) (stackPlan, error) {
	plan := stackPlan{metrics: o.Metrics, log: o.Changelog}
	if o.Coalesce {
		// Only key-value stores coalesce. A window or session write is stored, dropped as
		// late or dropped as expired against the stream time at the moment it is made (Put
		// returns which), and expiry deletes whole segments below the layers with a range
		// delete: a cache that held writes until the commit would have to decide and expire
		// by segment as the inner store does (Kafka Streams' caching window store), which
		// no layer here implements. config refuses coalesce = true for these stores too.
		if k != KeyValue {
			return stackPlan{}, fmt.Errorf("%s stores cannot coalesce", k)
		}
		plan.coalesce = true
	}
	if o.TTL.Enabled() || o.TTL.validate() != nil {
		if err := planTTL(k, o); err != nil {
			return stackPlan{}, err
		}
		plan.ttl = true
	}
	return plan, nil
}

// layerMakers makes each layer of one kind of store (S: Store, or windowLayer) over the
// layer below it.
type layerMakers[S any] struct {
	metered    func(below S, m Metrics) S
	coalescing func(below S) S // nil for the kinds that cannot coalesce (planLayers refuses them)
	ttl        func(below S) S // nil for the kinds that have no TTL (planLayers refuses them)
	logging    func(below S, log ChangeLogger) S
}

// assemble stacks the planned layers over inner, in the order of the stack, and returns the
// top.
func assemble[S any](plan stackPlan, inner S, makers layerMakers[S]) S {
	s := inner
	if plan.log != nil {
		s = makers.logging(s, plan.log)
	}
	if plan.coalesce {
		s = makers.coalescing(s)
	}
	if plan.ttl {
		s = makers.ttl(s)
	}
	if plan.metrics != nil {
		s = makers.metered(s, plan.metrics)
	}
	return s
}

// buildKeyValue stacks the layers of a key-value partition over its base store.
func (t *Task) buildKeyValue(p *Partition, plan stackPlan) Store {
	return assemble(plan, p.base, layerMakers[Store]{
		metered: func(below Store, m Metrics) Store { return newMetered(below, p.name, m) },
		coalescing: func(below Store) Store {
			c := newCoalescing(t, p.name, below)
			t.caches = append(t.caches, c)
			return c
		},
		ttl:     p.newTTLLayer,
		logging: func(below Store, log ChangeLogger) Store { return &logging{inner: below, log: p.timedLog(log)} },
	})
}

// buildWindowed stacks the layers of a window or session partition over its time logic
// (windowBase, over the partition's base store) and returns the WindowStore face of the top;
// the SessionStore face of a session store wraps it (sessionStore).
func (t *Task) buildWindowed(p *Partition, plan stackPlan) *windowStore {
	inner := &windowBase{p: p, w: p.win, base: p.base, del: p.base.(rangeDeleter)}
	top := assemble[windowLayer](plan, inner, layerMakers[windowLayer]{
		metered: func(below windowLayer, m Metrics) windowLayer {
			return &meteredWindow{meter: newMeter(p.name, m), inner: below}
		},
		logging: func(below windowLayer, log ChangeLogger) windowLayer {
			return &loggingWindow{inner: below, kind: p.win.kind, log: log}
		},
	})
	return &windowStore{top: top, w: p.win}
}
