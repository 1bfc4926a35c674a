package restore

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// probe checks with direct fetches whether the rest of a target's range
// [pos, end) holds no data record: only transaction markers, aborted records
// (read_committed) or batches emptied by compaction. The consumer advances
// its position over those without returning anything, so the restore cannot
// see that it reached the end; the probe parses the raw batches with
// kgo.ProcessFetchPartition, which reports the exact next offset.
//
// It returns true when the target is done, and otherwise the offset up to
// which it found no data record: the caller may move the target's position
// there, so that a long run of aborted records is crossed in several probes
// instead of being rescanned by each. It never declares done while a data
// record before end exists: the consumer will deliver that record.
func (r *Restorer) probe(ctx context.Context, tg *target, end int64) (done bool, clear int64, err error) {
	pos := tg.pos
	for range 16 {
		leader, _, err := r.cl.PartitionLeader(tg.ls.Topic, tg.ls.Partition)
		if err != nil {
			return false, pos, err
		}
		if leader < 0 {
			leader = tg.leader // not consumed (a load): the leader in the restore's metadata
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 0
		req.MinBytes = 0
		// The response limit is above the partition's, so that the partition
		// limit ends the response: kfake omits a partition's aborted
		// transactions when the response limit cuts it short.
		req.MaxBytes = 4 << 20
		if r.set.ReadCommitted {
			req.IsolationLevel = 1
		}
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = tg.ls.Topic
		rt.TopicID = tg.id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = tg.ls.Partition
		rp.FetchOffset = pos
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = 1 << 20
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, r.cl.Broker(int(leader)))
		if err != nil {
			return false, pos, err
		}
		var part *kmsg.FetchResponseTopicPartition
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].Partition == tg.ls.Partition {
					part = &resp.Topics[i].Partitions[j]
				}
			}
		}
		if part == nil {
			return false, pos, fmt.Errorf("partition missing from the fetch response")
		}
		if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
			return false, pos, err
		}
		fp, next := r.processFetched(tg, part, pos)
		if fp.Err != nil {
			return false, pos, fp.Err
		}
		for _, rec := range fp.Records {
			if rec.Offset >= end {
				break
			}
			if !rec.Attrs.IsControl() {
				return false, rec.Offset, nil
			}
		}
		if next >= end {
			return true, end, nil
		}
		if next <= pos {
			return false, pos, nil
		}
		pos = next
	}
	return false, pos, nil
}

// probeStalled probes tg, which made no progress for a probe interval, towards end (its end,
// or a standby's loadEnd), and moves its position over what holds no data record. It returns
// whether nothing is left before end; a failed probe is logged, and an error only once
// maxProbeFailures probes in a row failed.
func (r *Restorer) probeStalled(ctx context.Context, tg *target, end int64) (done bool, err error) {
	done, clear, err := r.probe(ctx, tg, end)
	tg.lastMoved = time.Now()
	if err != nil {
		if ctx.Err() != nil {
			return false, fmt.Errorf("restore: stopped: %w", ctx.Err())
		}
		tg.probeFailures++
		r.log.Warn("cannot tell whether the changelog has more records", "processor", tg.proc, "store", tg.ls.Store,
			"partition", tg.ls.Partition, "offset", tg.pos, "topic", tg.ls.Topic, "attempt", tg.probeFailures, "error", err)
		if tg.probeFailures >= maxProbeFailures {
			return false, fmt.Errorf("restore: processor %s store %s: %s partition %d stalled at offset %d before its end %d, and %d probes failed: %w",
				tg.proc, tg.ls.Store, tg.ls.Topic, tg.ls.Partition, tg.pos, end, tg.probeFailures, err)
		}
		return false, nil
	}
	tg.probeFailures = 0
	// Nothing but markers, aborted or compacted-away records lies before clear: a fetch
	// returns nothing there.
	tg.pos = max(tg.pos, clear)
	return done, nil
}

// processFetched decodes what a direct fetch brought of tg's changelog partition from offset
// from with kgo's decoder, as the consumer would: control records kept, aborted records
// skipped under read_committed, every message format. It returns the offset after the last
// batch read.
func (r *Restorer) processFetched(tg *target, rp *kmsg.FetchResponseTopicPartition, from int64) (kgo.FetchPartition, int64) {
	iso := kgo.ReadUncommitted()
	if r.set.ReadCommitted {
		iso = kgo.ReadCommitted()
	}
	return kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		KeepControlRecords: true,
		Offset:             from,
		IsolationLevel:     iso,
		Topic:              tg.ls.Topic,
		Partition:          tg.ls.Partition,
	}, rp, r.dec, nil)
}
