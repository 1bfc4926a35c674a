package restore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/store"
)

// The targets that restore through a store.Loader (loading) read their changelogs with
// fetches of their own rather than through the client's consumer: the records go from the
// fetch response's bytes straight into the loader, without becoming kgo.Records (about 200
// bytes each, however small the record, and most of the restore's CPU), and the next fetch
// is in flight while one is decoded.

// loadPartitionBytes is what one fetch of a load asks of a partition, and loadFetchBytes the
// most the partitions' limits of one fetch add up to; the restore client's
// kgo.FetchMaxPartitionBytes and kgo.FetchMaxBytes lower them. A partition whose next batch
// is larger (Kafka returns it cut short, unless the partition is the response's first) is
// asked for that batch's size next time.
//
// The response's limit is loadFetchSlack above the sum of the partitions' limits, so that
// partition limits end it: kfake omits a partition's aborted transactions when the response
// limit cuts it short, and it checks that limit before the partition's, with the batch that
// would pass them, after a first partition that may hold one batch beyond its limit.
const (
	loadPartitionBytes = 256 << 10
	loadFetchBytes     = 16 * loadPartitionBytes
	loadFetchSlack     = 2 * maxKafkaBatch
	maxKafkaBatch      = 1 << 20 // message.max.bytes by default, kfake's too
)

// loadLimits returns the partition limit of a load's fetches with cl and the most their
// partitions' limits add up to.
func loadLimits(cl *kgo.Client) (partBytes, maxBytes int32) {
	partBytes, maxBytes = loadPartitionBytes, loadFetchBytes
	if v, ok := cl.OptValue(kgo.FetchMaxPartitionBytes).(int32); ok && v > 0 {
		partBytes = min(partBytes, v)
	}
	if v, ok := cl.OptValue(kgo.FetchMaxBytes).(int32); ok && v > 0 {
		maxBytes = min(maxBytes, v)
	}
	return min(partBytes, maxBytes), maxBytes
}

// maxBatchBytes bounds what a load asks of one partition for a batch larger than
// loadPartitionBytes: Kafka's batches are at most message.max.bytes (1 MiB by default).
const maxBatchBytes = 64 << 20

// loadRetryBackoff is the pause before a fetch is sent again after a retriable error (a
// leader moved, a broker restarts).
const loadRetryBackoff = 250 * time.Millisecond

// loadRound is one round of fetches: one per broker that leads a partition being loaded.
type loadRound struct {
	parts []loadPart
	err   error // a broker's request failed: the connection, the broker
	fatal error // of err, what retrying cannot mend (a response's non-retriable error)
}

// loadPart is what a round fetched of one target, from offset from.
type loadPart struct {
	tg   *target
	from int64
	rp   *kmsg.FetchResponseTopicPartition
}

// loadLoop reads the changelogs of the loading targets up to their loadEnd with fetches of its
// own and hands the records to a, until every one is there or actx ends. The targets that
// reached their end (pos >= end) are finished; a standby's target continues in batches
// through the consumer (caughtUp).
func (r *Restorer) loadLoop(ctx, actx context.Context, a appliers, targets []*target, byTP map[tpKey]*target, topics []string, follow bool) error {
	var loading []*target
	for _, tg := range targets {
		if !tg.done && tg.loading {
			loading = append(loading, tg)
		}
	}
	if len(loading) == 0 {
		return nil
	}
	var inflight chan loadRound
	send := func() {
		inflight = nil
		if req := r.loadRequests(loading); len(req) > 0 {
			inflight = make(chan loadRound, 1)
			go r.fetchRound(actx, req, byTP, inflight)
		}
	}
	send()
	var refresh bool
	// At the top of the loop every target in loading is short of its loadEnd (one that
	// reached it was handed on as loaded), so a round is in flight.
	for len(loading) > 0 {
		var round loadRound
		select {
		case round = <-inflight:
		case <-actx.Done():
			return applyFailure(ctx, actx)
		case <-time.After(r.set.ProbeInterval):
			if err := r.probeLoads(ctx, actx, a, loading, follow); err != nil {
				return err
			}
			loading = stillLoading(loading)
			continue
		}
		if round.err != nil {
			if errors.Is(round.err, kgo.ErrClientClosed) {
				return fmt.Errorf("restore: stopped: %w", round.err)
			}
			if round.fatal != nil {
				return fmt.Errorf("restore: changelogs %v: %w", topics, round.fatal)
			}
			if actx.Err() != nil {
				return applyFailure(ctx, actx)
			}
			// A broker restarting, a connection lost: retried, as the consumer does, until
			// the probes of the stalled partitions give up.
			r.log.Warn("a fetch of changelogs failed; retrying", "error", round.err)
			refresh = true
		}
		// The next round goes out before this one is decoded: the positions move to the
		// ends of the batches just fetched, which the batch headers tell.
		retry := false
		fetched := round.parts[:0]
		for _, p := range round.parts {
			tg := p.tg
			if tg.done || !tg.loading || p.from != tg.pos {
				continue // a probe moved it meanwhile: fetched again from there
			}
			if err := kerr.ErrorForCode(p.rp.ErrorCode); err != nil {
				if errors.Is(err, kerr.OffsetOutOfRange) {
					return &OutOfRangeError{Topic: tg.ls.Topic, Partition: tg.ls.Partition, Offset: tg.pos, Err: err}
				}
				if !kerr.IsRetriable(err) {
					return fmt.Errorf("restore: processor %s store %s: fetch %s partition %d at offset %d: %w", tg.proc, tg.ls.Store, tg.ls.Topic, tg.ls.Partition, tg.pos, err)
				}
				r.log.Warn("a fetch of a changelog partition failed; retrying", "processor", tg.proc, "store", tg.ls.Store,
					"partition", tg.ls.Partition, "offset", tg.pos, "topic", tg.ls.Topic, "error", err)
				refresh, retry = true, true
				continue
			}
			next, largest := batchSpan(p.rp.RecordBatches, p.from)
			if tg.pos = min(next, tg.loadEnd); tg.pos > p.from {
				tg.lastMoved = time.Now()
				fetched = append(fetched, p)
				if largest > int64(r.loadPartBytes) {
					raiseBatchBytes(loading, tg.ls.Topic, largest)
				}
			} else if data := p.rp.RecordBatches; len(data) >= 12 {
				// Only the start of a batch larger than the partition's limit.
				raiseBatchBytes(loading, tg.ls.Topic, 12+int64(int32(binary.BigEndian.Uint32(data[batchLengthAt:]))))
			}
		}
		if refresh {
			if err := r.refreshLeaders(ctx, loading, topics); err != nil {
				r.log.Warn("could not read the changelogs' leaders; retrying", "error", err)
			} else {
				refresh = false
			}
		}
		if round.err != nil || retry {
			select {
			case <-actx.Done():
				return applyFailure(ctx, actx)
			case <-time.After(loadRetryBackoff):
			}
		}
		send()
		for _, p := range fetched {
			if err := r.loadFetched(ctx, actx, a, p, follow); err != nil {
				return err
			}
		}
		if err := r.probeLoads(ctx, actx, a, stillLoading(loading), follow); err != nil {
			return err
		}
		loading = stillLoading(loading)
	}
	return nil
}

// raiseBatchBytes raises the partition limit of the loading targets of topic to a batch of n
// bytes that one of them fetched, whole or cut short. A changelog's partitions are written alike, so their
// batches are of a size: a partition whose next batch is larger than its limit gets nothing
// from Kafka unless it comes first in its fetch (the first partition may exceed its limit by
// a batch), and would otherwise be read only when the ones before it are done, one partition
// at a time, by one applier.
func raiseBatchBytes(loading []*target, topic string, n int64) {
	n = min(n, maxBatchBytes)
	for _, tg := range loading {
		if tg.ls.Topic == topic && int64(tg.batchBytes) < n {
			tg.batchBytes = int32(n)
		}
	}
}

// stillLoading returns the targets of ts that are neither done nor past their load.
func stillLoading(ts []*target) []*target {
	n := 0
	for _, tg := range ts {
		if !tg.done && tg.loading {
			ts[n] = tg
			n++
		}
	}
	return ts[:n]
}

// loadFetched hands what a round fetched of one target, from p.from up to its position, to
// its applier, which decodes it; a target at its loadEnd is finished, or, for a standby, goes
// on in batches.
func (r *Restorer) loadFetched(ctx, actx context.Context, a appliers, p loadPart, follow bool) error {
	tg := p.tg
	if !a.send(actx, applyJob{tg: tg, fetched: p.rp, from: p.from, hw: p.rp.HighWatermark}) {
		return applyFailure(ctx, actx)
	}
	if tg.pos < tg.loadEnd {
		return nil
	}
	return r.loaded(ctx, actx, a, tg, follow)
}

// decodeFetched appends to ws the records of what a load fetched of tg's changelog partition,
// from offset from up to its loadEnd, and returns it with the offset of the last one.
func (r *Restorer) decodeFetched(ws []store.Write, tg *target, rp *kmsg.FetchResponseTopicPartition, from int64) (_ []store.Write, last int64, err error) {
	ws, last, _, err = decodeBatches(ws, rp.RecordBatches, from, tg.loadEnd, r.dec)
	if err == nil && len(rp.AbortedTransactions) > 0 || errors.Is(err, errOldFormat) {
		// Aborted transactions to skip, or an old format: kgo's decoder reads these. What
		// was decoded is cleared first: fewer writes may take its place.
		clear(ws)
		ws, last, err = r.decodeWithKgo(ws[:0], tg, rp, from)
	}
	if err != nil {
		return ws, last, fmt.Errorf("restore: processor %s store %s: %s partition %d at offset %d: %w", tg.proc, tg.ls.Store, tg.ls.Topic, tg.ls.Partition, from, err)
	}
	return ws, last, nil
}

// loaded ends the load of a target at its loadEnd: a restore is done with it; a standby
// finishes its loader and follows from there in batches.
func (r *Restorer) loaded(ctx, actx context.Context, a appliers, tg *target, follow bool) error {
	tg.loading = false
	j := applyJob{tg: tg, caughtUp: true}
	if !follow {
		tg.done = true
		j = applyJob{tg: tg, end: true}
	}
	if !a.send(actx, j) {
		return applyFailure(ctx, actx)
	}
	return nil
}

// decodeWithKgo decodes a fetched partition with kgo's decoder (processFetched), which skips
// the records of aborted transactions and reads every message format.
func (r *Restorer) decodeWithKgo(ws []store.Write, tg *target, rp *kmsg.FetchResponseTopicPartition, from int64) (_ []store.Write, last int64, err error) {
	fp, _ := r.processFetched(tg, rp, from)
	if fp.Err != nil {
		return ws, -1, fp.Err
	}
	ws, last = appendRecords(ws, fp.Records, from, tg.loadEnd)
	return ws, last, nil
}

// appendRecords appends to ws the data records of recs whose offsets lie in [pos, end), as
// writes (a nil value deletes; a LogAppendTime timestamp, the broker's clock, is -1), and
// returns it with the offset of the last one (-1 for none).
func appendRecords(ws []store.Write, recs []*kgo.Record, pos, end int64) ([]store.Write, int64) {
	last := int64(-1)
	for _, rec := range recs {
		if rec.Offset < pos {
			continue
		}
		if rec.Offset >= end {
			break
		}
		if rec.Attrs.IsControl() {
			continue
		}
		ts := rec.Timestamp.UnixMilli()
		if rec.Attrs.TimestampType() == 1 {
			ts = -1
		}
		ws = append(ws, store.Write{Key: rec.Key, Value: rec.Value, Delete: rec.Value == nil, Timestamp: ts, Offset: rec.Offset})
		last = rec.Offset
	}
	return ws, last
}

// loadRequests builds the next round's fetches from the positions of the loading targets
// short of their loadEnd: per leader, the first ones first, as many as the response limit
// holds (one at least). A partition is read to its end before the next one starts, so that
// the loaders of the partitions done write their last runs while the next are read.
func (r *Restorer) loadRequests(loading []*target) map[int32]*kmsg.FetchRequest {
	partBytes, maxBytes := r.loadPartBytes, r.loadMaxBytes
	reqs := map[int32]*kmsg.FetchRequest{}
	for _, tg := range loading {
		if tg.pos >= tg.loadEnd {
			continue // read to its end: loaded once its last fetch is handed on
		}
		limit := max(partBytes, tg.batchBytes)
		req := reqs[tg.leader]
		if req == nil {
			req = kmsg.NewPtrFetchRequest()
			req.MaxWaitMillis = 500
			req.MinBytes = 1
			req.MaxBytes = loadFetchSlack // plus each partition's limit
			if r.set.ReadCommitted {
				req.IsolationLevel = 1
			}
			reqs[tg.leader] = req
		} else if req.MaxBytes-loadFetchSlack+limit > maxBytes {
			// Waiting for the partitions before it: not stalled, not to be probed.
			tg.lastMoved = time.Now()
			continue
		}
		req.MaxBytes += limit
		var rt *kmsg.FetchRequestTopic
		for j := range req.Topics {
			if req.Topics[j].Topic == tg.ls.Topic {
				rt = &req.Topics[j]
			}
		}
		if rt == nil {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = tg.ls.Topic, tg.id
			req.Topics = append(req.Topics, t)
			rt = &req.Topics[len(req.Topics)-1]
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = tg.ls.Partition
		rp.FetchOffset = tg.pos
		rp.PartitionMaxBytes = limit
		rt.Partitions = append(rt.Partitions, rp)
	}
	return reqs
}

// fetchRound sends the fetches of a round, one per broker at once, and delivers what they
// brought, matched to their targets, on out.
func (r *Restorer) fetchRound(ctx context.Context, reqs map[int32]*kmsg.FetchRequest, byTP map[tpKey]*target, out chan<- loadRound) {
	type answer struct {
		leader int32
		req    *kmsg.FetchRequest
		resp   *kmsg.FetchResponse
		err    error
	}
	answers := make(chan answer, len(reqs))
	for leader, req := range reqs {
		go func() {
			resp, err := req.RequestWith(ctx, r.cl.Broker(int(leader)))
			if err != nil {
				err = fmt.Errorf("fetch from broker %d: %w", leader, err)
			}
			answers <- answer{leader, req, resp, err}
		}()
	}
	var round loadRound
	for range reqs {
		an := <-answers
		if an.err != nil {
			round.err = errors.Join(round.err, an.err)
			continue
		}
		if err := kerr.ErrorForCode(an.resp.ErrorCode); err != nil {
			err = fmt.Errorf("fetch from broker %d: %w", an.leader, err)
			if !kerr.IsRetriable(err) {
				round.fatal = errors.Join(round.fatal, err)
			}
			round.err = errors.Join(round.err, err)
			continue
		}
		for _, rt := range an.req.Topics {
			for _, rq := range rt.Partitions {
				rp := findFetched(an.resp, rt, rq.Partition)
				if rp == nil {
					continue // asked again next round
				}
				round.parts = append(round.parts, loadPart{tg: byTP[tpKey{rt.Topic, rq.Partition}], from: rq.FetchOffset, rp: rp})
			}
		}
	}
	out <- round
}

// findFetched returns the partition of resp that answers partition p of the request's topic
// rt (named, or from version 13, identified by its topic ID).
func findFetched(resp *kmsg.FetchResponse, rt kmsg.FetchRequestTopic, p int32) *kmsg.FetchResponseTopicPartition {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		// Up to version 12 the response names its topics, from 13 it gives their IDs only
		// (a broker before Kafka 2.8 has no IDs: they are all zero).
		if t.Topic != "" && t.Topic != rt.Topic || t.Topic == "" && t.TopicID != rt.TopicID {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == p {
				return &t.Partitions[j]
			}
		}
	}
	return nil
}

// refreshLeaders reads the leaders of the loading targets' changelog partitions anew.
func (r *Restorer) refreshLeaders(ctx context.Context, loading []*target, topics []string) error {
	md, err := r.adm.Metadata(kadm.WithAuthorizedOps(ctx), topics...)
	if err != nil {
		return err
	}
	for _, tg := range loading {
		if d, ok := md.Topics[tg.ls.Topic]; ok && d.Err == nil {
			if p, ok := d.Partitions[tg.ls.Partition]; ok && p.Err == nil && p.Leader >= 0 {
				tg.leader = p.Leader
			}
		}
	}
	return nil
}

// probeLoads probes the loading targets that made no progress for a probe interval, as the
// consumer's loop does: a changelog that ends in records a fetch never returns (compacted
// away, aborted) is loaded once nothing else lies before its loadEnd.
func (r *Restorer) probeLoads(ctx, actx context.Context, a appliers, loading []*target, follow bool) error {
	for _, tg := range loading {
		if time.Since(tg.lastMoved) < r.set.ProbeInterval {
			continue
		}
		done, err := r.probeStalled(ctx, tg, tg.loadEnd)
		if err != nil {
			return err
		}
		if done {
			tg.pos = tg.loadEnd
			if err := r.loaded(ctx, actx, a, tg, follow); err != nil {
				return err
			}
		}
	}
	return nil
}
