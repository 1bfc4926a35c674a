package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// checkTopology checks the processors as a graph: no processor writes the changelog topic of
// a store, and no records can go round from a processor back to itself through other
// processors (a cycle).
func (d *decoder) checkTopology(c *Config) {
	d.checkChangelogOutputs(c)
	d.checkCycles(c)
}

// checkChangelogOutputs refuses an output that is the changelog topic of a logged store: its
// records would become the store's state at the next restore.
func (d *decoder) checkChangelogOutputs(c *Config) {
	if c.ApplicationID == "" {
		return
	}
	type storeAt struct {
		name string
		rng  hcl.Range
	}
	changelogs := map[string]storeAt{}
	for _, p := range c.Processors {
		for _, s := range p.Stores {
			if s.Logging {
				changelogs[changelogTopic(c.ApplicationID, s.Name)] = storeAt{s.Name, s.DeclRange}
			}
		}
	}
	for _, p := range c.Processors {
		for i, out := range p.Outputs {
			if s, ok := changelogs[out]; ok {
				d.errorf(p.OutputRanges[i], "Output is a changelog topic", "The processor %q writes to %q, the changelog topic of store %q (at %s): the store would take its records for its own state at the next restore.", p.Name, out, s.name, where(s.rng))
			}
		}
	}
}

// edge is a way from one processor to another: from writes topic (an output, or its
// dead-letter topic), which to reads.
type edge struct {
	from, to int // indexes in Config.Processors
	topic    string
	rng      hcl.Range // the output's element, or the on_error attribute for the dead-letter topic
	dlq      bool
}

// checkCycles refuses processors that form a cycle: p1 writes a topic that p2 reads, ..., and
// pn writes a topic that p1 reads (through topics, repartition topics and dead-letter topics).
// A record that goes round is processed again and again, without end unless every plugin of
// the cycle stops emitting for it, which the host cannot know. Each group of processors that
// are in cycles with each other is one error, on the output of its first processor (in file
// order) that leads round, with the path of one cycle. A processor that reads its own output
// or its own dead-letter topic is refused by the checks of outputs and dead letters already.
func (d *decoder) checkCycles(c *Config) {
	readers := map[string][]int{} // topic -> the processors that read it
	for i, p := range c.Processors {
		for _, in := range p.Inputs {
			readers[in] = append(readers[in], i)
		}
	}
	out := make([][]edge, len(c.Processors)) // the edges from each processor, in file order
	for i, p := range c.Processors {
		add := func(topic string, rng hcl.Range, dlq bool) {
			for _, j := range readers[topic] {
				if j != i {
					out[i] = append(out[i], edge{from: i, to: j, topic: topic, rng: rng, dlq: dlq})
				}
			}
		}
		for k, o := range p.Outputs {
			add(o, p.OutputRanges[k], false)
		}
		if p.OnError == OnErrorDeadLetter && c.ApplicationID != "" {
			add(c.DeadLetterTopic(p.Name), p.OnErrorRange, true)
		}
	}
	for _, scc := range stronglyConnected(out) {
		if len(scc) < 2 {
			continue
		}
		cycle := shortestCycle(out, scc)
		d.errorf(cycle[0].rng, "Cycle of processors", "%s", describeCycle(c, cycle, scc))
	}
}

// describeCycle is the detail of the error about cycle, a path through the group of
// processors scc.
func describeCycle(c *Config, cycle []edge, scc []int) string {
	var b strings.Builder
	name := func(i int) string { return fmt.Sprintf("%q", c.Processors[i].Name) }
	b.WriteString("The processors form a cycle: ")
	for i, e := range cycle {
		via := "writes"
		if e.dlq {
			via = "dead-letters to"
		}
		if i == 0 {
			fmt.Fprintf(&b, "%s %s %q (at %s)", name(e.from), via, e.topic, where(e.rng))
		} else {
			fmt.Fprintf(&b, "; %s reads it and %s %q (at %s)", name(e.from), via, e.topic, where(e.rng))
		}
	}
	fmt.Fprintf(&b, "; %s reads it again. A record that goes round is processed again and again, without end unless a plugin stops emitting for it, which statehost cannot know: it refuses every cycle.", name(cycle[0].from))
	if len(scc) > len(cycle) {
		in := map[int]bool{}
		for _, e := range cycle {
			in[e.from] = true
		}
		var others []string
		for _, i := range scc {
			if !in[i] {
				others = append(others, name(i))
			}
		}
		if len(others) == 1 {
			fmt.Fprintf(&b, " The processor %s is in a cycle with them too.", others[0])
		} else {
			fmt.Fprintf(&b, " The processors %s are in cycles with them too.", strings.Join(others, ", "))
		}
	}
	b.WriteString(" Break the cycle: write to a topic that none of them reads. A feedback loop that is meant to be one belongs in a second application (a configuration of its own), which makes the loop explicit.")
	return b.String()
}

// stronglyConnected returns the strongly connected components of the graph out (Tarjan's
// algorithm), each sorted by index, in the order of their smallest index.
func stronglyConnected(out [][]edge) [][]int {
	n := len(out)
	index, low := make([]int, n), make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var (
		stack []int
		next  int
		comps [][]int
	)
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range out[v] {
			switch {
			case index[e.to] < 0:
				visit(e.to)
				low[v] = min(low[v], low[e.to])
			case onStack[e.to]:
				low[v] = min(low[v], index[e.to])
			}
		}
		if low[v] != index[v] {
			return
		}
		var comp []int
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp = append(comp, w)
			if w == v {
				break
			}
		}
		comps = append(comps, comp)
	}
	for v := range n {
		if index[v] < 0 {
			visit(v)
		}
	}
	for _, comp := range comps {
		slices.Sort(comp)
	}
	// By smallest member, so that the errors follow the file.
	slices.SortFunc(comps, func(a, b []int) int { return a[0] - b[0] })
	return comps
}

// shortestCycle returns a shortest cycle through the first processor of scc, a strongly
// connected component of out with at least two processors, as its edges in order; the
// first edge leaves that processor. Edges are tried in file order, so the answer is stable.
func shortestCycle(out [][]edge, scc []int) []edge {
	start := scc[0]
	inSCC := map[int]bool{}
	for _, i := range scc {
		inSCC[i] = true
	}
	// Breadth-first from start, within the component, until an edge leads back to it.
	via := map[int]edge{} // processor -> the edge it was first reached by
	queue := []int{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, e := range out[v] {
			if !inSCC[e.to] {
				continue
			}
			if e.to == start {
				path := []edge{e}
				for w := v; w != start; w = via[w].from {
					path = append(path, via[w])
				}
				for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return path
			}
			if _, seen := via[e.to]; !seen {
				via[e.to] = e
				queue = append(queue, e.to)
			}
		}
	}
	panic("config: a strongly connected component without a cycle")
}
