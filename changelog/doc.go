// Package changelog mirrors store writes into Kafka changelog topics and runs the commit of a
// task: whole for at-least-once (Task.Commit), or in two halves around the producer's Kafka
// transaction for exactly-once (Task.Prepare, then Task.Apply once the transaction commits).
package changelog
