package main

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runConsumeChild reads the topic s.Input from its start to its end offsets, as the parent's
// consume does, in a process of its own: the baseline of a cold restore, which runs in a
// process that has just started. A process's first consume of the quick profile's 250,000
// records took 88 to 116 ms, its third and fourth 56 to 84 ms (2026-12-05): a heap that grows
// from a few MB pays for page faults and collections that a process which has consumed
// before does not.
func runConsumeChild(ctx context.Context, s spec) (childReport, error) {
	var rep childReport
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
	if err != nil {
		return rep, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// The parent kills a child that runs past its timeout: no deadline of its own.
	st, err := consumeTopic(ctx, adm, s.Brokers, time.Hour, s.Input, nil)
	if err != nil {
		return rep, err
	}
	rep.Consumed, rep.ConsumeNanos = st.records, int64(st.took)
	return rep, nil
}
