// Package testdriver runs an application's processors on records read from JSON lines,
// without Kafka, and reports what they produced and what their stores hold: the test driver
// of plugins in any guest language (`statehost test`), as Kafka Streams' TopologyTestDriver
// is for topologies.
//
// The plugins run in the real engine (host/engine: the same host functions, size limits,
// emit budget, time and memory limits, instance pools and errors as in a run), against
// memory stores stacked by the store package (window and session stores with their grace
// and retention against the task's stream time), whatever backend the configuration names;
// no changelog is written.
//
//	d, err := testdriver.New(ctx, testdriver.Options{Config: cfg})
//	ins, err := testdriver.ReadInputs(file, "input.jsonl")
//	for _, in := range ins { err = d.Pipe(ctx, in) }
//	outs, stores := d.Outputs(), d.Stores()
//
// # Records, partitions and tasks
//
// There is a task for each processor and partition of its inputs, started (statehost_init)
// when the driver starts, as when a run's tasks are assigned. A record goes to the partition
// the runtime's producer gives it (runtime.KeyPartition: murmur2 of the key, as Kafka's
// default partitioner; an input line may name a partition instead, and an input without a
// key goes to partition 0, an emitted one to its task's), so that each store partition holds
// what it would in a run. The offsets of a topic partition count from 0, in the order its
// records are produced. The plugin gets one record per call, so a failure is always the
// record's. Each input line is processed to the end before the next one: the record by
// every processor that reads its topic (in the configuration's order), then what they
// emitted by the processors that read that, in the order it was emitted, and so on. The
// tasks' stores are committed after each line.
//
// A topic's partition count is its topic or repartition block's; a topic a processor reads
// without one has Options.Partitions partitions; a topic that is only written has its
// writer's count, as the runtime creates it.
//
// # Time
//
// Each task's stream time is the largest timestamp of the records it has taken, as in a
// run. Stream-time punctuations run after each record, when due. The wall clock starts at
// Options.WallClock and moves only when the input says so ({"advance_wall_clock":"10s"});
// each move runs the wall-clock punctuations then due, once each (like a run after a pause,
// a punctuation does not catch up on the intervals it missed: move the clock in steps to
// see each). A record without a timestamp gets the wall clock's time.
//
// # Errors
//
// A plugin that fails on a record is handled as the processor's on_error says, as the runtime
// does (host/runtime/poison.go): "fail" stops the run with the plugin's error, prefixed by the
// position of the input line ("input.jsonl:7: engine: processor \"count\" partition 0 offset
// 6 ..."); "skip" and "dead_letter" undo the record's writes and drop its emits, "dead_letter"
// also produces it to <application_id>-<processor>-dlq with the runtime's statehost.* headers
// (Poisoned lists them). A failed init or punctuation always stops the run.
//
// # Formats
//
// Every file is JSON lines: one JSON object a line; blank lines and lines that start with '#'
// are skipped. Bytes (keys, values, header values) are a JSON string when they are valid
// UTF-8, else base64 (standard, padded) under the field's name with "_base64": "key" or
// "key_base64", "value" or "value_base64", as the admin API's range answers encode them. A
// null or absent field is null; "" is empty bytes. Timestamps are Unix milliseconds (an
// input may also give an RFC 3339 string).
//
// An input line (ReadInputs) is a record:
//
//	{"topic":"words","key":"the","value":"1","timestamp":1000,"headers":[{"key":"h","value":"v"}]}
//	{"topic":"words","key_base64":"AP8=","value":null,"partition":2}
//
// "topic" may be left out when the processors read one topic that none of them writes;
// "partition" and "timestamp" are optional (above). Or a line moves the wall clock by a Go
// duration:
//
//	{"advance_wall_clock":"10s"}
//
// An output line (Output.AppendJSON, ReadOutputs) is a record a processor produced, in the
// order produced, with its topic's partition; headers only when it has some:
//
//	{"topic":"word-counts","partition":1,"key":"the","value":"2","timestamp":1000}
//
// A store line (StoreEntry.AppendJSON, ReadStoreEntries) is an entry of a store partition at
// the end, by store (in the configuration's order), partition, key, then start and end; a
// window or session store's entries have the window's start and end (exclusive) or the
// session's (both inclusive):
//
//	{"store":"counts","partition":0,"key":"the","value":"2"}
//	{"store":"windows","partition":0,"key":"a","start":60000,"end":120000,"value":"3"}
//
// Diff compares expected lines with actual ones, as a unified diff.
package testdriver
