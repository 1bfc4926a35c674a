package config_test

import (
	"strings"
	"testing"

	"github.com/statehost/statehost/config"
)

// TestOnError: on_error decodes to the processor's policy (fail by default), and a
// dead_letter processor's topic is <application_id>-<processor>-dlq, which must be a valid
// topic name: too long is an error on the attribute.
func TestOnError(t *testing.T) {
	_, path := writeConfig(t, `
application_id = "app"
processor "count" {
  module   = "plugins/count/count.wasm"
  inputs   = ["in"]
  on_error = "dead_letter"
}
processor "skipper" {
  module   = "plugins/count/count.wasm"
  inputs   = ["app-count-dlq"]
  on_error = "skip"
}
processor "failer" {
  module = "plugins/count/count.wasm"
  inputs = ["in"]
}
`)
	c, diags := config.Load(path, config.Options{})
	noDiagnostics(t, c.Files, diags)
	for i, want := range []config.OnError{config.OnErrorDeadLetter, config.OnErrorSkip, config.OnErrorFail} {
		if got := c.Processors[i].OnError; got != want {
			t.Errorf("processor %s: on_error %q, want %q", c.Processors[i].Name, got, want)
		}
	}
	sameRange(t, "count.OnErrorRange", c.Processors[0].OnErrorRange, rng(path, 6, 14, 6, 27))
	sameRange(t, "failer.OnErrorRange", c.Processors[2].OnErrorRange, c.Processors[2].DeclRange)
	if got := c.DeadLetterTopic("count"); got != "app-count-dlq" {
		t.Errorf("DeadLetterTopic = %q", got)
	}

	long := strings.Repeat("p", 60)
	app := strings.Repeat("a", 190)
	_, path = writeConfig(t, `application_id = "`+app+`"
processor "`+long+`" {
  module   = "plugins/count/count.wasm"
  inputs   = ["in"]
  on_error = "dead_letter"
}
processor "`+long+`x" {
  module   = "plugins/count/count.wasm"
  inputs   = ["in"]
  on_error = "skip"
}
`)
	_, diags = config.Load(path, config.Options{})
	if len(diags) != 1 || diags[0].Summary != "Dead-letter topic name too long" || !strings.Contains(diags[0].Detail, app+"-"+long+"-dlq") {
		t.Fatalf("a dead-letter topic name of %d characters: %v, want one error (none for the skip processor)", len(app+long)+5, diags)
	}
	sameRange(t, "too long", *diags[0].Subject, rng(path, 5, 14, 5, 27))
}
