// Package loopcheck instruments a WebAssembly module so that its host can stop it, cheaply.
//
// It adds two mutable i32 globals: a stop flag, exported under a name the host chooses, and
// a budget. At the head of every loop and the entry of every function (but those whose code
// starts with a loop), the guest counts the budget down. When it runs out, the guest refills
// it (Budget), leaves its compiled code for the host's once (a memory.grow by 0, which
// wazero carries out in Go) and traps (unreachable) if the host has set the stop flag.
//
// The exit matters as much as the flag. Compiled guest code is not preemptible by the Go
// runtime: a guest that never leaves it would hold up every stop-the-world of the process
// (a garbage collection), and with it the timer goroutine that would set the flag. With the
// budget, the guest leaves it at least every Budget loop iterations or calls.
//
// This replaces wazero's WithCloseOnContextDone, which leaves the compiled code at every
// loop head and function entry: Go guests, whose function bodies are loops, paid about 2 µs
// per record for it (docs/decisions/20261130_loop_checks.md). Here a check costs a few
// instructions. A module without memory gets the stop check only (no exit).
//
// The package walks the binary format of WebAssembly 2.0 (and the threads, tail-call and
// multi-memory encodings wazero may accept) without validating it: the instrumented module
// goes to wazero, which does.
package loopcheck

import (
	"errors"
	"fmt"
)

// Section ids of the binary format.
const (
	secCustom = 0
	secImport = 2
	secMemory = 5
	secGlobal = 6
	secExport = 7
	secStart  = 8
	secCode   = 10
)

// order is the position a non-custom section must take: the binary format's order, which
// is not the order of the ids (the data count section, 12, comes before code, 10; tags, 13,
// before globals).
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// Budget is how many checks (loop iterations and function calls) a guest runs between two
// exits to the host. An exit costs about 100 ns; a check about 1 ns.
const Budget = 4096

// Result is an instrumented module.
type Result struct {
	Wasm  []byte // the instrumented binary
	Stop  uint32 // the index of the stop global; the budget's is Stop+1
	Loops int    // the number of loops checked
	Calls int    // the number of function entries checked
	Exits bool   // the guest leaves its compiled code when the budget runs out (it has a memory)
	Start bool   // the module has a start section (a function run at every instantiation)
}

type section struct {
	id   byte
	body []byte
}

// Instrument returns wasm with the stop global, exported as export, checked at the head of
// every loop of every function. It fails on a binary it cannot walk, and when the module
// already exports export.
func Instrument(wasm []byte, export string) (Result, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return Result{}, errors.New("not a WebAssembly binary: bad magic")
	}
	var secs []section
	r := reader{b: wasm, pos: 8}
	for !r.done() {
		at := r.pos
		id := r.byte()
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return Result{}, fmt.Errorf("section at byte %d: %w", at, r.err)
		}
		if _, ok := order[id]; !ok && id != secCustom {
			return Result{}, fmt.Errorf("section at byte %d: unknown section id %d", at, id)
		}
		secs = append(secs, section{id, body})
	}

	imported, importedMems, err := importedGlobals(find(secs, secImport))
	if err != nil {
		return Result{}, fmt.Errorf("import section: %w", err)
	}
	hasMemory := importedMems > 0
	if m := find(secs, secMemory); m != nil {
		r := reader{b: m}
		hasMemory = hasMemory || r.u32() > 0
	}
	defined := uint32(0)
	if g := find(secs, secGlobal); g != nil {
		if defined, err = countGlobals(g); err != nil {
			return Result{}, fmt.Errorf("global section: %w", err)
		}
	}
	res := Result{Stop: imported + defined, Exits: hasMemory, Start: find(secs, secStart) != nil}

	global := addGlobals(find(secs, secGlobal))
	exports, err := addExport(find(secs, secExport), export, res.Stop)
	if err != nil {
		return Result{}, fmt.Errorf("export section: %w", err)
	}
	var code []byte
	if c := find(secs, secCode); c != nil {
		check := appendCheck(nil, res.Stop, hasMemory)
		if code, res.Loops, res.Calls, err = instrumentCode(c, check); err != nil {
			return Result{}, fmt.Errorf("code section: %w", err)
		}
	}

	out := append(make([]byte, 0, len(wasm)+len(global)+len(exports)+(res.Loops+res.Calls)*32+64), wasm[:8]...)
	put := func(id byte, body []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	pending := []section{{secGlobal, global}, {secExport, exports}}
	for _, s := range secs {
		// A section the module lacks goes before the first section that must follow it.
		for len(pending) > 0 && s.id != secCustom && order[s.id] > order[pending[0].id] {
			put(pending[0].id, pending[0].body)
			pending = pending[1:]
		}
		switch {
		case len(pending) > 0 && s.id == pending[0].id:
			put(s.id, pending[0].body)
			pending = pending[1:]
		case s.id == secCode:
			put(s.id, code)
		default:
			put(s.id, s.body)
		}
	}
	for _, p := range pending {
		put(p.id, p.body)
	}
	res.Wasm = out
	return res, nil
}

// find returns the body of the section with that id, or nil.
func find(secs []section, id byte) []byte {
	for _, s := range secs {
		if s.id == id {
			return s.body
		}
	}
	return nil
}

// importedGlobals counts the global and memory imports of an import section.
func importedGlobals(body []byte) (globals, memories uint32, err error) {
	if body == nil {
		return 0, 0, nil
	}
	r := reader{b: body}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0x00: // function: type index
			r.u32()
		case 0x01: // table: reference type, limits
			r.byte()
			r.limits()
		case 0x02: // memory: limits
			r.limits()
			memories++
		case 0x03: // global: value type, mutability
			r.byte()
			r.byte()
			globals++
		case 0x04: // tag: attribute, type index
			r.byte()
			r.u32()
		default:
			r.fail(fmt.Errorf("import %d: unknown kind 0x%02x", i, kind))
		}
	}
	return globals, memories, r.err
}

// countGlobals walks a global section to its end and returns its number of globals.
func countGlobals(body []byte) (uint32, error) {
	r := reader{b: body}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.byte()           // value type
		r.byte()           // mutability
		for r.err == nil { // the initializer: instructions up to its end
			op := r.byte()
			if r.immediates(op); op == 0x0b {
				break
			}
		}
	}
	if r.err == nil && !r.done() {
		r.fail(fmt.Errorf("%d bytes after the last global", len(r.b)-r.pos))
	}
	return n, r.err
}

// addGlobals returns the global section body (a new one when body is nil) with two mutable
// i32 globals appended: the stop flag, 0, and the budget, Budget.
func addGlobals(body []byte) []byte {
	r := reader{b: body}
	n := uint32(0)
	if body != nil {
		n = r.u32()
	}
	out := appendU32(nil, n+2)
	out = append(out, body[r.pos:]...)
	// type i32 (0x7f), mutable (0x01), init: i32.const 0; end
	out = append(out, 0x7f, 0x01, 0x41, 0x00, 0x0b)
	out = append(out, 0x7f, 0x01, 0x41)
	out = appendS32(out, Budget)
	return append(out, 0x0b)
}

// addExport returns the export section body with global idx exported as name appended.
func addExport(body []byte, name string, idx uint32) ([]byte, error) {
	r := reader{b: body}
	n, start := uint32(0), 0
	if body != nil {
		n = r.u32()
		start = r.pos
		for i := uint32(0); i < n && r.err == nil; i++ {
			if r.name() == name {
				return nil, fmt.Errorf("the module already exports %q, a name the host reserves", name)
			}
			r.byte()
			r.u32()
		}
		if r.err == nil && !r.done() {
			r.fail(fmt.Errorf("%d bytes after the last export", len(r.b)-r.pos))
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	out := appendU32(nil, n+1)
	if body != nil {
		out = append(out, body[start:]...)
	}
	out = appendU32(out, uint32(len(name)))
	out = append(out, name...)
	out = append(out, 0x03) // global
	return appendU32(out, idx), nil
}

// instrumentCode rewrites every function body of a code section with check, returning the
// new section body and the numbers of loops and function entries checked.
func instrumentCode(body, check []byte) (out []byte, loops, calls int, err error) {
	r := reader{b: body}
	n := r.u32()
	out = appendU32(make([]byte, 0, len(body)+len(body)/8), n)
	var fn []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		b := r.bytes(int(size))
		if r.err != nil {
			return nil, 0, 0, fmt.Errorf("function %d: %w", i, r.err)
		}
		var k int
		var entry bool
		fn, k, entry, err = instrumentBody(fn[:0], b, check)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("function %d: %w", i, err)
		}
		loops += k
		if entry {
			calls++
		}
		out = appendU32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	if !r.done() {
		return nil, 0, 0, fmt.Errorf("%d bytes after the last function", len(r.b)-r.pos)
	}
	return out, loops, calls, nil
}

// appendCheck appends the check of the stop global (index stop) and the budget (stop+1):
//
//	global.get budget; i32.eqz
//	if                                        ;; the budget ran out
//	  i32.const Budget; global.set budget
//	  i32.const 0; memory.grow 0; drop        ;; leave for the host (only with a memory)
//	  global.get stop; if; unreachable; end
//	end
//	global.get budget; i32.const 1; i32.sub; global.set budget
func appendCheck(out []byte, stop uint32, exit bool) []byte {
	budget := stop + 1
	get := func(g uint32) { out = appendU32(append(out, 0x23), g) }
	set := func(g uint32) { out = appendU32(append(out, 0x24), g) }
	get(budget)
	out = append(out, 0x45, 0x04, 0x40) // i32.eqz; if
	out = appendS32(append(out, 0x41), Budget)
	set(budget)
	if exit {
		out = append(out, 0x41, 0x00, 0x40, 0x00, 0x1a) // i32.const 0; memory.grow 0; drop
	}
	get(stop)
	out = append(out, 0x04, 0x40, 0x00, 0x0b, 0x0b) // if; unreachable; end; end
	get(budget)
	out = append(out, 0x41, 0x01, 0x6b) // i32.const 1; i32.sub
	set(budget)
	return out
}

// instrumentBody appends to out the function body b (locals, then code) with check after
// every loop instruction, and at the entry unless the code starts with a loop. It returns
// the number of loops and whether the entry was checked.
func instrumentBody(out, b, check []byte) (_ []byte, loops int, entry bool, err error) {
	r := reader{b: b}
	groups := r.u32()
	for i := uint32(0); i < groups && r.err == nil; i++ {
		r.u32()  // count
		r.byte() // value type
	}
	if r.err != nil {
		return nil, 0, false, fmt.Errorf("locals: %w", r.err)
	}
	from := 0 // the start of the bytes not yet copied
	if r.pos < len(b) && b[r.pos] != 0x03 {
		out = append(out, b[:r.pos]...)
		out = append(out, check...)
		from, entry = r.pos, true
	}
	for !r.done() {
		at := r.pos
		op := r.byte()
		if err := r.immediates(op); err != nil {
			return nil, 0, false, fmt.Errorf("instruction 0x%02x at byte %d of the body: %w", op, at, err)
		}
		if op == 0x03 { // loop
			out = append(out, b[from:r.pos]...)
			out = append(out, check...)
			from = r.pos
			loops++
		}
	}
	return append(out, b[from:]...), loops, entry, nil
}

// immediates skips the immediates of the instruction op.
func (r *reader) immediates(op byte) error {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		r.blockType()
	case op == 0x0c || op == 0x0d: // br, br_if
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x10 || op == 0x12: // call, return_call
		r.u32()
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect: type, table
		r.u32()
		r.u32()
	case op == 0x1c: // select with types
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			r.byte()
		}
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get, table.set
		r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.memarg()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow: memory index
		r.u32()
	case op == 0x41: // i32.const
		r.skipLEB(32)
	case op == 0x42: // i64.const
		r.skipLEB(64)
	case op == 0x43: // f32.const
		r.bytes(4)
	case op == 0x44: // f64.const
		r.bytes(8)
	case op == 0xd0: // ref.null: reference type
		r.byte()
	case op == 0xd2: // ref.func
		r.u32()
	case op == 0xfc:
		r.prefixFC(r.u32())
	case op == 0xfd:
		r.prefixFD(r.u32())
	case op == 0xfe:
		r.prefixFE(r.u32())
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
		(op >= 0x45 && op <= 0xc4) || op == 0xd1:
		// no immediates: unreachable, nop, else, end, return, drop, select, numeric
		// instructions, sign extension, ref.is_null
	default:
		r.fail(errors.New("unknown opcode"))
	}
	return r.err
}

// prefixFC skips the immediates of 0xfc sub (saturating truncation, bulk memory, tables).
func (r *reader) prefixFC(sub uint32) {
	switch {
	case sub <= 7: // trunc_sat
	case sub == 8: // memory.init: data, memory
		r.u32()
		r.u32()
	case sub == 9: // data.drop
		r.u32()
	case sub == 10: // memory.copy: two memories
		r.u32()
		r.u32()
	case sub == 11: // memory.fill: memory
		r.u32()
	case sub == 12 || sub == 14: // table.init: element, table; table.copy: two tables
		r.u32()
		r.u32()
	case sub == 13 || (sub >= 15 && sub <= 17): // elem.drop, table.grow, table.size, table.fill
		r.u32()
	default:
		r.fail(fmt.Errorf("unknown 0xfc instruction %d", sub))
	}
}

// prefixFD skips the immediates of SIMD instruction sub.
func (r *reader) prefixFD(sub uint32) {
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // v128 loads and stores, load32/64_zero
		r.memarg()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		r.byte()
	case sub >= 84 && sub <= 91: // load_lane, store_lane
		r.memarg()
		r.byte()
	case sub <= 275: // the rest have no immediates (relaxed SIMD goes to 0x113)
	default:
		r.fail(fmt.Errorf("unknown 0xfd instruction %d", sub))
	}
}

// prefixFE skips the immediates of atomic instruction sub (threads).
func (r *reader) prefixFE(sub uint32) {
	switch {
	case sub == 3: // atomic.fence
		r.byte()
	case sub <= 2 || (sub >= 0x10 && sub <= 0x4e):
		r.memarg()
	default:
		r.fail(fmt.Errorf("unknown 0xfe instruction %d", sub))
	}
}

// reader decodes the binary format; the first error sticks and stops it.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) done() bool { return r.err != nil || r.pos >= len(r.b) }

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
		r.pos = len(r.b)
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.fail(errors.New("unexpected end"))
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.pos {
		r.fail(errors.New("unexpected end"))
		return nil
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s
}

// u32 reads an unsigned LEB128 of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint64
	for i := 0; i < 5; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if v > 1<<32-1 {
				r.fail(errors.New("integer too large"))
				return 0
			}
			return uint32(v)
		}
	}
	r.fail(errors.New("integer representation too long"))
	return 0
}

// skipLEB skips a LEB128, signed or unsigned (both end at the first byte without the
// continuation bit), of at most bits bits.
func (r *reader) skipLEB(bits int) {
	for i := 0; i < (bits+6)/7; i++ {
		if c := r.byte(); r.err != nil || c&0x80 == 0 {
			return
		}
	}
	r.fail(errors.New("integer representation too long"))
}

// blockType skips a block type: empty (0x40), a value type (one byte, 0x6f to 0x7f), or a
// type index (a signed LEB128 of 33 bits, non-negative).
func (r *reader) blockType() {
	if r.pos < len(r.b) {
		if c := r.b[r.pos]; c == 0x40 || (c >= 0x6f && c <= 0x7f) {
			r.pos++
			return
		}
	}
	r.skipLEB(33)
}

// memarg skips a memory argument: alignment (bit 6 set: a memory index follows), offset.
func (r *reader) memarg() {
	if align := r.u32(); align&0x40 != 0 {
		r.u32()
	}
	r.skipLEB(64)
}

// name reads a name: a length and as many bytes.
func (r *reader) name() string { return string(r.bytes(int(r.u32()))) }

// limits skips table or memory limits: flags (bit 0: a maximum follows; bit 2: 64-bit), min.
func (r *reader) limits() {
	flags := r.byte()
	r.skipLEB(64)
	if flags&0x01 != 0 {
		r.skipLEB(64)
	}
}

// appendS32 appends v as a signed LEB128.
func appendS32(out []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

// appendU32 appends v as an unsigned LEB128.
func appendU32(out []byte, v uint32) []byte {
	for v >= 0x80 {
		out = append(out, byte(v)|0x80)
		v >>= 7
	}
	return append(out, byte(v))
}
