package config

const (
	// DefaultStateMemory is the default of state_memory: 256 MiB.
	DefaultStateMemory = 256 << 20
	// MinStateMemory is the least state_memory: 8 MiB.
	MinStateMemory = 8 << 20
	// MinMemoryBeyondState is the least memory_limit leaves beside state_memory, for the
	// plugins' instances, the Kafka clients' buffers and the Go runtime: below it the garbage
	// collector would run without pause.
	MinMemoryBeyondState = 64 << 20
)

// decodeMemory decodes state_memory and memory_limit.
func (d *decoder) decodeMemory(raw *rawFile, c *Config) {
	c.StateMemory = d.byteSizeWithin(raw.StateMemory, "state_memory", DefaultStateMemory, MinStateMemory, 1<<40)
	c.MemoryLimit = d.byteSize(raw.MemoryLimit, "memory_limit", 0)
	if c.MemoryLimit != 0 && c.MemoryLimit < c.StateMemory+MinMemoryBeyondState {
		d.errorf(raw.MemoryLimit.Range(), "Memory limit too low",
			"The memory_limit of %s leaves less than %s beside state_memory (%s) for the plugins, the Kafka clients and the Go runtime, whose garbage collector would then run without pause. Raise it to at least %s, or lower state_memory.",
			FormatByteSize(c.MemoryLimit), FormatByteSize(MinMemoryBeyondState), FormatByteSize(c.StateMemory), FormatByteSize(c.StateMemory+MinMemoryBeyondState))
		c.MemoryLimit = 0
	}
}
