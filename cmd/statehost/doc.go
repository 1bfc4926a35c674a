// Command statehost runs stateful stream processors compiled to WebAssembly over Kafka.
//
// Usage:
//
//	statehost [--log-level LEVEL] [--log-json] COMMAND [flags] [arguments]
//
// The commands:
//
//	statehost run [--config FILE]
//	    Run the processors described by a configuration file until SIGINT or SIGTERM.
//	statehost validate [--config FILE]
//	    Check a configuration file and its plugins without running anything.
//	statehost deploy [--config FILE] --processor NAME FILE.wasm
//	    Deploy FILE.wasm as the module of the processor NAME of the running application,
//	    through the admin API of the configuration (admin.listen), and print the version it
//	    runs now; each running task switches at its next commit. On failure the processor
//	    runs on as it was, and deploy prints the application's error and exits 1.
//	statehost broker --data-dir DIR [--listen ADDR] [--sync-writes]
//	    Run the embedded Kafka-protocol broker (default address 127.0.0.1:9092), its state
//	    kept in DIR, until SIGINT or SIGTERM. It logs "broker listening" once it accepts
//	    connections. Topics are never created on first use.
//	statehost produce [--brokers ADDRS] [--key-separator SEP] TOPIC
//	    Write each line of standard input to TOPIC as one record (the part before SEP is
//	    the key) and wait for every acknowledgement. Keyed records go to the partition of
//	    their key's murmur2 hash, like the Java client's. The topic must exist.
//	statehost consume [--brokers ADDRS] [--from-beginning=false] [--follow] [--separator SEP] [--read-committed] TOPIC
//	    Print the records of TOPIC as KEY<SEP>VALUE lines (SEP is a tab by default; a null
//	    key prints as nothing, a null value as <null>). Without --follow, print what the
//	    topic held at the start and exit; with --follow, go on until SIGINT or SIGTERM.
//	statehost build DIR [-o FILE] [-I INCLUDE]...
//	    Build the Go plugin package, or the C guest DIR/<base of DIR>.c, in DIR to a
//	    WebAssembly module, by default DIR/<base of DIR>.wasm.
//	statehost help [COMMAND]
//	    Print the usage, or the flags of one command.
//
// --brokers defaults to 127.0.0.1:9092. The global flags --log-level (trace, debug, info,
// warn or error; default info) and --log-json may come before or after the command; logs go
// to standard error. Every command takes flags before or after its arguments, with one dash
// or two. Exit codes: 0 done, 1 failed, 2 wrong command line.
package main
