package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProcessIDAtLeastOnce: the process-id file of the state directory is not for
// exactly-once only. Under at-least-once too the instance writes it at its first start and
// joins its group as the static member <application_id>-<process-id>; started again on the
// same state directory, it keeps the id.
func TestProcessIDAtLeastOnce(t *testing.T) {
	brokers := cluster(t)
	_, adm := client(t, brokers)
	dir := t.TempDir()
	cfg := loadConfig(t, dir, fmt.Sprintf(wordcountHCL, "pebble", true))
	if cfg.Guarantee != "at_least_once" {
		t.Fatalf("the configuration's guarantee is %s, want at_least_once", cfg.Guarantee)
	}
	path := filepath.Join(StateDir(cfg), processIDFile)
	var first string
	for i := range 2 {
		in := start(t, cfg, brokers)
		var pid string
		waitFor(t, 30*time.Second, "the instance to write its process id and be the static member wc-<process-id>", func() bool {
			b, err := os.ReadFile(path)
			pid = strings.TrimSpace(string(b))
			return err == nil && inStableGroup(adm, "wc", "wc-"+pid)
		})
		if i == 0 {
			first = pid
		} else if pid != first {
			t.Errorf("the process id changed across a restart: %s, then %s", first, pid)
		}
		if err := in.stop(t); err != nil {
			t.Fatal(err)
		}
	}
}
