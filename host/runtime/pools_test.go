package runtime

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/wordgen"
)

// TestPooledInstances runs the word count with 2 workers: each processor's tasks (4 of
// tokenize, 3 of count) share at most 2 instances, and the counts are right.
func TestPooledInstances(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), fmt.Sprintf(wordcountHCL, "pebble", true))
	in := start(t, cfg, brokers, func(o *Options) { o.Workers = 2 })
	cl, _ := client(t, brokers)
	lines, ref := wordgen.Sentences(2000, 3)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))

	rt := in.rt
	rt.tasks.mu.Lock()
	tasks := map[string]int{}
	for _, task := range rt.tasks.active {
		tasks[task.id.Processor]++
		if task.ownPool {
			t.Errorf("task %s has a pool of its own", task.id)
		}
	}
	rt.tasks.mu.Unlock()
	for _, p := range rt.procs {
		n := p.instances()
		if n < 1 || n > 2 {
			t.Errorf("processor %s: %d instances for %d tasks, want 1 or 2 (the workers)", p.cfg.Name, n, tasks[p.cfg.Name])
		}
		if g := instancesGauge(t, rt, p.cfg.Name); g != float64(n) {
			t.Errorf("statehost_plugin_instances{processor=%s} = %v, want its pools' %d", p.cfg.Name, g, n)
		}
	}
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestInstancePerTask: a module that exports statehost_instance_per_task gets an instance
// per task, which counts only its own partition's records.
func TestInstancePerTask(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), `
application_id  = "pt"
state_dir       = "state"
commit_interval = "200ms"
admin { listen = "" }
topic "in" {
  partitions = 2
}
processor "pertask" {
  module  = "{{pertask}}"
  inputs  = ["in"]
  outputs = ["seen"]
}
`)
	in := start(t, cfg, brokers, func(o *Options) { o.Workers = 1 })
	waitFor(t, 60*time.Second, "the tasks to run", func() bool { return running(in.rt) == 2 })
	cl, _ := client(t, brokers)
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	produceKeyed(t, cl, "in", keys)
	var got map[string]string
	waitFor(t, 60*time.Second, "every record's output", func() bool {
		got, _ = latest(t, brokers, "seen")
		return len(got) == len(keys)
	})
	// Each instance counts the records of its own partition, 1..n there: two partitions
	// with records give two records a count of 1 (one shared instance would count 1..40).
	ones := 0
	for _, v := range got {
		if v == "1" {
			ones++
		}
	}
	if ones != 2 {
		t.Errorf("%d records counted 1, want 2 (one per partition's instance): %v", ones, got)
	}
	rt := in.rt
	rt.tasks.mu.Lock()
	for _, task := range rt.tasks.active {
		if !task.ownPool {
			t.Errorf("task %s borrows from a shared pool", task.id)
		}
	}
	rt.tasks.mu.Unlock()
	for _, p := range rt.procs {
		if n := p.instances(); n != 0 {
			t.Errorf("processor %s: %d instances in shared pools, want none", p.cfg.Name, n)
		}
		if g := instancesGauge(t, rt, p.cfg.Name); g != 2 {
			t.Errorf("statehost_plugin_instances{processor=%s} = %v, want 2 (one per task)", p.cfg.Name, g)
		}
	}
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
}

// instancesGauge returns statehost_plugin_instances of processor proc, from rt's registry.
func instancesGauge(t *testing.T, rt *Runtime, proc string) float64 {
	t.Helper()
	fams, err := rt.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "statehost_plugin_instances" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "processor") == proc {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no statehost_plugin_instances{processor=%s}", proc)
	return 0
}

// TestIdleInstancesTrimmed: an instance that loses the last task of a processor to a joining
// peer closes that processor's idle plugin instances, and keeps the other's.
func TestIdleInstancesTrimmed(t *testing.T) {
	brokers := cluster(t)
	src := `
application_id  = "trim"
commit_interval = "200ms"
admin { listen = "" }
topic "a" {
  partitions = 1
}
topic "b" {
  partitions = 1
}
processor "ca" {
  module  = "{{count}}"
  inputs  = ["a"]
  outputs = ["a-out"]
  store "counts" {}
}
processor "tb" {
  module  = "{{tokenize}}"
  inputs  = ["b"]
  outputs = ["b-out"]
}
`
	x := start(t, loadConfig(t, t.TempDir(), src), brokers)
	waitFor(t, 60*time.Second, "both tasks to run on the first instance", func() bool { return running(x.rt) == 2 })
	for _, p := range x.rt.procs {
		if n := p.instances(); n < 1 {
			t.Fatalf("processor %s: %d instances with a task running, want 1 or more", p.cfg.Name, n)
		}
	}
	y := start(t, loadConfig(t, t.TempDir(), src), brokers)
	waitFor(t, 60*time.Second, "one task on each instance", func() bool { return running(x.rt) == 1 && running(y.rt) == 1 })
	kept := map[string]bool{}
	for _, ts := range x.rt.Status().Tasks {
		if ts.State == "running" {
			kept[ts.Processor] = true
		}
	}
	for _, p := range x.rt.procs {
		n, want := p.instances(), "none"
		if kept[p.cfg.Name] {
			want = "1 or more"
		}
		if (n == 0) == kept[p.cfg.Name] {
			t.Errorf("processor %s on the first instance: %d instances, want %s", p.cfg.Name, n, want)
		}
		if g := instancesGauge(t, x.rt, p.cfg.Name); g != float64(n) {
			t.Errorf("statehost_plugin_instances{processor=%s} = %v, want its pools' %d", p.cfg.Name, g, n)
		}
	}
	for _, in := range []*instance{y, x} {
		if err := in.stop(t); err != nil {
			t.Fatal(err)
		}
	}
}
