package main

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/broker"
)

const brokerSynopsis = "--data-dir DIR [--listen ADDR] [--sync-writes] [--events FILE]"

const brokerUsage = `Runs a Kafka-protocol broker (one node) for statehost and its clients, with its topics,
records and group offsets kept in DIR, until SIGINT or SIGTERM; then it writes its state to
DIR and exits 0. Started again on the same DIR, it has the same topics and records. Only one
broker may use a DIR at a time. Topics are not created on first use: create them first.
Once it accepts connections it logs "broker listening" with its address. With --events FILE
it also appends, as JSON lines, a "broker_listening" event with its address (addr) then, as it
exits, an "exited" event with the error that ended it, if any.
`

func brokerCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "broker", brokerSynopsis, brokerUsage)
	var o broker.Options
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:9092", "`ADDR` (host:port) to listen on; port 0 picks a free port, host 0.0.0.0 every interface")
	fs.StringVar(&o.DataDir, "data-dir", "", "`DIR` of the broker's state, created when missing (required)")
	fs.BoolVar(&o.SyncWrites, "sync-writes", false, "fsync every produced batch before acknowledging it")
	eventsPath := fs.String("events", "", "append the broker's events to `FILE`, one JSON object a line")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, "unexpected arguments %q", pos)
	}
	if o.DataDir == "" {
		return usageError(fs, "--data-dir is required")
	}
	log := env.Logger.Named("broker")
	o.Logger = log
	events, err := openEventFile(*eventsPath, log)
	if err != nil {
		return failed(log, "cannot open the events file", err)
	}
	err = serveBroker(ctx, log, o, events)
	events.exited(err)
	if err != nil {
		return exitFailure
	}
	return exitOK
}

// serveBroker runs the broker of o until ctx ends; it logs and returns the error that ended it.
func serveBroker(ctx context.Context, log hclog.Logger, o broker.Options, events *eventFile) error {
	b, err := broker.Start(o)
	if err != nil {
		log.Error("cannot start the broker", "error", err)
		return fmt.Errorf("cannot start the broker: %w", err)
	}
	log.Info("broker listening", "addr", b.Addr(), "data_dir", o.DataDir)
	events.write(runtime.Event{Kind: eventBrokerListening, Addr: b.Addr()})
	<-ctx.Done()
	log.Info("broker stopping")
	if err := b.Close(); err != nil {
		log.Error("cannot close the broker", "error", err)
		return fmt.Errorf("cannot close the broker: %w", err)
	}
	log.Info("broker stopped", "data_dir", o.DataDir)
	return nil
}
