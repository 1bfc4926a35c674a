package runtime

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/statehost/statehost/restore"
)

// Event is a step of a Runtime's life: it started running, was assigned partitions, restored
// a store, ran a task, aborted a transaction, deployed a module. Options.OnEvent receives
// them, each next to the log line it corresponds to; unlike the log lines, whose text may
// change, an event's kind and fields are a contract. A field that a kind does not have is
// zero (and left out of the JSON).
//
// The JSON form, one object per event:
//
//	{"time":"2026-12-03T10:15:02.123456789Z","kind":"task_running","processor":"count","partition":2}
//
// partition is written for the task and restore kinds, offset and end_offset for
// restore_started, records for restore_done.
type Event struct {
	// Time is when it happened.
	Time time.Time `json:"time"`
	// Kind says what happened, and which fields are set.
	Kind EventKind `json:"kind"`
	// Processor and Partition name a task (the task kinds, the restore kinds), or Processor
	// the processor of a deploy.
	Processor string `json:"processor,omitempty"`
	Partition int32  `json:"-"`
	// Store is the store of a restore; Topic its changelog.
	Store string `json:"store,omitempty"`
	Topic string `json:"topic,omitempty"`
	// Standby is set on a restore of a standby task, which follows its changelog and has
	// no end (no restore_done).
	Standby bool `json:"standby,omitempty"`
	// FromVersion and ToVersion are the versions of the entries of the Store a migration
	// migrates, and of those it writes (migrate.go); Records is then the number of entries.
	FromVersion uint32 `json:"from_version,omitempty"`
	ToVersion   uint32 `json:"to_version,omitempty"`
	// Offset is the first changelog offset that a restore reads, EndOffset the changelog's
	// end when it began: it is done there.
	Offset    int64 `json:"-"`
	EndOffset int64 `json:"-"`
	// Records is the number of changelog records that a restore applied.
	Records int64 `json:"-"`
	// Partitions are the partitions, topic -> partitions, assigned, revoked or lost.
	Partitions map[string][]int32 `json:"partitions,omitempty"`
	// Tasks are the tasks ("count_0") of warmups_assigned.
	Tasks []string `json:"tasks,omitempty"`
	// Reason is why a transaction was committed when it aborted: "interval", "revocation",
	// "shutdown", ...; or why member_removed judged the member dead; or what asked for a
	// configuration reload: "watch" (the file changed), "signal" (SIGHUP), "api" (POST
	// /v1/reload, statehost reload).
	Reason string `json:"reason,omitempty"`
	// Error is the error of a transaction_aborted (empty when a rebalance aborted it), of a
	// module_refused, of a module_deployed whose tasks had not all switched when the deploy
	// stopped waiting, or of a stopped that a failure caused (empty for a requested stop).
	Error string `json:"error,omitempty"`
	// ProducerReset is set on a transaction_aborted after which the transactional producer
	// cannot go on (it was fenced, or the broker was away): every task closes and the
	// instance rejoins the group with a new producer.
	ProducerReset bool `json:"producer_reset,omitempty"`
	// TransactionalID is the transactional id of producer_ready.
	TransactionalID string `json:"transactional_id,omitempty"`
	// ModuleHash is the hex SHA-256 of the module of module_deployed.
	ModuleHash string `json:"module_hash,omitempty"`
	// Addr is the address (host:port) of admin_listening, or the admin address of the member
	// of member_removed and peer_stopping.
	Addr string `json:"addr,omitempty"`
	// Member is the group.instance.id of the member of member_removed and peer_stopping.
	Member string `json:"member,omitempty"`
	// File is the configuration file of config_reloaded and config_refused.
	File string `json:"file,omitempty"`
	// Changes are what config_reloaded applied, in words (config.Change); none when the file
	// changed nothing. Pending are the processors it added that wait for every instance of
	// the group to run them (processor_enabled follows).
	Changes []string `json:"changes,omitempty"`
	Pending []string `json:"pending,omitempty"`
	// Diagnostics are why config_refused refused the file, each with its file and line.
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// EventKind says what an Event reports. The values are stable: they are written to event
// files (statehost run --events).
type EventKind string

// The kinds of the events of a Runtime, in the order a run meets them.
const (
	// EventAdminListening: the admin listener accepts connections on Addr.
	EventAdminListening EventKind = "admin_listening"
	// EventRunning: the runtime joins its consumer group and runs (once per Run).
	EventRunning EventKind = "running"
	// EventProducerReady (exactly-once): a transactional producer with TransactionalID is
	// ready; again after each reset.
	EventProducerReady EventKind = "producer_ready"
	// EventPartitionsAssigned: the group assigned Partitions to this instance.
	EventPartitionsAssigned EventKind = "partitions_assigned"
	// EventWarmupsAssigned: Tasks restore here, as warmups, before they move here.
	EventWarmupsAssigned EventKind = "warmups_assigned"
	// EventRestoreStarted: the restore of the store partition Processor/Store/Partition
	// begins, from Offset to EndOffset of its changelog Topic.
	EventRestoreStarted EventKind = "restore_started"
	// EventRestoreDone: the restore of a store partition applied Records and is done.
	EventRestoreDone EventKind = "restore_done"
	// EventTaskRunning: the task Processor/Partition is restored and processes records.
	EventTaskRunning EventKind = "task_running"
	// EventTaskClosed: the task Processor/Partition is closed (revoked, lost, or the runtime
	// stops).
	EventTaskClosed EventKind = "task_closed"
	// EventPartitionsRevoked: Partitions were revoked from this instance; their tasks close.
	EventPartitionsRevoked EventKind = "partitions_revoked"
	// EventPartitionsLost: the group took Partitions away without a revocation (a session
	// timeout, a fencing); their tasks close without a commit.
	EventPartitionsLost EventKind = "partitions_lost"
	// EventMemberFenced (at-least-once): an offset commit failed with Error because the group
	// does not know this member in the commit's generation (it was removed, or its session
	// expired). The member rejoins, or loses its partitions; until its next assignment it
	// commits no offsets, and partitions that the new generation revokes close without a
	// commit, as lost ones do. Once per fencing.
	EventMemberFenced EventKind = "member_fenced"
	// EventTransactionAborted (exactly-once): the transaction of a commit for Reason aborted,
	// with Error, or because a rebalance took partitions (no Error); see ProducerReset.
	EventTransactionAborted EventKind = "transaction_aborted"
	// EventModuleDeployed: the module ModuleHash was deployed to Processor (statehost
	// deploy, or a changed module file); Error if its tasks had not all switched yet when
	// the deploy stopped waiting.
	EventModuleDeployed EventKind = "module_deployed"
	// EventModuleRefused: a module for Processor was refused with Error; the processor
	// runs on as it was.
	EventModuleRefused EventKind = "module_refused"
	// EventMigrationStarted: the task Processor/Partition migrates the Records entries of its
	// Store from FromVersion to ToVersion, the version of the module it is to run; it
	// processes nothing meanwhile.
	EventMigrationStarted EventKind = "migration_started"
	// EventMigrationDone: the task Processor/Partition migrated the Records entries of its
	// Store to ToVersion; the new entries and the version commit with its next commit, after
	// which it runs the module (task_running follows for a task that was starting).
	EventMigrationDone EventKind = "migration_done"
	// EventTaskWaitsForModule: the task Processor/Partition is restored, but its module
	// cannot read its stores (Error names the store and the versions: another instance's
	// deploy migrated them); it processes nothing until its processor gets a module here
	// that reads them (a deploy), and the instance runs on.
	EventTaskWaitsForModule EventKind = "task_waits_for_module"
	// EventStopped: Run has closed every task and the group consumer (a static member:
	// its tasks wait for it for the session timeout, see Run); Error is the failure
	// that stopped it, empty for a requested stop.
	EventStopped EventKind = "stopped"
	// EventMemberRemoved: this instance judged the instance Member (admin address Addr)
	// dead, for Reason, and removed it from the group (remove_dead_members): its tasks move
	// now.
	EventMemberRemoved EventKind = "member_removed"
	// EventPeerStopping: the instance Member (admin address Addr) said it stops on request;
	// it is not removed, and its tasks wait for it for the session timeout.
	EventPeerStopping EventKind = "peer_stopping"
	// EventConfigReloaded: the configuration File was reloaded (Reason says what asked for
	// it) and its Changes apply; Pending processors wait for the group.
	EventConfigReloaded EventKind = "config_reloaded"
	// EventConfigRefused: a reload of the configuration File was refused for its
	// Diagnostics (or Error); the running configuration stays.
	EventConfigRefused EventKind = "config_refused"
	// EventProcessorEnabled: the group runs Processor, which a reload added: every member
	// of the group has it now, and this instance creates its tasks.
	EventProcessorEnabled EventKind = "processor_enabled"
)

// emit hands e, stamped with the time, to Options.OnEvent. Its maps and slices are copies:
// the callee may keep them.
func (r *Runtime) emit(e Event) {
	if r.opts.OnEvent == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if e.Partitions != nil {
		tps := make(map[string][]int32, len(e.Partitions))
		for topic, ps := range e.Partitions {
			tps[topic] = slices.Clone(ps)
		}
		e.Partitions = tps
	}
	e.Tasks = slices.Clone(e.Tasks)
	e.Changes, e.Pending, e.Diagnostics = slices.Clone(e.Changes), slices.Clone(e.Pending), slices.Clone(e.Diagnostics)
	r.opts.OnEvent(e)
}

// partitionsEvent returns the event of the partitions tps, revoked or lost as what says.
func partitionsEvent(what string, tps map[string][]int32) Event {
	if what == "lost" {
		return Event{Kind: EventPartitionsLost, Partitions: tps}
	}
	return Event{Kind: EventPartitionsRevoked, Partitions: tps}
}

// errorText is err's text, "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// eventListener turns a restorer's start and end events into Events (its batches are
// progress, for the metrics and the progress bars, not events); standby is set for the
// standby tasks' restorer.
type eventListener struct {
	r       *Runtime
	standby bool
}

var _ restore.Listener = eventListener{}

func (l eventListener) OnRestoreStart(e restore.StartEvent) {
	l.r.emit(Event{Kind: EventRestoreStarted, Processor: e.Processor, Store: e.Store, Topic: e.Topic, Partition: e.Partition,
		Offset: e.StartOffset, EndOffset: e.EndOffset, Standby: l.standby})
}

func (l eventListener) OnBatchRestored(restore.BatchEvent) {}

func (l eventListener) OnRestoreEnd(e restore.EndEvent) {
	l.r.emit(Event{Kind: EventRestoreDone, Processor: e.Processor, Store: e.Store, Topic: e.Topic, Partition: e.Partition,
		Records: e.Records, Standby: l.standby})
}

// eventJSON is the JSON form of an Event: its numbers that are written only for some kinds
// (0 is a value there) are pointers.
type eventJSON struct {
	plainEvent
	Partition *int32 `json:"partition,omitempty"`
	Offset    *int64 `json:"offset,omitempty"`
	EndOffset *int64 `json:"end_offset,omitempty"`
	Records   *int64 `json:"records,omitempty"`
}

// plainEvent is an Event without its JSON methods.
type plainEvent Event

// MarshalJSON writes e as its doc comment shows.
func (e Event) MarshalJSON() ([]byte, error) {
	j := eventJSON{plainEvent: plainEvent(e)}
	switch e.Kind {
	case EventTaskRunning, EventTaskClosed, EventTaskWaitsForModule:
		j.Partition = &e.Partition
	case EventRestoreStarted:
		j.Partition, j.Offset, j.EndOffset = &e.Partition, &e.Offset, &e.EndOffset
	case EventRestoreDone, EventMigrationStarted, EventMigrationDone:
		j.Partition, j.Records = &e.Partition, &e.Records
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads an Event that MarshalJSON wrote.
func (e *Event) UnmarshalJSON(b []byte) error {
	var j eventJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Event(j.plainEvent)
	e.Partition, e.Offset, e.EndOffset, e.Records = deref(j.Partition), deref(j.Offset), deref(j.EndOffset), deref(j.Records)
	return nil
}

// deref is *p, or 0 for nil.
func deref[T int32 | int64](p *T) T {
	if p == nil {
		return 0
	}
	return *p
}
