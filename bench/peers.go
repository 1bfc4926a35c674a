package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The peers that are not Go run as programs of their own, which speak the children's
// protocol (spec as their one argument, a "BENCH <json>" line on stdout at the end):
// Kafka Streams (bench/kstreams, a jar that Maven builds) and quix-streams (bench/quix, a
// Python program in a virtual environment of its pinned requirements). Each needs a real
// broker: they do not run with -kfake.

// peers is what the bench found it needs to start the peers' programs.
type peers struct {
	kstreamsJar  string // "" when Kafka Streams cannot run: kstreamsWhy says why
	kstreamsWhy  string
	kstreamsHeap string // -Xms and -Xmx
	quixPython   string // "" when quix-streams cannot run: quixWhy says why
	quixScript   string
	quixWhy      string
}

// preparePeers builds the Kafka Streams jar and the quix-streams environment when a contender
// of theirs is to run; what cannot be built is reported in the whys, and its contenders are
// skipped.
func preparePeers(ctx context.Context, kstreams, quix bool, heap string) peers {
	p := peers{kstreamsHeap: heap, kstreamsWhy: "not asked for", quixWhy: "not asked for"}
	if kstreams {
		p.kstreamsJar, p.kstreamsWhy = buildKStreams(ctx)
	}
	if quix {
		p.quixPython, p.quixScript, p.quixWhy = setupQuix(ctx)
	}
	return p
}

// buildKStreams builds bench/kstreams with Maven (offline once its dependencies are cached)
// and returns the jar, or why it could not.
func buildKStreams(ctx context.Context) (jar, why string) {
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Sprintf("Kafka Streams needs %s (Java 17 or newer, and Maven)", tool)
		}
	}
	fmt.Println("building bench/kstreams (mvn package)...")
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-f", filepath.Join("kstreams", "pom.xml"), "-DskipTests", "package")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Sprintf("mvn -f kstreams/pom.xml package: %v", err)
	}
	jar, err := filepath.Abs(filepath.Join("kstreams", "target", "kstreams-bench.jar"))
	if err != nil {
		return "", err.Error()
	}
	if _, err := os.Stat(jar); err != nil {
		return "", fmt.Sprintf("the build left no jar: %v", err)
	}
	return jar, ""
}

// setupQuix creates bench/quix/.venv with the pinned requirements when it does not exist yet,
// and returns its python and the count program, or why it could not.
func setupQuix(ctx context.Context) (python, script, why string) {
	dir, err := filepath.Abs("quix")
	if err != nil {
		return "", "", err.Error()
	}
	python, script = filepath.Join(dir, ".venv", "bin", "python"), filepath.Join(dir, "count.py")
	if _, err := os.Stat(python); err == nil {
		return python, script, ""
	}
	if _, err := exec.LookPath("python3"); err != nil {
		return "", "", "quix-streams needs python3 (3.9 or newer) with venv and pip"
	}
	fmt.Println("installing bench/quix/.venv (pip install -r quix/requirements.txt)...")
	for _, args := range [][]string{
		{"python3", "-m", "venv", filepath.Join(dir, ".venv")},
		{python, "-m", "pip", "install", "-q", "--require-hashes", "--only-binary=:all:", "-r", filepath.Join(dir, "requirements.txt")},
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			_ = os.RemoveAll(filepath.Join(dir, ".venv")) // tried again next time
			return "", "", fmt.Sprintf("%v: %v", args, err)
		}
	}
	return python, script, ""
}

// command returns the command that runs the child of s, with arg, its spec as JSON.
func (b *bench) command(s spec, arg string) *exec.Cmd {
	switch s.Kind {
	case "kstreams":
		return exec.Command("java", "-Xms"+b.peers.kstreamsHeap, "-Xmx"+b.peers.kstreamsHeap, "-jar", b.peers.kstreamsJar, arg)
	case "quix":
		return exec.Command(b.peers.quixPython, b.peers.quixScript, arg)
	}
	return exec.Command(b.self, "-child", arg)
}

// unavailable returns why c cannot run, or "".
func (b *bench) unavailable(c contender) string {
	switch {
	case c.kind == "kstreams" && b.peers.kstreamsJar == "":
		return b.peers.kstreamsWhy
	case c.kind == "quix" && b.peers.quixPython == "":
		return b.peers.quixWhy
	case c.asGuest && b.asModule == "":
		return b.asWhy
	}
	return ""
}

// decodeChangelog returns the word and its count (a decimal) that a record of c's changelog
// holds.
func (c contender) decodeChangelog(k, v []byte) (word, count []byte, err error) {
	if c.kind == "quix" {
		return decodeQuixChangelog(k, v)
	}
	return k, v, nil
}

// decodeQuixChangelog decodes a record of quix-streams' changelog of the count
// (bench/quix/README.md): the key is the message key, "|", and the state key "count"; the
// value is the count as JSON, which for an integer is its decimal digits.
func decodeQuixChangelog(k, v []byte) (word, count []byte, err error) {
	word, ok := bytes.CutSuffix(k, []byte("|count"))
	if !ok {
		return nil, nil, fmt.Errorf("quix changelog key %q: not <word>|count", k)
	}
	return word, v, nil
}
