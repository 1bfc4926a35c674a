// Package runtime runs a statehost application: it turns a configuration into tasks
// (processor x partition) on a Kafka consumer group, restores their stores, feeds their
// plugins with batches of records, and commits them in the order of the state core.
//
// # Parts
//
// A Runtime (runtime.go) is New's assembly of these parts and the loop that drives them (Run,
// loop.go). Each part has a file of its own and says which lock guards what.
//
//   - The task table (taskTable, tasks.go) holds the tasks of this instance: active ones,
//     restoring or running, and the standby and warmup copies of other instances' tasks; the
//     input partitions assigned here and those paused; and the lock (taskTable.mu) that
//     guards all of it and the loop's side of every task. It makes the transitions of a
//     task's life, each with what it shows in /v1/status (statusBoard, admin.go) and what it
//     tells the group's balancer (localState, warm.go).
//   - A task (task.go) is one processor on one partition: its stores and records through a
//     changelog.Task, the pool of plugin instances it borrows one from for each job
//     (pools.go: a pool per processor and module, of Options.Workers idle instances), and
//     the input records it processed since its last commit.
//   - The dispatcher (dispatch.go) runs the tasks' plugin calls as jobs on workers, holds the
//     records that arrive for a busy task, and takes the ended jobs' results in.
//   - The committer (commit.go) commits under the configured guarantee: atLeastOnce, or
//     exactlyOnce (txn.go), which owns the transactional session. task.uncommitted is the one
//     rule for what a commit must take; commitReason says why the loop commits;
//     taskTable.offsetFor how far each input partition's committed offset may go.
//   - The signals (signals.go) are what the group's callbacks and the jobs hand to the loop
//     without waiting for the table's lock: group events, ended jobs, the fatal error, and
//     the cancellation of a poll or a restore.
//   - The rebalance callbacks (rebalance.go) and the group's balancer (balancer.go, assign.go,
//     meta.go) place whole tasks on members, lag-aware, with standbys and warmups.
//   - The standbys (standby.go) follow their changelogs without a plugin, and hand their
//     open stores to their task when it becomes active here.
//   - The deploys (deploy.go, watch.go) switch a processor's tasks to a new module at commit
//     boundaries; a task whose stores the module declares a higher version of migrates them
//     first, as a job of its own, committed before it switches (migrate.go).
//   - The reloads (reload.go, reload_prepare.go, reload_apply.go) apply a changed
//     configuration file at a commit boundary without jobs, or refuse it with its diagnostics;
//     the group's balancer runs a processor a reload added once every member has it
//     (balancer_fleet.go).
//   - The queries (iq.go; pages and window stores: iq_page.go), the admin endpoint
//     (admin.go; the deploy history: deploys_history.go; the web console of host/console)
//     and the metrics (metrics.go) read the application while it runs. They, and the group's
//     balancer, read the processors through the snapshot the loop publishes at start and
//     after each reload (view.go), never the loop's own procs and readers.
//   - The topic setup (topics.go, limits.go) checks and creates topics in New and learns the
//     size limits of what the tasks produce; the clients (runtime.go) are the Kafka clients.
//   - The poison guards (poison.go) undo a poison record's effects for on_error = "skip" and
//     "dead_letter".
//   - The sweep of key-value stores with a ttl (ttl.go) deletes their expired entries, a
//     bounded step at a time in the tasks' own jobs.
//
// Locks are taken in this order: reloads.serial (one Reload at a time), deploys.mu (one Deploy
// at a time), then taskTable.mu, then the leaf locks (signals.mu, statusBoard.mu,
// localState.mu, reloads.mu), which are never held while waiting for anything (an
// engine.Pool's lock, procPools.mu, neither). A job never takes
// taskTable.mu: while it runs only its goroutine touches its task's borrowed instance and
// stores (dispatch.go).
//
// # A round of the loop
//
// Each round of Run, under the table's lock unless said otherwise:
//
//  1. It takes the group's events (assignments become tasks waiting for restore; under
//     exactly-once, revocations and losses close tasks), makes the standbys follow the
//     assignment, and restores the tasks that wait (below).
//  2. Without the lock, it polls the group consumer for at most the time to the next commit,
//     punctuation or standby work; an assignment or an ended job wakes it early.
//  3. It takes in the ended jobs and hands each task its records: a task that is not busy
//     starts a job with all it holds; a busy one holds them for its next job. A slow job holds
//     back only its own task.
//  4. When a commit is due (commitDue: a waiting rebalance, commit_interval, a task's writes
//     past their bound, a busy task left out of the last commit that has ended its job), it
//     commits, then switches the tasks whose processor has a new module.
//  5. It starts the due punctuations, and lets a waiting rebalance run (under exactly-once
//     only when no task worked since the last commit).
//
// A record a plugin emits to an output topic is partitioned by key with murmur2, as the Java
// client does (KeyPartition), and produced through its task's changelog.Task, so the next
// commit waits for it. The task queues what a plugin call writes and emits and hands it to the
// producer client when the call returns (after every batch, punctuation and init; under
// exactly-once a task with a coalescing store, or one that shares an input partition, keeps it
// until its commit: task.flush). An emit that finds the producer full waits for room, not
// charged to the call's time limit, until the producer's wait limit.
//
// # The order of a commit
//
// A commit first waits for the jobs that started less than about a commit interval ago
// (settleJobs), so that it leaves out only tasks that are really slow; those commit as soon as
// their job ends (owed). Under at-least-once (commit.go), for each task with uncommitted work
// that is not busy, in parallel:
//
//  1. the writes its coalescing stores hold go down to the changelog;
//  2. every changelog and output record it produced is acknowledged by the broker;
//  3. its write batch and its checkpoints apply in one atomic Pebble batch, and the
//     .checkpoint file is exported (changelog.Task.Commit);
//
// then the input offsets of the tasks that committed go to the group, each partition up to
// the first record that one of the tasks reading it has not committed (offsetFor), and the
// repartition records below them are purged in the background. A crash between the store and
// the offsets processes the records again: at least once.
//
// Under exactly-once (txn.go) the group consumer is the transactional producer and a commit
// is one Kafka transaction: each task's records are handed over and acknowledged (Prepare,
// steps 1-2), the transaction commits with the input offsets, and only then do the stores
// apply (Apply, step 3). A busy task's ended jobs commit with it and its store applies with a
// later commit. An aborted transaction revives the tasks that worked in it: they close
// without a commit and restore their last commit again. See the decision note
// 20261201_task_jobs.md.
//
// # The order of a restore
//
// An assigned partition stays paused until every task that reads it runs. For the tasks that
// wait (restorePending):
//
//  1. under exactly-once the open transaction commits first: a restore may outlast its
//     timeout;
//  2. each task opens its stores (or takes over its standby's open stores, memory stores
//     included), unless its previous run's records are still in flight here;
//  3. the restorer replays each logged store's changelog from the record after its
//     checkpoint to the end offset it listed, read_committed; each applied batch moves the
//     checkpoint with it, so a revocation or a loss can cancel the restore at any point and
//     the next owner, or the next round, resumes from there;
//  4. each task starts its plugin (its statehost_init sees the restored stores) and runs;
//     its partitions resume once all their tasks run.
//
// # The order of a rebalance
//
// The group uses cooperative rebalancing and blocks rebalances while a poll's records are
// being processed (kgo.BlockRebalanceOnPoll): a revocation meets only committed or
// committable tasks. The leader's balancer (balancer.go, assign.go) assigns whole tasks:
// active tasks go to members whose state is caught up (warm.go, meta.go), each member's sync
// assignment also names its standbys and warmups, and a member whose warmups caught up asks
// for the next rebalance. Then, on each member:
//
//  1. assigned partitions are paused and posted to the loop, which creates their tasks
//     (restoring) in its next round; the callback never waits for the table's lock, which a
//     restore holds;
//  2. revoked partitions, under at-least-once, stop a restore in progress, then the callback
//     takes the table's lock, commits the tasks that read them (reasonRevocation) and closes
//     them; under exactly-once the callback only posts the revocation, the open transaction
//     aborts, and the loop closes them at its next safe point;
//  3. lost partitions (a session timeout, a fencing) close their tasks without a commit: the
//     next owner restores what they logged. Under at-least-once, so do partitions revoked
//     after an offset commit found this member fenced (member_fenced: franz-go rejoins at
//     once, without a loss), and no offsets commit, until the new generation's assignment:
//     another member may have committed them further meanwhile.
//
// State of tasks this instance no longer holds is deleted after state_cleanup_delay.
//
// # Failures
//
// A plugin error or a failed commit stops the application: the jobs still running are
// stopped, the other tasks commit and close (under exactly-once the transaction aborts
// instead), the failed task closes without committing its last batch, and Run returns the
// error, which names the processor, the partition and the offset. Nothing is lost: the failed
// task's input is processed again from its last committed offset by the next run.
//
// A processor's on_error setting changes what a poison record does (the plugin fails on
// that record: an error, a trap, its time or memory limit): "skip" drops it and
// "dead_letter" sends it to <application_id>-<processor>-dlq, in both cases with its writes
// undone and its emits dropped, and the task goes on (poison.go).
//
// Broker outages: franz-go retries produces and fetches for as long as it takes; the calls
// the runtime cannot go on without (a restore's listings and fetches, a new transactional
// session) are retried with brokerRetry for up to brokerRetryLimit (runtime.go).
package runtime
