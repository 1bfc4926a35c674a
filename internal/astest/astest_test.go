package astest

import (
	"strings"
	"testing"

	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

// TestSkipWithoutNode checks that without Node.js on PATH the AssemblyScript tests skip, and
// that the reason says what to install.
func TestSkipWithoutNode(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	why := wasmbuild.MissingNode()
	for _, want := range []string{"Node.js", "npm", "install", "node and npm are not on PATH"} {
		if !strings.Contains(why, want) {
			t.Errorf("MissingNode() = %q, want it to say %q", why, want)
		}
	}
	var skipped bool
	t.Run("guest", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Build(t, "../../plugins/count_as", t.TempDir())
		t.Error("Build returned without Node.js")
	})
	if !skipped {
		t.Error("a test that builds an AssemblyScript guest without Node.js did not skip")
	}
}
