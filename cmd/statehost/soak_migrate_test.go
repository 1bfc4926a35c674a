package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The soak's migrating deploy (the fault "migrate"): it deploys countjson, in its reversible
// variant (plugins/countjson/testdata/reversible, the store counts at version 2 as JSON
// {"n":5}), to every instance with statehost deploy, and the next "migrate" fault rolls every
// instance back with statehost rollback (the stores migrate back to count's decimal form), so
// that the two alternate. While countjson runs:
//   - the module file holds countjson, so that an instance SIGKILLed and started again runs
//     it over its version-2 stores (count's file over them would be refused at the start);
//   - the reloads of count ("deploy", "file") wait in the deck: count or countv2 over version-2
//     stores would be refused;
//   - an instance started again since the deploy runs its module file and has no module to
//     roll back to: the rollback stops it (SIGTERM; its tasks move to the others), rolls the
//     others back, writes count's file back, and starts it again over the decimal changelog;
//   - so a SIGKILL spares the last instance that can roll back (another one is killed), and on
//     a single instance waits in the deck too.

// soakReversible is where soakModules builds the reversible countjson.
const soakReversible = "countjson-reversible.wasm"

// soakEligible reports whether a fault of kind can come now (soak.faultLoop draws the first
// card of the deck that can).
func (s *soak) soakEligible(kind string) bool {
	if !s.jsonRuns {
		return true
	}
	switch kind {
	case "deploy", "file":
		return false
	case "kill":
		return len(s.ins) > 1
	}
	return true
}

// killTarget returns the instance that the fault "kill" with pick kills: while countjson
// runs, not the last one that can roll back.
func (s *soak) killTarget(pick int64) *soakInstance {
	n := int(uint64(pick) % uint64(len(s.ins)))
	if s.jsonRuns && s.ins[n].canRollback {
		others := 0
		for _, in := range s.ins {
			if in.canRollback && in != s.ins[n] {
				others++
			}
		}
		if others == 0 {
			n = (n + 1) % len(s.ins)
		}
	}
	return s.ins[n]
}

// migrate deploys the reversible countjson to every instance, or rolls every instance back
// from it, and waits until every instance runs it (or count again) on every running task.
func (s *soak) migrate() string {
	t := s.t
	if !s.jsonRuns {
		file := s.reversible
		for _, in := range s.ins {
			code, out := soakCLI(t.Context(), s.bin, "deploy", "--config", in.cli, "--processor", "count", file)
			if code != 0 || !strings.Contains(out, "processor count: switched") {
				t.Errorf("statehost deploy of countjson (reversible) to %s: exit %d: %s", in.proc.name, code, out)
			}
			in.canRollback = true
		}
		soakCopy(t, file, s.mods["count"])
		s.jsonRuns = true
		return s.awaitModule(file, "countjson (reversible, store counts to version 2), statehost deploy to every instance")
	}
	var stopped []*soakInstance
	for _, in := range s.ins {
		if !in.canRollback {
			if code := in.proc.stop(t, syscall.SIGTERM); code != 0 {
				t.Errorf("%s exited %d after SIGTERM, want 0", in.proc.name, code)
			}
			in.down = true
			stopped = append(stopped, in)
		}
	}
	for _, in := range s.ins {
		if in.down {
			continue
		}
		code, out := soakCLI(t.Context(), s.bin, "rollback", "--config", in.cli, "--processor", "count")
		if code != 0 || !strings.Contains(out, "(rolled back)") {
			t.Errorf("statehost rollback of count on %s: exit %d: %s", in.proc.name, code, out)
		}
	}
	file := s.versions[s.current]
	soakCopy(t, file, s.mods["count"])
	s.jsonRuns = false
	if len(stopped) > 0 {
		// The stopped ones start again once every task runs, migrated back, on the others:
		// a store still at version 2 that moved to them would be refused (count cannot read
		// it, and they have no countjson to migrate it back through).
		s.awaitModule(file, "the rollback on the instances left")
		s.waitTasksRunning(soakRecoverLimit)
	}
	names := make([]string, len(stopped))
	for i, in := range stopped {
		s.start(in)
		in.down = false
		names[i] = in.name
	}
	how := fmt.Sprintf("back to count v%d (stores to version 1), statehost rollback on every instance", s.current+1)
	if len(stopped) > 0 {
		how += fmt.Sprintf(" but %s (started again since the deploy: nothing to roll back to; stopped first, started again after)",
			strings.Join(names, ", "))
	}
	return s.awaitModule(file, how)
}

// awaitModule waits until every instance (but those stopped on purpose) runs the module of
// file on every running task, and returns what (with the module's hash), or reports an error
// if one does not within soakSwitchLimit.
func (s *soak) awaitModule(file, what string) string {
	t := s.t
	wasm, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := hashOf(wasm)
	deadline := time.Now().Add(soakSwitchLimit)
	for {
		s.checkAlive()
		var behind []string
		for _, in := range s.ins {
			if in.down {
				continue
			}
			ps, err := soakProcessors(t.Context(), in.proc.admin)
			switch c := ps["count"]; {
			case err != nil:
				behind = append(behind, fmt.Sprintf("%s: %v", in.proc.name, err))
			case c.Current.Hash != want || c.Switched != c.Tasks:
				behind = append(behind, fmt.Sprintf("%s runs %s on %d of %d tasks", in.proc.name, shortHash(c.Current.Hash), c.Switched, c.Tasks))
			}
		}
		if len(behind) == 0 {
			return fmt.Sprintf("%s (%s)", what, shortHash(want))
		}
		if time.Now().After(deadline) {
			t.Errorf("%s (%s): not running everywhere after %v: %s", what, shortHash(want), soakSwitchLimit, strings.Join(behind, "; "))
			return fmt.Sprintf("%s (%s): NOT SWITCHED (%s)", what, shortHash(want), strings.Join(behind, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// soakCount reads a count as count keeps it (decimal) or as countjson does ({"n":5}).
func soakCount(v string) (int, bool) {
	if n, err := strconv.Atoi(v); err == nil {
		return n, true
	}
	var j struct {
		N *int `json:"n"`
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil || j.N == nil || dec.More() {
		return 0, false
	}
	return *j.N, true
}
