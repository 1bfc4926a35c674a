package main

import (
	"os"
	"strings"
	"testing"

	"github.com/statehost/statehost/host/testdriver"
)

// TestREADMEHelp: the README's list of commands, under "The statehost program", is what
// statehost help prints, line for line. A change to a command's synopsis or summary, or a
// new command, is to be copied there.
func TestREADMEHelp(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	const marker, open, end = "<!-- statehost help", "```text\n", "\n```\n"
	i := strings.Index(readme, marker)
	if i < 0 {
		t.Fatalf("README.md has no %q marker before the list of commands", marker)
	}
	j := strings.Index(readme[i:], open)
	if j < 0 {
		t.Fatalf("README.md has no %q block after its %q marker", open, marker)
	}
	block := readme[i+j+len(open):]
	k := strings.Index(block, end)
	if k < 0 {
		t.Fatal("README.md's help block does not end")
	}
	block = block[:k+1]
	var help strings.Builder
	usage(&help)
	if block != help.String() {
		t.Errorf("README.md's command list is not statehost help's output (copy it there):\n%s",
			testdriver.Diff("README.md", "statehost help", strings.Split(block, "\n"), strings.Split(help.String(), "\n")))
	}
}
