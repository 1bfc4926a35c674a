package restore

// Lag returns the changelog lag of a store partition: its changelog partition's end offset
// minus the position the store has restored to, less the transaction markers that end the
// partition, and never less than 0. It is Kafka Streams' offset lag of a store
// (LagInfo.offsetLag), with exactly-once's commit marker left out.
//
// For example, a store whose last applied record is at offset 41 has position 42; under
// exactly_once the changelog then holds that record's commit marker at 42 and ends at 43:
// Lag(0, 43, 42, 1) is 0, caught up.
//
//   - start is the partition's log start offset, 0 when not known. The offsets below it are
//     gone (retention, DeleteRecords): a position before it counts from it, as a restore
//     reads from it ([BeforeStart]).
//   - end is the partition's end offset (the high watermark): the offset its next record
//     will get.
//   - position is the next offset the store would restore from: its checkpoint (the offset
//     of the last record it applied) + 1, or 0 without a checkpoint.
//   - markers is the number of transaction markers that end the partition: offsets that
//     are not records, which a store never applies. Under exactly_once 1, the commit marker
//     of the last transaction, so that a store that has applied every record has lag 0;
//     otherwise 0.
//
// A position past end gives 0: the store is at least as far as the end seen (an end seen
// before the store moved on). When end is the broker's current one, such a checkpoint means
// the changelog was recreated and a restore starts over ([BeyondEnd]): a caller that
// wants the lag of that restore passes position 0.
//
// The lag counts offsets, not records: the markers of earlier transactions, aborted records
// and the gaps compaction leaves count too, so it is an upper bound of the records a restore
// applies. The lag of several partitions (a task's changelogs) is Lag of the sums of their
// starts, ends and positions, with one marker per partition: a partition ahead of its end
// then makes up for another's lag.
func Lag(start, end, position, markers int64) int64 {
	return max(end-max(position, start)-markers, 0)
}
