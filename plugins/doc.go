// Package plugins holds the example statehost plugins, one per directory: tokenize and
// count (the two halves of the word-count demo), countjson (count's processor over a store of
// version 2, JSON counts, migrated from count's decimal ones), leaderboard (two stores and
// range scans),
// count_c (count written in C from package abi's documentation), windowcount (counts per
// key in tumbling or hopping windows of a window store, emitted once per window when it
// closes, from a stream-time punctuation), sessionize (per-user sessions in a session
// store, merged by inactivity gap and emitted once each when final), and count_as and
// windowcount_as (count and windowcount in AssemblyScript, with pluginsdk/assemblyscript).
//
// Build every plugin to plugins/<name>/<name>.wasm with, from the repository root:
//
//	go run ./plugins/build
//
// Go plugins are built with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared; the C
// plugin with clang (see pluginsdk/wasmbuild), or, without clang, copied from its checked-in
// build under testdata/. Each Go plugin has native unit tests: go test ./plugins/... . The
// AssemblyScript plugins are npm projects, built with statehost build plugins/<name> (npm ci,
// then asc; Node.js 20 or newer), and tested in the engine and end to end against their Go
// twins (host/engine, cmd/statehost).
package plugins
