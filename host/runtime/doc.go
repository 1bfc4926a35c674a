// Package runtime runs a statehost application: it turns a configuration into tasks
// (processor x partition) on a Kafka consumer group, restores their stores, feeds their
// plugins with batches of records, and commits them in the order of the state core.
//
// # The path of a record
//
// One franz-go client in the consumer group named by the application id consumes the inputs
// of every processor. A poll's records are grouped per task and each task's batch goes to its
// plugin instance as a job on a worker (at most Options.Workers at once); the loop does not
// wait for the jobs: it polls, starts more jobs and commits meanwhile, and a task that is still
// busy holds its next records for its next job (dispatch.go). A slow or looping record holds
// back only its own task. A record emitted to an output topic is partitioned by key with
// murmur2, as the Java client does (KeyPartition), and produced through the task's
// changelog.Task, so the next commit waits for it. The task queues what a plugin call writes
// and emits and hands it to the producer client when the call returns (changelog.Task.Flush,
// after every batch, punctuation and init; under exactly-once a task with a coalescing store
// keeps it until its commit). An emit that finds the producer full waits for room (not
// charged to the call's time limit) until the producer's wait limit.
//
// # Commits
//
// Every commit_interval, when a task's uncommitted writes grow past their bound, on revocation
// and on shutdown, every task that processed records since its last commit and is not busy
// commits (changelog.Task.Commit: its changelog and output records acknowledged, then its
// write batch and checkpoint applied atomically), and only then are the input offsets
// committed to the group: each partition up to the first record that one of the tasks reading
// it has not committed. Records of repartition topics below the committed offsets are then
// deleted (purged).
//
// Under exactly-once the group consumer is also the transactional producer, and a commit is
// one Kafka transaction: the tasks' records are handed over and acknowledged
// (changelog.Task.Prepare), the transaction commits with the input offsets, then the tasks
// apply their stores (changelog.Task.Apply). A busy task's ended jobs commit with it, and its
// store applies with a later commit. An aborted transaction revives its tasks. See txn.go and
// the decision note 20261201_task_jobs.md.
//
// # Rebalances
//
// The group uses cooperative rebalancing and blocks rebalances while a poll's records are
// processed (kgo.BlockRebalanceOnPoll), so a revocation always sees committed or committable
// tasks. An assigned partition is paused until every task that reads it has opened its stores
// and restored them from their changelogs; a revoked task commits and closes; a lost task
// closes without committing (the next owner restores what it had logged).
//
// The group's balancer (balancer.go, assign.go) assigns whole tasks, lag-aware: members report
// the state they hold (warm.go, meta.go), active tasks go to caught-up members, and each
// member's sync assignment also names its standby tasks and warmups, whose stores follow their
// changelogs without a plugin (standby.go). A standby whose task becomes active here hands its
// open stores to it. State of tasks a member no longer holds is deleted after
// state_cleanup_delay.
//
// # Failures
//
// A plugin error or a failed commit stops the application: the jobs still running are
// stopped, the other tasks commit and close (under exactly-once the transaction aborts
// instead), the failed task closes without committing its last batch, and Run returns the
// error, which names the processor, the partition and the offset. Nothing is lost: the failed task's input
// is processed again from its last committed offset by the next run.
//
// A processor's on_error setting changes what a poison record does (the plugin fails on
// that record: an error, a trap, its time or memory limit): "skip" drops it and
// "dead_letter" sends it to <application_id>-<processor>-dlq, in both cases with its writes
// undone and its emits dropped, and the task goes on (poison.go).
package runtime
