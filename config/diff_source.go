package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// source finds the ranges of attributes and blocks in a configuration's file, for the
// diagnostics of Diff: the decoded Config keeps the ranges that Load's own checks need, not
// one for every attribute.
type source struct {
	top   sourceBlock
	first hcl.Range // the start of the file
}

// sourceBlock is a block of the file (or its body as a whole): its attributes and blocks, and
// the range a diagnostic falls back to when one of them is absent.
type sourceBlock struct {
	body *hclsyntax.Body // nil: not found
	rng  hcl.Range       // the block's header, or the fallback of its parent
}

// newSource returns the source of c's file.
func newSource(c *Config) source {
	pos := hcl.Pos{Line: 1, Column: 1}
	s := source{first: hcl.Range{Filename: c.Path, Start: pos, End: pos}}
	for name, f := range c.Files {
		if body, ok := f.Body.(*hclsyntax.Body); ok && (name == c.Path || len(c.Files) == 1) {
			s.first = hcl.Range{Filename: name, Start: pos, End: pos}
			s.top = sourceBlock{body: body, rng: s.first}
		}
	}
	if s.top.body == nil {
		s.top.rng = s.first
	}
	return s
}

// start is the start of the file: where the diagnostic of something that is gone points.
func (s source) start() hcl.Range { return s.first }

// attr is the range of the top-level attribute name's value, or the start of the file.
func (s source) attr(name string) hcl.Range { return s.top.attr(name) }

// block is the top-level block of type typ with labels.
func (s source) block(typ string, labels ...string) sourceBlock { return s.top.block(typ, labels...) }

// attr returns the range of the attribute name's value in b, or b's range when it is absent.
func (b sourceBlock) attr(name string) hcl.Range {
	if b.body != nil {
		if a, ok := b.body.Attributes[name]; ok {
			return a.Expr.Range()
		}
	}
	return b.rng
}

// block returns the first block of type typ with labels in b; when there is none, a
// sourceBlock whose ranges are b's.
func (b sourceBlock) block(typ string, labels ...string) sourceBlock {
	if b.body == nil {
		return sourceBlock{rng: b.rng}
	}
	for _, blk := range b.body.Blocks {
		if blk.Type != typ || len(blk.Labels) != len(labels) {
			continue
		}
		match := true
		for i := range labels {
			match = match && blk.Labels[i] == labels[i]
		}
		if match {
			return sourceBlock{body: blk.Body, rng: blk.DefRange()}
		}
	}
	return sourceBlock{rng: b.rng}
}
