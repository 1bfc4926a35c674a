// Command statehost runs stateful stream processors compiled to WebAssembly over Kafka.
//
// Usage:
//
//	statehost [--log-level LEVEL] [--log-json] COMMAND [flags] [arguments]
//
// The commands:
//
//	statehost run [--config FILE] [--progress auto|log|off] [--progress-interval DURATION] [--events FILE]
//	    Run the processors described by a configuration file until SIGINT or SIGTERM.
//	    --events FILE appends the run's lifecycle events to FILE as JSON lines (see Events).
//	statehost validate [--config FILE]
//	    Check a configuration file and its plugins without running anything.
//	statehost deploy [--config FILE] --processor NAME FILE.wasm
//	    Deploy FILE.wasm as the module of the processor NAME of the running application,
//	    through the admin API of the configuration (admin.listen), and print the version it
//	    runs now; each running task switches at its next commit. On failure the processor
//	    runs on as it was, and deploy prints the application's error and exits 1.
//	statehost inspect [--config FILE] [--json] [--timeout DURATION]
//	    Print, without running the application, the stores of the configuration, the task
//	    directories of its state directory with their checkpoints, and each changelog
//	    partition's start and end offsets on the brokers with the lag of the local checkpoint
//	    behind the end: the records a restore would read. --json prints the same as one JSON
//	    object.
//	statehost state export --config FILE --store STORE [--partition N] [--from auto|local|changelog]
//	    Print a store's entries as JSON lines (statehost test's stores lines), from the local
//	    state where its checkpoints are current, else restored from the changelog.
//	statehost state import --config FILE --store STORE [--force] [--repartition] FILE
//	    Write such a file into an application's store, its changelog and local state, as a
//	    run writes; refused while the application runs, or over data without --force.
//	statehost broker --data-dir DIR [--listen ADDR] [--sync-writes] [--events FILE]
//	    Run the embedded Kafka-protocol broker (default address 127.0.0.1:9092), its state
//	    kept in DIR, until SIGINT or SIGTERM. It logs "broker listening" once it accepts
//	    connections (and with --events appends a broker_listening event to FILE). Topics are
//	    never created on first use.
//	statehost produce [--brokers ADDRS] [--config FILE] [--key-separator SEP] TOPIC
//	    Write each line of standard input to TOPIC as one record (the part before SEP is
//	    the key) and wait for every acknowledgement. Keyed records go to the partition of
//	    their key's murmur2 hash, like the Java client's. The topic must exist. With
//	    --config, the kafka block of FILE gives the brokers (unless --brokers is set) and
//	    the client settings: TLS, SASL, client_id, and for produce compression, linger and
//	    batch_size; consume takes it too.
//	statehost consume [--brokers ADDRS] [--config FILE] [--from-beginning=false] [--follow] [--separator SEP] [--read-committed] TOPIC
//	    Print the records of TOPIC as KEY<SEP>VALUE lines (SEP is a tab by default; a null
//	    key prints as nothing, a null value as <null>). Without --follow, print what the
//	    topic held at the start and exit; with --follow, go on until SIGINT or SIGTERM.
//	statehost build DIR [-o FILE] [-I INCLUDE]...
//	    Build the Go plugin package, or the C guest DIR/<base of DIR>.c, in DIR to a
//	    WebAssembly module, by default DIR/<base of DIR>.wasm.
//	statehost help [COMMAND]
//	    Print the usage, or the flags of one command.
//
// The commands that call the admin API (deploy, query, status) send the configuration's
// admin token (admin.token, or the STATEHOST_ADMIN_TOKEN environment variable) when it has one.
//
// # Events
//
// run --events FILE appends an event to FILE for each step of the run's life, one JSON
// object a line, written as the step's log line is logged:
//
//	{"time":"2026-12-03T10:15:02.1Z","kind":"admin_listening","addr":"127.0.0.1:8080"}
//	{"time":"2026-12-03T10:15:02.3Z","kind":"running"}
//	{"time":"2026-12-03T10:15:05.4Z","kind":"partitions_assigned","partitions":{"sentences":[0,1]}}
//	{"time":"2026-12-03T10:15:05.6Z","kind":"task_running","processor":"count","partition":0}
//	{"time":"2026-12-03T10:16:40.0Z","kind":"stopped"}
//	{"time":"2026-12-03T10:16:40.1Z","kind":"exited"}
//
// The kinds are those of runtime.EventKind, and exited, which run writes last, with the
// error that ended it ("error"), if any; the README lists each kind's fields. The kinds and
// fields are kept stable; the log lines' text is free to change. Tools and tests that follow
// a run read this file, not the logs.
//
// # Restore progress
//
// While run restores stores (at start, or after a rebalance gave it tasks), it shows their
// progress. When standard error is a terminal (and TERM is not dumb) and the logs are text,
// each store partition whose restore lasts over 250ms gets a bar, removed when it ends:
//
//	count/counts p0  [=============>-----------------]  110.4k of 300.0k  36%  184.8k/s  eta 1s
//
// processor/store and partition, the changelog offsets read of the restore's total (offsets
// of transaction markers and compacted records count as read), the rate since the restore
// began, and the time left at that rate. The log lines print above the bars, at their next
// frame (150ms); between restores the logs go to the terminal directly. Otherwise (standard
// error is a file or a pipe, --log-json, or --progress log) each restore that has run
// --progress-interval (default 5s) logs a line that often:
//
//	[INFO]  statehost.restore: restore progress: processor=count store=counts partition=0 offset=110399 restored=110400 total=300000 percent=36 rate=184812 eta=1s topic=wordcount-counts-changelog
//
// offset is the last offset applied (the store's checkpoint), rate in records per second.
// The "restore started" and "restore done" lines are logged in every mode, --progress off
// included. Standby tasks never end their restore and show no progress.
//
// # Inspect
//
// inspect reads the configuration, the state directory <state_dir>/<application_id> and the
// brokers, never the application itself, so it works while the application runs, here or
// elsewhere:
//
//	Application wordcount (at_least_once), configuration /srv/wc/app.hcl
//	State directory /srv/wc/state/wordcount: not in use; checkpoints from its database
//	Brokers kafka-1:9092
//
//	PROCESSOR  STORE   TYPE      BACKEND  LOGGING  CHANGELOG
//	count      counts  keyvalue  pebble   on       wordcount-counts-changelog
//
//	TASK        DIRECTORY         CHECKPOINT FILE  DATABASE
//	count_0     tasks/count_0     counts@99        counts@99
//	count_1     tasks/count_1     counts@41        counts@41
//	tokenize_0  tasks/tokenize_0  none             no state
//
//	CHANGELOG                   PARTITION  START  END  CHECKPOINT  LAG
//	wordcount-counts-changelog  0          0      125  99          25
//	wordcount-counts-changelog  1          0      42   41          0
//
// The checkpoint of a store partition is the offset of the last changelog record its local
// copy applied; the lag is the records a restore would read now, from the checkpoint, or
// from the log start without one (or with one at or past the end, or before the log start,
// which a restore would not trust: the NOTE column says so). Under exactly_once the marker
// that ends a changelog partition is not counted.
//
// When no process holds the state directory, inspect reads the checkpoints from the
// instance's Pebble database (the authority) and the .checkpoint files; it holds the
// directory's lock while it reads, so a run started on the same directory at that very
// moment refuses to start. When a running instance holds it (the LOCK flock; Pebble could not
// be opened beside it anyway), inspect says so and reads the .checkpoint files, which the
// instance rewrites at every commit. The brokers are kafka.brokers, or the embedded broker's
// listen address, which answers only while a run serves it: when no broker answers, inspect
// says why and prints the local part with unknown end offsets and lag. inspect exits 0 when
// it printed what it could read (an unreachable broker or a locked directory included), and 1
// on a configuration problem (printed as validate prints it) or local state that exists but
// cannot be read (each problem names its file).
//
// --brokers defaults to 127.0.0.1:9092. The global flags --log-level (trace, debug, info,
// warn or error; default info) and --log-json may come before or after the command; logs go
// to standard error. Every command takes flags before or after its arguments, with one dash
// or two. Exit codes: 0 done, 1 failed, 2 wrong command line.
package main
