package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const consumeSynopsis = "[--brokers ADDRS] [--config FILE] [--from-beginning=false] [--follow] [--separator SEP] [--read-committed] [--headers] TOPIC"

const consumeUsage = `Prints the records of every partition of TOPIC to standard output, one per line, as
KEY<SEP>VALUE: a null key prints as nothing, a null value as <null>. Without --follow it
prints the records that were in the topic when it started, then exits; with --follow it
goes on printing new records until SIGINT or SIGTERM. --from-beginning=false starts at the
end of each partition, which makes sense only with --follow. No consumer group is used:
nothing is committed.

With --headers each line is KEY<SEP>VALUE<SEP>HEADERS, where HEADERS is the record's headers
in their order as one JSON array of {"key": ..., "value": ...} objects, [] for none: a
null header value is null, bytes that are not valid UTF-8 become U+FFFD. The array holds no
tab and no newline (JSON escapes them), so with the default separator it is the text after
the line's last tab.
`

// consumeOptions are the flags and argument of statehost consume.
type consumeOptions struct {
	target        kafkaTarget
	fromBeginning bool
	follow        bool
	sep           string
	readCommitted bool
	headers       bool
	topic         string
}

func consumeCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "consume", consumeSynopsis, consumeUsage)
	var o consumeOptions
	kf := addKafkaFlags(fs)
	fs.BoolVar(&o.fromBeginning, "from-beginning", true, "start at the beginning of each partition; false: at its end")
	fs.BoolVar(&o.follow, "follow", false, "keep printing new records until SIGINT or SIGTERM")
	fs.StringVar(&o.sep, "separator", "\t", "`SEP` printed between key and value")
	fs.BoolVar(&o.readCommitted, "read-committed", false, "print only records of committed transactions (isolation.level=read_committed)")
	fs.BoolVar(&o.headers, "headers", false, "print each record's headers after its value, as a JSON array (see above)")
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
	log := env.Logger.Named("consume")
	n, err := consume(ctx, log, env.Stdout, o)
	if err != nil {
		return failed(log, "cannot consume", err)
	}
	log.Debug(fmt.Sprintf("consumed %d records from %s", n, o.topic))
	return exitOK
}

// consume prints the records of the topic to out and returns how many it printed.
func consume(ctx context.Context, log hclog.Logger, out io.Writer, o consumeOptions) (int64, error) {
	start := kgo.NewOffset().AtStart()
	if !o.fromBeginning {
		start = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{
		kgo.ConsumeTopics(o.topic), // without a group: every partition
		kgo.ConsumeResetOffset(start),
		// Control records (transaction markers) are not printed, but their offsets tell
		// that a partition has reached its end.
		kgo.KeepControlRecords(),
	}
	if o.readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := newClient(log, o.target, "consume", opts...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	if _, err := requireTopic(ctx, cl, o.target, o.topic); err != nil {
		return 0, err
	}

	// Without --follow: the end offset of each partition that has records to print.
	var ends map[int32]int64
	if !o.follow {
		if !o.fromBeginning {
			return 0, nil
		}
		if ends, err = endOffsets(ctx, kadm.NewClient(cl), o); err != nil {
			return 0, err
		}
		if len(ends) == 0 {
			return 0, nil
		}
	}

	w := bufio.NewWriter(out)
	var n int64
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			if err := w.Flush(); err != nil {
				return n, fmt.Errorf("writing records: %w", err)
			}
			if o.follow {
				return n, nil // SIGINT or SIGTERM is how --follow stops
			}
			return n, fmt.Errorf("interrupted after %d records of %s", n, o.topic)
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			if fetchErr == nil {
				fetchErr = fmt.Errorf("consuming %s partition %d: %w", topic, p, err)
			}
		})
		if fetchErr != nil {
			return n, fetchErr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if ends != nil {
				end, ok := ends[r.Partition]
				if !ok || r.Offset >= end {
					return // done with that partition, or produced after we started
				}
				if r.Offset+1 >= end {
					delete(ends, r.Partition)
				}
			}
			if r.Attrs.IsControl() {
				return
			}
			writeRecord(w, r, o.sep, o.headers)
			n++
		})
		if err := w.Flush(); err != nil {
			return n, fmt.Errorf("writing records: %w", err)
		}
		if ends != nil && len(ends) == 0 {
			return n, nil
		}
	}
}

// endOffsets returns the partitions of the topic that hold records, with the offset after
// their last one: the high watermark, or with --read-committed the last stable offset.
func endOffsets(ctx context.Context, adm *kadm.Client, o consumeOptions) (map[int32]int64, error) {
	list := adm.ListEndOffsets
	if o.readCommitted {
		list = adm.ListCommittedOffsets
	}
	endsListed, err := list(ctx, o.topic)
	if err == nil {
		err = endsListed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of %s on %s: %w", o.topic, o.target.brokers, err)
	}
	startsListed, err := adm.ListStartOffsets(ctx, o.topic)
	if err == nil {
		err = startsListed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the start offsets of %s on %s: %w", o.topic, o.target.brokers, err)
	}
	ends := map[int32]int64{}
	for p, e := range endsListed[o.topic] {
		if s, ok := startsListed.Lookup(o.topic, p); ok && e.Offset > s.Offset {
			ends[p] = e.Offset
		}
	}
	return ends, nil
}

// writeRecord writes one record as KEY<SEP>VALUE, with headers <SEP>HEADERS, and a newline.
func writeRecord(w *bufio.Writer, r *kgo.Record, sep string, headers bool) {
	w.Write(r.Key)
	w.WriteString(sep)
	if r.Value == nil {
		w.WriteString("<null>")
	} else {
		w.Write(r.Value)
	}
	if headers {
		w.WriteString(sep)
		w.Write(headersJSON(r.Headers))
	}
	w.WriteByte('\n')
}

// jsonHeader is a record header as --headers prints it.
type jsonHeader struct {
	Key   string  `json:"key"`
	Value *string `json:"value"` // nil: a null value
}

// headersJSON returns the headers as --headers prints them: a JSON array of jsonHeader.
func headersJSON(hs []kgo.RecordHeader) []byte {
	out := make([]jsonHeader, len(hs))
	for i, h := range hs {
		out[i].Key = h.Key
		if h.Value != nil {
			v := string(h.Value)
			out[i].Value = &v
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<" as it is
	_ = enc.Encode(out)      // strings only: it cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
