package testdriver

import (
	"fmt"
	"strings"
)

// diffContext is how many equal lines a hunk of Diff shows around its changes.
const diffContext = 2

// maxDiffCells bounds the table of the longest common subsequence that Diff fills (lines of
// want times lines of got, after their common start and end): beyond it, the lines between
// are all shown as removed and added.
const maxDiffCells = 4 << 20

// Diff returns a unified diff of the lines want (the file named wantName) and got (named
// gotName): "--- wantName", "+++ gotName", then hunks "@@ -l,n +l,n @@" of lines that start
// with ' ' (in both), '-' (only in want) or '+' (only in got). It returns "" when the lines
// are equal.
func Diff(wantName, gotName string, want, got []string) string {
	ops := editScript(want, got)
	var b strings.Builder
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk: from diffContext lines before this change to diffContext lines after the
		// last change that is at most 2*diffContext equal lines from the one before it.
		start := max(i-diffContext, 0)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j + 1
			} else if j-end >= 2*diffContext {
				break
			}
		}
		end = min(end+diffContext, len(ops))
		if b.Len() == 0 {
			fmt.Fprintf(&b, "--- %s\n+++ %s\n", wantName, gotName)
		}
		hunk(&b, ops[start:end])
		i = end
	}
	return b.String()
}

// edit is one line of an edit script: kind ' ', '-' or '+', the line, and its line numbers
// (from 1) in want and in got, where it has one.
type edit struct {
	kind        byte
	line        string
	wantN, gotN int
}

// hunk writes the hunk of ops.
func hunk(b *strings.Builder, ops []edit) {
	var wantFrom, gotFrom, wantN, gotN int
	for _, op := range ops {
		if op.kind != '+' {
			if wantN == 0 {
				wantFrom = op.wantN
			}
			wantN++
		}
		if op.kind != '-' {
			if gotN == 0 {
				gotFrom = op.gotN
			}
			gotN++
		}
	}
	// An empty side starts after the line before it, as in diff -u.
	if wantN == 0 {
		wantFrom = ops[0].wantN - 1
	}
	if gotN == 0 {
		gotFrom = ops[0].gotN - 1
	}
	fmt.Fprintf(b, "@@ -%d,%d +%d,%d @@\n", wantFrom, wantN, gotFrom, gotN)
	for _, op := range ops {
		b.WriteByte(op.kind)
		b.WriteString(op.line)
		b.WriteByte('\n')
	}
}

// editScript returns the edits from want to got through a longest common subsequence.
func editScript(want, got []string) []edit {
	pre := 0
	for pre < len(want) && pre < len(got) && want[pre] == got[pre] {
		pre++
	}
	suf := 0
	for suf < len(want)-pre && suf < len(got)-pre && want[len(want)-1-suf] == got[len(got)-1-suf] {
		suf++
	}
	w, g := want[pre:len(want)-suf], got[pre:len(got)-suf]
	var ops []edit
	wi, gi := 0, 0 // lines of want and got taken
	take := func(kind byte) {
		switch kind {
		case ' ':
			ops = append(ops, edit{kind, want[wi], wi + 1, gi + 1})
			wi++
			gi++
		case '-':
			ops = append(ops, edit{kind, want[wi], wi + 1, gi + 1})
			wi++
		default:
			ops = append(ops, edit{kind, got[gi], wi + 1, gi + 1})
			gi++
		}
	}
	for range pre {
		take(' ')
	}
	if len(w)*len(g) > maxDiffCells {
		for range w {
			take('-')
		}
		for range g {
			take('+')
		}
	} else {
		// lcs[i][j]: the longest common subsequence of w[i:] and g[j:].
		lcs := make([][]int32, len(w)+1)
		for i := range lcs {
			lcs[i] = make([]int32, len(g)+1)
		}
		for i := len(w) - 1; i >= 0; i-- {
			for j := len(g) - 1; j >= 0; j-- {
				if w[i] == g[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(w) || j < len(g) {
			switch {
			case i < len(w) && j < len(g) && w[i] == g[j]:
				take(' ')
				i++
				j++
			case j == len(g) || (i < len(w) && lcs[i+1][j] >= lcs[i][j+1]):
				take('-')
				i++
			default:
				take('+')
				j++
			}
		}
	}
	for range suf {
		take(' ')
	}
	return ops
}
