package main

import (
	"os"
	"strings"
	"testing"

	"github.com/statehost/statehost/internal/wordgen"
)

// TestE2ECanaryRollback runs the word count as a process with an admin listener and drives a
// canary, a promotion and rollbacks with the deploy and rollback commands: countjson's
// reversible variant as a canary on partitions 0 and 2, promoted, rolled back to count (each
// store migrated back); then countjson, whose migration is one way, whose rollback is refused.
// The application counts on, exactly.
func TestE2ECanaryRollback(t *testing.T) {
	bin, addr, cfg, _, _, app := startAdminApp(t)
	mods := buildModules(t)
	mig := buildMigrationModules(t)
	hash := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return hashOf(b)[:12]
	}
	h1, hr, hj := hash(mods["count"]), hash(mig["reversible"]), hash(mig["countjson"])
	lines, ref := wordgen.Sentences(300, 4)
	produceLines(t, bin, addr, "sentences", lines)
	waitCounts(t, addr, "word-counts", wordgen.Strings(ref))

	for _, tc := range []struct {
		args           []string
		exit           int
		stdout, stderr string
	}{
		{[]string{"rollback", "--processor", "count"}, 1, "", "409 Conflict: runtime: no previous module"},
		{[]string{"deploy", "--processor", "count", "--partitions", "0,2", mig["reversible"]}, 0,
			"processor count: switched 2 tasks to " + hr + " (a canary on partitions 0,2) (was " + h1 + ")\n", ""},
		{[]string{"deploy", "--processor", "count", "--partitions", "7", mig["reversible"]}, 1, "", "400 Bad Request: runtime: bad canary partitions"},
		{[]string{"deploy", "--processor", "count", "--promote"}, 0,
			"processor count: switched 3 tasks to " + hr + " (the canary, promoted) (was " + h1 + ")\n", ""},
		{[]string{"rollback", "--processor", "count"}, 0, "processor count: switched 3 tasks to " + h1 + " (rolled back) (was " + hr + ")\n", ""},
		{[]string{"deploy", "--processor", "count", mig["countjson"]}, 0, "processor count: switched 3 tasks to " + hj + " (was " + h1 + ")\n", ""},
		{[]string{"rollback", "--processor", "count"}, 1, "", "does not declare that migration reversible (statehost_store_reversible)"},
	} {
		r := runCLI(t.Context(), "", append(tc.args, "--config", cfg)...)
		if r.code != tc.exit || r.stdout != tc.stdout || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("statehost %q: got %v\nwant exit %d, stdout %q, stderr with %q", tc.args, r, tc.exit, tc.stdout, tc.stderr)
		}
	}
	more, ref2 := wordgen.Sentences(300, 4)
	produceLines(t, bin, addr, "sentences", more)
	for w, n := range ref2 {
		ref[w] += n
	}
	waitCounts(t, addr, "word-counts", wordgen.Strings(ref))
	stopClean(t, app)
}
