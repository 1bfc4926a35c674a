package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
)

// runGoka runs the keyed count as a goka processor would be written: the group table is the
// state and its changelog (the topic "<group>-table", compacted), each new count is emitted
// to the output topic. goka's defaults stand, but for the Kafka version (kfake speaks the
// protocol of Kafka 2.8 and later; sarama asks for 2.0 by default) and the initial offset
// (goka starts a new group at the newest offset; the benchmark's input is already written).
func runGoka(ctx context.Context, s spec) error {
	cfg := goka.DefaultConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	goka.ReplaceGlobalConfig(cfg)
	sarama.Logger = log.New(io.Discard, "", 0)

	tmc := goka.NewTopicManagerConfig()
	tmc.Table.Replication = 1
	tmc.Stream.Replication = 1
	g := goka.DefineGroup(goka.Group(s.App),
		goka.Input(goka.Stream(s.Input), new(codec.String), func(ctx goka.Context, _ any) {
			var c int64
			if v := ctx.Value(); v != nil {
				c = v.(int64)
			}
			c++
			ctx.SetValue(c)
			ctx.Emit(goka.Stream(s.Output), ctx.Key(), c)
		}),
		goka.Persist(new(codec.Int64)),
		goka.Output(goka.Stream(s.Output), new(codec.Int64)),
	)
	p, err := goka.NewProcessor(s.Brokers, g,
		goka.WithStorageBuilder(storage.DefaultBuilder(s.Dir)),
		goka.WithTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(cfg, tmc)),
		goka.WithLogger(log.New(io.Discard, "", 0)),
	)
	if err != nil {
		return fmt.Errorf("goka: processor: %w", err)
	}
	if err := p.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("goka: %w", err)
	}
	return nil
}
