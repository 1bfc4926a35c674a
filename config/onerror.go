package config

// OnError is a processor's policy for a poison record: an input record its plugin fails on
// (the guest returns an error, traps, panics, exits, runs out of memory or past its time
// limit while the record is the current one).
type OnError string

const (
	// OnErrorFail stops the task, and the application, with an error that names the
	// processor, the topic, the partition and the offset of the record. The default.
	OnErrorFail OnError = "fail"
	// OnErrorSkip drops the record: what the plugin wrote and emitted for it is undone, it is
	// counted (statehost_records_skipped_total) and logged, and the task goes on with the
	// next record.
	OnErrorSkip OnError = "skip"
	// OnErrorDeadLetter drops the record as OnErrorSkip does, and produces it to the
	// processor's dead-letter topic <application_id>-<processor>-dlq with headers that say
	// why and where it came from.
	OnErrorDeadLetter OnError = "dead_letter"
)

// DeadLetterTopic returns the dead-letter topic of the processor named processor:
// <application_id>-<processor>-dlq.
func (c *Config) DeadLetterTopic(processor string) string {
	return deadLetterTopic(c.ApplicationID, processor)
}

func deadLetterTopic(app, processor string) string { return app + "-" + processor + "-dlq" }

// decodeOnError decodes the processor's on_error attribute into p.
func (d *decoder) decodeOnError(rp rawProcessor, p *Processor) {
	p.OnError, p.OnErrorRange = OnErrorFail, rp.DefRange
	if absent(rp.OnError) {
		return
	}
	p.OnErrorRange = rp.OnError.Range()
	s, ok := d.str(rp.OnError, "on_error")
	if !ok {
		return
	}
	switch OnError(s) {
	case OnErrorFail, OnErrorSkip, OnErrorDeadLetter:
		p.OnError = OnError(s)
	default:
		d.errorf(p.OnErrorRange, "Invalid on_error", "The on_error policy %q is not one of the valid values: %q (the default), %q or %q.", s, OnErrorFail, OnErrorSkip, OnErrorDeadLetter)
	}
}

// checkDeadLetters checks the dead-letter topics of the processors with on_error =
// "dead_letter": a valid name, and not an input of the processor itself.
func (d *decoder) checkDeadLetters(c *Config) {
	if c.ApplicationID == "" || checkApplicationID(c.ApplicationID) != "" {
		return
	}
	for _, p := range c.Processors {
		if p.OnError != OnErrorDeadLetter || checkProcessorName(p.Name) != "" {
			continue
		}
		dlq := c.DeadLetterTopic(p.Name)
		if len(dlq) > maxTopicLen {
			d.errorf(p.OnErrorRange, "Dead-letter topic name too long", "The dead-letter topic %q of processor %q is longer than Kafka's limit of %d characters.", dlq, p.Name, maxTopicLen)
			continue
		}
		for i, in := range p.Inputs {
			if in == dlq {
				d.errorf(p.InputRanges[i], "Input is the dead-letter topic", "The processor %q reads %q, its own dead-letter topic (on_error at %s): a record that fails again would go round forever.", p.Name, dlq, where(p.OnErrorRange))
			}
		}
	}
}
