// Package changelog mirrors store writes into Kafka changelog topics and runs the commit of a
// task: whole for at-least-once (Task.Commit), or in two halves around the producer's Kafka
// transaction for exactly-once (Task.Prepare, then Task.Apply once the transaction commits).
//
// A task's changelog and output records are queued in write order and handed to the
// producer client by Task.Flush (the runtime calls it when a plugin call returns) or by the
// commit; see tracker for why, and Producer for the backpressure.
package changelog
