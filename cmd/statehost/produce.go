package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/kafkaclient"
)

const produceSynopsis = "[--brokers ADDRS] [--config FILE] [--key-separator SEP] TOPIC"

const produceUsage = `Writes each line of standard input to TOPIC as one record, and waits until the broker
has acknowledged every one. With --key-separator, the part of a line before the first SEP
is the record's key and the rest its value; a line without SEP has a null key. Keyed
records go to the partition of their key's murmur2 hash, like the Java client's; records
without a key stick to one partition per batch. The topic must exist. With --config, the
records are produced with the kafka block's compression, linger and batch_size, as the
application's are (a line longer than batch_size is refused).
`

// produceDeliveryTimeout bounds how long a record may wait for its acknowledgement,
// retries included (the Java client's delivery.timeout.ms).
const produceDeliveryTimeout = 30 * time.Second

// produceOptions are the flags and argument of statehost produce.
type produceOptions struct {
	target kafkaTarget
	keySep string
	topic  string
}

func produceCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "produce", produceSynopsis, produceUsage)
	var o produceOptions
	kf := addKafkaFlags(fs)
	fs.StringVar(&o.keySep, "key-separator", "", "`SEP` between key and value in a line; empty: every line is a value with a null key")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, "want one TOPIC, got %d arguments", len(pos))
	}
	o.topic = pos[0]
	if o.target, ok = kf.resolve(env); !ok {
		return exitFailure
	}
	log := env.Logger.Named("produce")
	n, err := produce(ctx, log, env.Stdin, o)
	if err != nil {
		if n > 0 {
			log.Info(fmt.Sprintf("produced %d records to %s before stopping", n, o.topic))
		}
		return failed(log, "cannot produce", err)
	}
	log.Info(fmt.Sprintf("produced %d records to %s", n, o.topic))
	return exitOK
}

// produce writes the lines of in to the topic and returns how many records the broker
// acknowledged.
func produce(ctx context.Context, log hclog.Logger, in io.Reader, o produceOptions) (int64, error) {
	batch, err := topicBatchBound(ctx, log, o)
	if err != nil {
		return 0, err
	}
	// The kafka block's producer settings (compression, linger, batch size), as the
	// application's producers have them; the batch bound after them, so that it wins.
	opts := append(kafkaclient.ProducerOpts(o.target.kafka),
		kgo.DefaultProduceTopic(o.topic),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), // murmur2 of the key, as Java's default
		kgo.RecordDeliveryTimeout(produceDeliveryTimeout),
		kgo.ProducerBatchMaxBytes(batch),
	)
	cl, err := newClient(log, o.target, "produce", opts...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()

	var (
		mu       sync.Mutex
		acked    int64
		firstErr error
	)
	promise := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			acked++
		} else if firstErr == nil {
			firstErr = err
		}
	}
	failedYet := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}

	// Records are produced with a context that a signal does not cancel, so that on SIGINT
	// or SIGTERM the lines read so far are still delivered.
	produceCtx := context.WithoutCancel(ctx)
	stop := make(chan struct{})
	defer close(stop)
	lines, readErr := readLines(in, stop)
	interrupted := false
read:
	for !failedYet() {
		select {
		case line, ok := <-lines:
			if !ok {
				break read
			}
			cl.Produce(produceCtx, lineRecord(line, o.keySep), promise) // blocks while the buffer is full
		case <-ctx.Done():
			interrupted = true
			break read
		}
	}
	flushCtx, cancel := context.WithTimeout(produceCtx, produceDeliveryTimeout)
	defer cancel()
	flushErr := cl.Flush(flushCtx)

	mu.Lock()
	defer mu.Unlock()
	switch {
	case firstErr != nil:
		return acked, fmt.Errorf("producing to %s on %s: %w", o.topic, o.target.brokers, firstErr)
	case flushErr != nil:
		return acked, fmt.Errorf("producing to %s on %s: %w", o.topic, o.target.brokers, flushErr)
	case interrupted:
		return acked, fmt.Errorf("interrupted while reading standard input: %w", context.Cause(ctx))
	}
	return acked, *readErr // lines is closed: readErr is set
}

// Bounds of franz-go's record batch bound (kgo.ProducerBatchMaxBytes): it refuses less than
// 512 bytes, and more than its largest produce request (100 MiB by default) less room for
// the request's other fields.
const (
	minBatchBound = 512
	maxBatchBound = 100<<20 - 64<<10
)

// topicBatchBound checks that the topic exists and returns the bound of the command's record
// batches: the topic's max.message.bytes, what the broker takes, instead of franz-go's default
// of 1,000,012 bytes, which refused lines the broker takes (Kafka's default is 1,048,588).
// When the topic's config cannot be read it is Kafka's default, and the broker decides. With
// --config, the kafka block's batch_size lowers it, as it bounds the application's batches
// (a line longer than it is refused, as a longer record of the application is); without, the
// default batch_size (1 MiB) does not, so that the command takes every line the broker takes.
func topicBatchBound(ctx context.Context, log hclog.Logger, o produceOptions) (int32, error) {
	const kafkaDefault = 1048588
	cl, err := newClient(log, o.target, "produce")
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	if _, err := requireTopic(ctx, cl, o.target, o.topic); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, topicCheckTimeout)
	defer cancel()
	n := int64(kafkaDefault)
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, o.topic)
	if err == nil {
		var rc kadm.ResourceConfig
		if rc, err = rcs.On(o.topic, nil); err == nil {
			err = rc.Err
		}
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" && c.Value != nil {
				if v, perr := strconv.ParseInt(*c.Value, 10, 32); perr == nil {
					n = v
				}
			}
		}
	}
	if err != nil {
		log.Warn("could not read the topic's max.message.bytes: assuming Kafka's default", "topic", o.topic, "default", kafkaDefault, "error", err)
	}
	if k := o.target.kafka; o.target.configured && k.BatchSize > 0 {
		n = min(n, k.BatchSize)
	}
	return int32(min(max(n, minBatchBound), maxBatchBound)), nil
}

// readLines sends the lines of in, end of line included, until its end or until stop is
// closed; at the end of in it closes the channel after setting the error, nil at the end of
// input. Reading runs in a goroutine of its own, so that a signal can stop a command waiting on
// its standard input; that goroutine stays blocked in Read until the input ends or the
// process exits.
func readLines(in io.Reader, stop <-chan struct{}) (<-chan []byte, *error) {
	lines := make(chan []byte, 64)
	readErr := new(error)
	go func() {
		r := bufio.NewReaderSize(in, 64<<10) // lines of any length: ReadBytes grows past the buffer
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				select {
				case lines <- line:
				case <-stop:
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					*readErr = fmt.Errorf("reading standard input: %w", err)
				}
				close(lines)
				return
			}
		}
	}()
	return lines, readErr
}

// lineRecord returns the record of one line, its end of line ("\n" or "\r\n") removed.
func lineRecord(line []byte, keySep string) *kgo.Record {
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if keySep != "" {
		if key, value, ok := bytes.Cut(line, []byte(keySep)); ok {
			return &kgo.Record{Key: key, Value: value}
		}
	}
	return &kgo.Record{Value: line}
}
