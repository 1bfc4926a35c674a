package main

import (
	"testing"
)

// TestHostileGuestCounts runs the hostile guest on healthy records: it counts them.
func TestHostileGuestCounts(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	br := startBroker(t, brokerOptions{})
	createTopics(t, br.addr, map[string]int{"in": 2, "out": 2})
	app := &hostileApp{procs: []hostileProc{{name: "p", input: "in", output: "out"}}}
	cfg := app.write(t, dir, br.addr)
	produceKeyed(t, br.addr, "in", keyed{"a", "", 0}, keyed{"a", "x", 0}, keyed{"b", "", 1})
	p := startApp(t, bin, cfg, "app")
	waitCounts(t, br.addr, "out", map[string]string{"a": "2", "b": "1"})
	stopClean(t, p)
}
