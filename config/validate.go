package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// maxTopicLen is Kafka's limit on the length of a topic name.
const maxTopicLen = 249

// maxApplicationIDLen leaves room for the suffixes of internal topics within maxTopicLen.
const maxApplicationIDLen = 200

// maxProcessorNameLen keeps the task directory <processor>_<partition> a valid file name.
const maxProcessorNameLen = 200

// kafkaChars reports whether s holds only the characters Kafka allows in topic names.
func kafkaChars(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// checkApplicationID returns what is wrong with id ("" when nothing), to follow "The
// application_id %q ...".
func checkApplicationID(id string) string {
	switch {
	case id == "":
		return "is empty"
	case id == "." || id == "..":
		return "is not a directory name (the instance's state lives in <state_dir>/<application_id>)"
	case len(id) > maxApplicationIDLen:
		return fmt.Sprintf("is longer than %d characters", maxApplicationIDLen)
	case !kafkaChars(id):
		return "may contain only ASCII letters, digits, '.', '_' and '-'"
	}
	return ""
}

// checkTopicName returns what is wrong with a Kafka topic name, or a name that becomes part of
// one (store and repartition names), to follow "The topic name %q ...".
func checkTopicName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case name == "." || name == "..":
		return "is not allowed by Kafka"
	case len(name) > maxTopicLen:
		return fmt.Sprintf("is longer than Kafka's limit of %d characters", maxTopicLen)
	case !kafkaChars(name):
		return "may contain only ASCII letters, digits, '.', '_' and '-'"
	}
	return ""
}

// checkProcessorName returns what is wrong with a processor name. It names task directories
// <processor>_<partition> under the state directory.
func checkProcessorName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case strings.HasPrefix(name, "."):
		return "must not start with '.'"
	case len(name) > maxProcessorNameLen:
		return fmt.Sprintf("is longer than %d characters", maxProcessorNameLen)
	case !kafkaChars(name):
		return "may contain only ASCII letters, digits, '.', '_' and '-' (it names the task directories <processor>_<partition>)"
	}
	return ""
}

// checkTopics checks the topic and repartition blocks against each other.
func (d *decoder) checkTopics(raw rawFile, c *Config) {
	topics := map[string]hcl.Range{}
	for _, t := range c.Topics {
		if first, dup := topics[t.Name]; dup {
			d.errorf(t.DeclRange, "Duplicate topic", "The topic %q is already defined at %s.", t.Name, where(first))
			continue
		}
		topics[t.Name] = t.DeclRange
	}

	repartitions := map[string]hcl.Range{}
	fullNames := map[string]string{} // full repartition topic -> short name
	for i, r := range c.Repartitions {
		if first, dup := repartitions[r.Name]; dup {
			d.errorf(r.DeclRange, "Duplicate repartition", "The repartition %q is already defined at %s.", r.Name, where(first))
			continue
		}
		repartitions[r.Name] = r.DeclRange
		fullNames[r.Topic] = r.Name
		if t, clash := topics[r.Name]; clash {
			d.errorf(raw.Repartitions[i].NameRange, "Ambiguous repartition name",
				"The repartition %q has the name of the topic block at %s, so an input or output %q could mean either topic. Rename one of them.", r.Name, where(t), r.Name)
		}
	}

	// A topic block must not declare a topic that the application manages itself.
	changelogs := map[string]string{} // changelog topic -> store
	for _, p := range c.Processors {
		for _, s := range p.Stores {
			if s.Logging {
				changelogs[changelogTopic(c.ApplicationID, s.Name)] = s.Name
			}
		}
	}
	for i, t := range c.Topics {
		if short, ok := fullNames[t.Name]; ok {
			d.errorf(raw.Topics[i].NameRange, "Reserved topic name", "The topic %q is the internal topic of repartition %q (at %s); declare it only with the repartition block.", t.Name, short, where(repartitions[short]))
		}
		if store, ok := changelogs[t.Name]; ok {
			d.errorf(raw.Topics[i].NameRange, "Reserved topic name", "The topic %q is the changelog topic of store %q, which the application creates itself.", t.Name, store)
		}
	}
}

// checkProcessors checks processor and store names and resolves inputs and outputs.
func (d *decoder) checkProcessors(raw rawFile, c *Config) {
	processors := map[string]hcl.Range{}
	type storeDef struct {
		rng       hcl.Range
		processor string
	}
	stores := map[string]storeDef{}
	for i := range c.Processors {
		p := &c.Processors[i]
		if first, dup := processors[p.Name]; dup {
			d.errorf(p.DeclRange, "Duplicate processor", "The processor %q is already defined at %s.", p.Name, where(first))
		} else {
			processors[p.Name] = p.DeclRange
		}

		for j, s := range p.Stores {
			nameRange := raw.Processors[i].Stores[j].NameRange
			if first, dup := stores[s.Name]; dup {
				d.errorf(s.DeclRange, "Duplicate store", "The store %q is already defined at %s (in processor %q). Store names are unique in the whole application because they name the changelog topics <application_id>-<store>-changelog.", s.Name, where(first.rng), first.processor)
				continue
			}
			stores[s.Name] = storeDef{s.DeclRange, p.Name}
			if t := changelogTopic(c.ApplicationID, s.Name); c.ApplicationID != "" && checkTopicName(s.Name) == "" && len(t) > maxTopicLen {
				d.errorf(nameRange, "Store name too long", "The changelog topic %q of store %q is longer than Kafka's limit of %d characters.", t, s.Name, maxTopicLen)
			}
		}

		p.Inputs = d.resolveTopics(c, p.Inputs, p.InputRanges, "input")
		p.Outputs = d.resolveTopics(c, p.Outputs, p.OutputRanges, "output")
		d.checkCoPartitioned(c, p)
		for k, out := range p.Outputs {
			for l, in := range p.Inputs {
				if out == in {
					d.errorf(p.OutputRanges[k], "Output is an input", "The processor %q writes to %q, which it also reads (input at %s): it would read its own output forever.", p.Name, out, where(p.InputRanges[l]))
					break
				}
			}
		}
	}
}

// checkCoPartitioned refuses a processor whose inputs have different partition counts in the
// file (topic and repartition blocks); counts of topics that only exist on the broker are
// checked when the application starts.
func (d *decoder) checkCoPartitioned(c *Config, p *Processor) {
	counts := map[int32][]string{}
	for _, in := range p.Inputs {
		switch {
		case c.TopicByName(in) != nil:
			n := c.TopicByName(in).Partitions
			counts[n] = append(counts[n], in)
		case c.RepartitionByTopic(in) != nil:
			n := c.RepartitionByTopic(in).Partitions
			counts[n] = append(counts[n], in)
		}
	}
	if len(counts) < 2 {
		return
	}
	var desc []string
	for _, n := range slices.Sorted(maps.Keys(counts)) {
		desc = append(desc, fmt.Sprintf("%s: %d", strings.Join(counts[n], ", "), n))
	}
	d.errorf(p.InputsRange, "Inputs not co-partitioned", "The inputs of processor %q must have the same number of partitions, since partition N of every input goes to task N; they have %s.", p.Name, strings.Join(desc, "; "))
}

// resolveTopics checks the names of a processor's inputs or outputs, refuses duplicates and
// replaces repartition short names by their full topic names.
func (d *decoder) resolveTopics(c *Config, names []string, ranges []hcl.Range, what string) []string {
	seen := map[string]hcl.Range{}
	var out []string
	for i, name := range names {
		if msg := checkTopicName(name); msg != "" {
			d.errorf(ranges[i], "Invalid topic name", "The %s topic name %q %s.", what, name, msg)
		}
		full := name
		if r := c.repartitionByName(name); r != nil {
			full = r.Topic
		}
		if first, dup := seen[full]; dup {
			d.errorf(ranges[i], "Duplicate "+what, "The %s %q is already listed at %s.", what, name, where(first))
		}
		seen[full] = ranges[i]
		out = append(out, full)
	}
	return out
}

func (c *Config) repartitionByName(name string) *Repartition {
	for i := range c.Repartitions {
		if c.Repartitions[i].Name == name {
			return &c.Repartitions[i]
		}
	}
	return nil
}
