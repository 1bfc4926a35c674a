// Package config loads and validates a statehost application's HCL configuration, and
// compares two of them for a reload of a running application (Diff: what applies live, and a
// diagnostic for everything else).
//
// Load (or Parse) decodes the file with hashicorp/hcl/v2 and checks it completely: every
// problem is an hcl.Diagnostic with the source range it is about (duplicates also say, in
// their detail, where the first definition is), and all of them are returned at once, sorted
// by position. WriteDiagnostics prints them with file, line and a source snippet, but no
// source line that may hold a secret (a password or key written in the file by mistake, the
// sasl block): secrets come from files or environment variables and are never printed.
//
// Relative paths (state_dir, module, embedded_broker.data_dir, and the files of kafka.tls and
// kafka.sasl) are relative to the directory of the configuration file, not to the working
// directory; Config holds them absolute.
// Unknown attributes and blocks are errors.
//
// # Format
//
//	application_id       = "wordcount"      # required; [a-zA-Z0-9._-], 1 to 200 characters:
//	                                        # it prefixes topic names and is the consumer group id
//	state_dir            = "state"          # default "state"; a directory, or one that can be
//	                                        # made (no file in its place or on its path)
//	processing_guarantee = "at_least_once"  # default "at_least_once", or "exactly_once"
//	commit_interval      = "1s"             # a Go duration (time.ParseDuration), > 0; default "30s",
//	                                        # "100ms" with exactly_once
//	session_timeout      = "10s"            # default "10s": how long the consumer group waits for
//	                                        # an instance that stopped heartbeating (a killed
//	                                        # process) before its tasks move; whole milliseconds,
//	                                        # from 100ms (the Kafka client's least) to 2^31-1 ms;
//	                                        # run checks it against the broker's
//	                                        # group.min/max.session.timeout.ms (6s to 30m on
//	                                        # Kafka by default, 100ms to 5m on the embedded broker)
//	state_memory         = "256MiB"         # default "256MiB", 8MiB to 1024GiB: the memory of the
//	                                        # instance's state, however many tasks it holds
//	                                        # (Pebble's block cache and memtables, the read caches
//	                                        # and key filters, cold restores' sort buffers)
//	memory_limit         = "512MiB"         # default none (or the GOMEMLIMIT environment
//	                                        # variable's): the process's soft memory limit (Go's
//	                                        # GOMEMLIMIT; what -Xmx is to a JVM, without its out-of-
//	                                        # memory error): the garbage collector works harder near
//	                                        # it rather than let the heap grow to twice what it
//	                                        # holds; at least state_memory + 64MiB; when set,
//	                                        # it overrides GOMEMLIMIT
//
//	standby_replicas           = 1          # default 0, >= 0: how many standby copies of each task
//	                                        # other instances keep, restoring its stores from the
//	                                        # changelog (num.standby.replicas)
//	acceptable_recovery_lag    = 10000      # default 10000, >= 0: the most changelog records an
//	                                        # instance may be behind on a task's stores to be given
//	                                        # the task as active (acceptable.recovery.lag)
//	state_cleanup_delay        = "10m"      # default "10m", > 0, whole milliseconds: how long the
//	                                        # local state of a task the instance no longer owns is
//	                                        # kept (warm state for assignment) before it is deleted
//	                                        # (state.cleanup.delay.ms)
//	probing_rebalance_interval = "10m"      # default "10m", > 0, whole milliseconds: how often an
//	                                        # instance that keeps warmup copies of tasks asks for a
//	                                        # rebalance to check whether they caught up
//	                                        # (probing.rebalance.interval.ms)
//	remove_dead_members        = true       # default true: each instance watches the others'
//	                                        # admin listeners and removes a dead one from the
//	                                        # group (RemoveMembersFromConsumerGroup), so that its
//	                                        # tasks move within about a second, not after
//	                                        # session_timeout; see below
//
//	kafka {                                 # optional; its settings apply to every client the
//	                                        # process makes (group consumer, producers, admin,
//	                                        # restore and standby clients) and to the commands
//	                                        # that talk to Kafka (--config)
//	  brokers = ["127.0.0.1:9092"]          # "host:port" each; omitted or empty: an embedded
//	                                        # broker runs in-process (no tls, sasl, nor a
//	                                        # replication_factor above 1 then)
//	  client_id          = "wordcount"      # client.id prefix: <client_id>-consumer, -producer,
//	                                        # -restore, -standby; default the application_id
//	  rack               = "eu-west-1a"     # client.rack (fetch from a follower of the same
//	                                        # rack, with the brokers' replica.selector.class);
//	                                        # default none
//	  compression        = "zstd"           # compression.type of produced batches (changelogs,
//	                                        # outputs, repartitions, dead letters): "none" (the
//	                                        # default, as Kafka's), "gzip", "snappy", "lz4", "zstd"
//	  linger             = "5ms"            # linger.ms; default "5ms" (Kafka 4's); whole ms, >= 0
//	  batch_size         = "1MiB"           # batch.size, the most bytes of one produced batch;
//	                                        # default "1MiB" (Kafka's 16KiB); 1KiB to 1GiB
//	  fetch_max_bytes    = "50MiB"          # fetch.max.bytes of the group consumer; default "50MiB"
//	                                        # (Kafka's); the restore and standby clients take at
//	                                        # most 4MiB of it; 64KiB to 1GiB
//	  request_timeout    = "10s"            # request.timeout.ms: how long a request waits for its
//	                                        # answer beyond what it asks of the broker (a fetch's
//	                                        # wait); default "10s" (Kafka's 30s); whole ms, > 0
//	  replication_factor = 3                # replication.factor of the topics statehost creates
//	                                        # (changelogs, repartitions, dead letters, outputs,
//	                                        # topic blocks); default the broker's
//	                                        # default.replication.factor; run refuses one above
//	                                        # the cluster's broker count
//	  tls {                                 # optional: TLS to every broker (SSL, SASL_SSL)
//	    ca_file     = "ca.pem"              # PEM CA certificates (ssl.truststore); default the
//	                                        # system's roots
//	    cert_file   = "client.pem"          # client certificate and key (PEM) for mutual TLS
//	    key_file    = "client.key"          # (ssl.keystore); both or neither
//	    server_name = "kafka.internal"      # the name the brokers' certificates must hold;
//	                                        # default each broker's host
//	    insecure_skip_verify = false        # true accepts any certificate (tests only; warned)
//	  }
//	  sasl {                                # optional: SASL authentication (sasl.mechanism)
//	    mechanism     = "SCRAM-SHA-512"     # "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512" or
//	                                        # "OAUTHBEARER"; PLAIN without tls is warned about
//	    username      = "wordcount"         # PLAIN and SCRAM
//	    password_file = "/run/secrets/kp"   # PLAIN and SCRAM: the password, from a file (a final
//	    password_env  = "KAFKA_PASSWORD"    # newline dropped) or an environment variable, one
//	                                        # of them; never in this file, never printed
//	    token_file    = "/run/secrets/tok"  # OAUTHBEARER: the token, read again at each new
//	  }                                     # connection (so a renewed token is picked up)
//	}
//
//	embedded_broker {                       # optional; used only when kafka.brokers is empty
//	  listen   = "127.0.0.1:9092"           # default "127.0.0.1:9092"; not admin.listen's address
//	  data_dir = "state/broker"             # default <state_dir>/broker; a directory, or one
//	                                        # that can be made
//	  sync_writes = false                   # default false: fsync every produced batch (and
//	}                                       # group and producer state) before acknowledging
//	                                        # it, as statehost broker --sync-writes. Without it
//	                                        # a killed process loses nothing acknowledged, a
//	                                        # crash of the machine may lose the last writes
//
//	admin {                                 # optional
//	  listen    = "127.0.0.1:9464"          # default "127.0.0.1:9464"; "" disables it; an address
//	                                        # that is not loopback (127.0.0.0/8, ::1, localhost;
//	                                        # ":9464" and 0.0.0.0 are not) needs a token; not the
//	                                        # address of the embedded broker, nor of a broker of
//	                                        # kafka.brokers on a loopback address
//	  advertise = "statehost-1:9464"        # optional: where other instances reach it (the
//	                                        # redirects of interactive queries); default the
//	                                        # listen address (the host name for 0.0.0.0)
//	  token     = "..."                     # optional, no default: every request must carry
//	                                        # "Authorization: Bearer <token>" (else 401);
//	                                        # printable ASCII without spaces. The environment
//	                                        # variable STATEHOST_ADMIN_TOKEN, when set and not
//	                                        # empty, is the token instead
//	  metrics_public = false                # default false; true: GET /metrics answers
//	}                                       # without the token
//
//	topic "sentences" {                     # any number; created at start when missing
//	  partitions = 4                        # required, from 1 to 2147483647
//	  config     = { "retention.ms" = "-1" } # optional topic configs, string to string
//	}
//
//	repartition "words" {                   # any number; the internal topic
//	  partitions = 4                        # <application_id>-words-repartition; required, >= 1
//	}
//
//	processor "count" {                     # any number; name [a-zA-Z0-9._-], not starting
//	                                        # with '.' (task directories are <name>_<partition>)
//	  module  = "plugins/count/count.wasm"  # required; an existing, readable .wasm file
//	  inputs  = ["words"]                   # required, not empty, no duplicates
//	  outputs = ["word-counts"]             # optional, no duplicates, none of the inputs, no
//	                                        # changelog topic of the application
//	  on_error = "fail"                     # default "fail": what happens to a record the plugin
//	                                        # fails on. "fail": the application stops with an
//	                                        # error naming topic, partition and offset; "skip":
//	                                        # the record's writes and emits are undone, it is
//	                                        # counted and logged; "dead_letter": as skip, and the
//	                                        # record goes to <application_id>-<processor>-dlq
//	  emit_budget = "64MiB"                 # default "64MiB", > 0: the most bytes (keys, values,
//	                                        # headers) the plugin may emit for one record; the
//	                                        # emit past it fails and the record is poison (units
//	                                        # B, KiB, MiB, GiB; the record's emits are held in
//	                                        # memory until it is done)
//
//	  store "counts" {                      # any number; names unique in the application
//	    type     = "keyvalue"               # default "keyvalue", or "window" or "session" (below)
//	    backend  = "pebble"                 # default "pebble", or "memory"
//	    coalesce = false                    # default false; true only for keyvalue stores
//	    ttl       = "7d"                    # keyvalue stores only; default none: entries never
//	                                        # expire. An entry expires this long after its last
//	                                        # write; > 0, whole milliseconds, Go's units after
//	                                        # an optional whole number of days: "7d", "1d12h", "90m"
//	    ttl_clock = "stream_time"           # default "stream_time", or "wall_clock": what ttl
//	                                        # counts in (below); only with ttl
//	    logging {                           # optional
//	      enabled      = true               # default true: changelog <application_id>-<store>-changelog
//	      topic_config = { "min.compaction.lag.ms" = "0" } # optional changelog topic configs
//	    }
//	  }
//
//	  store "per-minute" {                  # a window store: values per key and time window
//	    type        = "window"
//	    window_size = "1m"                  # required, > 0: the length of a window
//	    advance     = "30s"                 # default window_size (tumbling windows); > 0 and
//	                                        # <= window_size: the hop of hopping windows (the
//	                                        # store does not use it, plugins read it)
//	    grace       = "10s"                 # default "0s", >= 0: how long after its end a window
//	                                        # still accepts out-of-order records
//	    retention   = "2h"                  # default the larger of 24h and window_size + grace; at least: how
//	                                        # long (in stream time) the store keeps a window
//	    changelog_additional_retention = "24h" # default "24h", >= 0: the changelog topic keeps
//	                                        # records for retention + this (its retention.ms)
//	  }
//
//	  store "sessions" {                    # a session store: values per key and session
//	    type           = "session"
//	    inactivity_gap = "5m"               # required, > 0: a session ends after this long
//	                                        # without a record of its key
//	    grace          = "1m"               # default "0s", >= 0, as for a window store
//	    retention      = "2h"               # default the larger of 24h and inactivity_gap + grace; at least
//	    changelog_additional_retention = "24h" # default "24h", >= 0, as for a window store
//	  }
//	}
//
// standby_replicas, acceptable_recovery_lag, state_cleanup_delay and
// probing_rebalance_interval matter when several instances run the application; the names in
// parentheses are the Kafka Streams settings they stand for.
//
// remove_dead_members needs each instance's admin listener on an address the others reach
// (admin.advertise) and one admin token for all. An instance keeps a watch open on each other
// instance's listener; when a watch breaks without the goodbye that a requested stop sends,
// and the listener then refuses three connections in a row over 200ms, the instance is dead
// and is removed from the group by its group.instance.id. A timeout never counts: on a slow
// or cut network the session timeout decides, as without the setting. A stopped instance
// (SIGTERM, a rolling restart) says goodbye: its tasks wait session_timeout for it to come
// back, as a static member's do. A wrong removal is safe: the live instance is fenced, commits
// nothing of the generation it lost, and joins again. admin.advertise must be the instance's
// own address (a pod IP, not a Kubernetes Service or load balancer, which refuse connections
// while the instance may live), and a firewall between instances must drop, not reject.
//
// A poison record is one the plugin fails on while it is the current record: the guest
// returns an error, traps, panics, exits, or runs out of memory or past its time limit (a
// failing store, producer or punctuation, or a stop, is not the record's fault: it always
// fails). With "skip" and "dead_letter" the task undoes the record's writes (it writes back
// what they overwrote, which the changelog records too) and drops its emits, starts a new
// plugin instance, and goes on with the next record; the record's offset is committed with
// the others. A record that ran out of time or memory is first tried again alone on a new
// instance, and is poison only if it fails again. The dead-letter topic is created when missing with the processor's partition
// count (a topic block may declare it, for its configs); a record goes to the partition of
// its source (modulo the topic's partition count), with its key, value, timestamp and
// headers, plus the headers statehost.error, statehost.processor, statehost.topic,
// statehost.partition and statehost.offset; one that would not fit the topic has its value
// cut, and the header statehost.truncated holds the value's original length. A store write or
// emit whose Kafka record would not fit its topic is refused at the call (CodeLimit): a plugin
// that fails then makes the record poison. The emit that passes emit_budget is refused too,
// and fails the record whatever the plugin does (reason "emit_budget").
//
// All the instances of an application share one admin token: a redirected interactive query
// carries it to the instance that answers. The token is compared in constant time.
//
// Window and session stores take a backend and a logging block like keyvalue stores. Their
// durations are Go durations like commit_interval. window_size and advance apply only to
// window stores, inactivity_gap only to session stores, and grace, retention and
// changelog_additional_retention to both: setting one on a store of another type is an error.
//
// A keyvalue store with a ttl hides its expired entries from the plugin (get, range, prefix)
// and from interactive queries, and deletes them in the background, a bounded number of entries
// at a time between the task's batches, with tombstones in its changelog (in the task's
// transaction under exactly_once). An entry's write time is the clock's time at its last put:
// with "stream_time", the task's stream time (the largest record timestamp it has seen; 0 for
// a put before its first record, a plugin's init on a new task, which the first records then
// expire); with "wall_clock", the machine's time. It travels in the changelog records'
// timestamps, so restores and standbys know it. "stream_time" is the default because it is
// deterministic: the same records give the same state however late, how fast or how often
// they are processed (a replay, a backlog after an outage, a test), as window retention does;
// but an entry expires only as newer records arrive on its partition. "wall_clock" expires
// entries on time while no records arrive (sessions, caches), and makes a backlog's entries
// live from when they are processed. Adding a ttl to a store that holds data, or removing it,
// rebuilds its local state from its changelog, whose records' timestamps become the existing
// entries' write times (their produce times, for records written before the ttl); an
// unlogged store is rewritten in place, its entries written now. Changing the ttl or its clock
// keeps the write times. See docs/decisions/20261205_store_ttl.md.
//
// The processors must not form a cycle: no processor may read, through other processors, what
// it writes (its outputs, and its dead-letter topic), whatever the topics are (topic blocks,
// repartition topics, topics only on the broker). A record that goes round would be processed
// without end unless a plugin stops emitting for it, which the host cannot know; a feedback
// loop that is meant to be one belongs in a second application. The error names the path of
// one cycle and is on the output of its first processor.
//
// Load also checks the configuration against the machine it runs on, as run will meet it:
// state_dir, <state_dir>/<application_id> and, when the embedded broker runs, its data_dir
// must be directories or be creatable as such; each module file must be readable; and the
// admin listener must not want the port of an address the embedded broker's listener (or a
// broker of kafka.brokers on a loopback address) wants. Port 0 clashes with nothing.
//
// Names of topics, repartitions and stores follow Kafka's rules for topic names
// ([a-zA-Z0-9._-], at most 249 characters, not "." or ".."), and so do the topics they make.
// An input or output that names a repartition block by its short name means the
// repartition's full topic name; a repartition therefore must not share its name with a topic
// block. A topic block must not declare a repartition or changelog topic of the application.
// Map values given as numbers or bools are taken in their string form.
package config
