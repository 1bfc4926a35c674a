package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// apacheKafka is a one-node Apache Kafka cluster that scripts/kafka runs for the bench: the
// broker every contender meets, in a process of its own, whatever language the contender is
// written in.
type apacheKafka struct {
	script string // scripts/kafka
	dir    string
	addr   string
	pid    int // the broker's JVM, whose CPU time the bench reads
}

// startKafka starts a one-node cluster in dir with scripts/kafka (Java 17 or newer, and
// Maven the first time, to fetch the broker's jars). The bench runs from the bench directory.
func startKafka(ctx context.Context, dir string) (*apacheKafka, error) {
	script, err := filepath.Abs(filepath.Join("..", "scripts", "kafka"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("bench: scripts/kafka not found (run the bench from the bench directory): %w", err)
	}
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("bench: Apache Kafka needs %s (Java 17 or newer, and Maven for the first start), or run with -kfake: %w", tool, err)
		}
	}
	k := &apacheKafka{script: script, dir: dir}
	cmd := exec.CommandContext(ctx, script, "up", "--dir", dir, "--nodes", "1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		k.stop()
		return nil, fmt.Errorf("bench: scripts/kafka up --dir %s: %w", dir, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	k.addr = strings.TrimSpace(lines[len(lines)-1])
	pid, err := os.ReadFile(filepath.Join(dir, "node1", "kafka.pid"))
	if err == nil {
		k.pid, err = strconv.Atoi(strings.TrimSpace(string(pid)))
	}
	if err != nil {
		k.stop()
		return nil, fmt.Errorf("bench: the broker's pid in %s: %w", dir, err)
	}
	return k, nil
}

// stop stops the cluster and waits for its node to exit.
func (k *apacheKafka) stop() {
	cmd := exec.Command(k.script, "down", "--dir", k.dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	_ = cmd.Run()
}
