package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/kafkacluster"
)

// The soak test runs the word count with a third processor, the guard (the poison test
// plugin, with on_error = "dead_letter", on the same input), as two instances on one
// `statehost broker` process, for a given duration while keyed sentences flow in, about one
// record a second of them a poison record that the guard fails on (in six ways: an error, a
// panic, an exit, a deletion then an error, an error before anything, running out of
// memory). Meanwhile faults come one at a time at random moments, each after the application
// has recovered from the previous one (committed new input on every partition): an
// instance SIGKILLed and started again, the broker stopped (SIGTERM) and started again on
// the same address and data directory a few seconds later (on Apache Kafka, with
// STATEHOST_TEST_KAFKA=1: a node of the 3-node cluster SIGKILLed and started again on its data
// a few seconds later), a reload of count, between plugins/count and countv2 (the same
// counts), through `statehost deploy` to every instance or by writing the module file that
// the instances watch, and a migrating deploy: countjson (reversible) deployed to every
// instance, its store migrating to JSON {"n":5}, rolled back with `statehost rollback` the next
// time (soak_migrate_test.go). At the end the input stops, the application drains, and the
// final state is compared with the reference computed from the input topic (count's and
// countjson's forms alike): the output topics, the changelog and the stores (read through
// the admin API, as `statehost query` reads them, which is spot-checked too), and the
// dead-letter topic.
// Under exactly_once every difference must be zero, each word's outputs must be its counts
// 1, 2, ..., n in order, and every poison record must be dead-lettered exactly once; under
// at_least_once nothing may be under-counted nor missing, and over-counts are reported.
//
// It prints a summary, also as "SOAK name=value" lines, and runs only with -soak:
//
//	go test ./cmd/statehost -run TestSoak -soak -v -soak.duration 2m -soak.guarantee exactly_once
//
// or scripts/soak 2m exactly_once (STATEHOST_TEST_KAFKA=1 scripts/soak 10m: on a 3-node
// Apache Kafka cluster). -soak.seed replays the same faults, gaps and poison
// records (the moments only: what the application was doing then depends on the machine).
var (
	soakRun         = flag.Bool("soak", false, "run the soak test (see -soak.duration)")
	soakDuration    = flag.Duration("soak.duration", 2*time.Minute, "soak test: how long input flows and faults happen")
	soakGuaranteeF  = flag.String("soak.guarantee", "exactly_once", "soak test: processing_guarantee, exactly_once or at_least_once")
	soakSeedF       = flag.Uint64("soak.seed", 0, "soak test: seed of the faults and poison records (0: from the clock, printed)")
	soakInstancesF  = flag.Int("soak.instances", 2, "soak test: how many instances run the application")
	soakLogsF       = flag.String("soak.logs", "", "soak test: directory for the logs of every process (default: a new one under $TMPDIR, printed)")
	soakBrokerKillF = flag.Bool("soak.broker-kill", false, "soak test, at_least_once only: SIGKILL the broker in half of its restarts")
	soakMigratesF   = flag.Int("soak.migrates", 1, "soak test: how many migrating deploys (and rollbacks) each deck of faults holds")
)

// The faults' timing.
const (
	soakMinGap       = 2 * time.Second  // between the recovery from a fault and the next fault: from
	soakMaxGap       = 8 * time.Second  // to
	soakMaxRestart   = 3 * time.Second  // a killed instance starts again after up to this
	soakMinDown      = 2 * time.Second  // the broker stays away from
	soakMaxDown      = 6 * time.Second  // to
	soakRecoverLimit = 2 * time.Minute  // a fault after which no progress comes within this fails the test
	soakSwitchLimit  = 60 * time.Second // every instance runs a reloaded module within this
)

// soak is one soak run.
type soak struct {
	t          *testing.T
	bin        string
	dir        string
	logDir     string
	guarantee  string
	exact      bool
	rng        *rand.Rand
	addr       string
	brokerDir  string
	broker     *brokerProcess        // on statehost broker
	cluster    *kafkacluster.Cluster // instead, with STATEHOST_TEST_KAFKA=1
	brokers    []*brokerProcess      // every incarnation, for the logs
	adm        *kadm.Client
	mods       map[string]string
	versions   [2]string // count v1 and v2
	current    int       // the version of count the module file holds (or held before countjson)
	reversible string    // countjson's reversible variant, which the fault "migrate" deploys
	jsonRuns   bool      // countjson runs (after a "migrate" fault, until the next one)
	ins        []*soakInstance
	began      time.Time
	faults     []soakFault
	sum        soakSummary
}

// soakFault is one fault and how long the application took to commit new input on every
// partition after it began.
type soakFault struct {
	n        int
	kind     string // kill, broker, deploy, file, migrate
	detail   string
	at       time.Duration
	recovery time.Duration
}

// soakSummary is the summary, in the order its values were set.
type soakSummary struct {
	names []string
	vals  map[string]string
}

func (m *soakSummary) set(name string, v any) {
	if m.vals == nil {
		m.vals = map[string]string{}
	}
	if _, ok := m.vals[name]; !ok {
		m.names = append(m.names, name)
	}
	m.vals[name] = fmt.Sprint(v)
}

func TestSoak(t *testing.T) {
	if !*soakRun {
		t.Skip("the soak test: run with -soak (-soak.duration, -soak.guarantee; scripts/soak)")
	}
	g := *soakGuaranteeF
	if g != "exactly_once" && g != "at_least_once" {
		t.Fatalf("-soak.guarantee %q: want exactly_once or at_least_once", g)
	}
	if *soakMigratesF < 0 {
		t.Fatalf("-soak.migrates %d: want 0 or more", *soakMigratesF)
	}
	if *soakInstancesF < 1 {
		t.Fatalf("-soak.instances %d: want at least 1", *soakInstancesF)
	}
	seed := *soakSeedF
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	s := &soak{t: t, guarantee: g, exact: g == "exactly_once", rng: rand.New(rand.NewPCG(seed, 1)), dir: t.TempDir()}
	s.logDir = *soakLogsF
	if s.logDir == "" {
		d, err := os.MkdirTemp("", "statehost-soak-")
		if err != nil {
			t.Fatal(err)
		}
		s.logDir = d
	} else if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.sum.set("guarantee", g)
	s.sum.set("duration", soakDuration.String())
	s.sum.set("seed", seed)
	s.sum.set("instances", *soakInstancesF)
	t.Cleanup(s.report) // registered first: runs last, after the processes are gone
	fmt.Printf("soak: %s for %v with %d instances, seed %d (-soak.seed=%d repeats the faults); logs in %s\n",
		g, *soakDuration, *soakInstancesF, seed, seed, s.logDir)

	s.bin = buildBinary(t)
	s.mods, s.versions, s.reversible = soakModules(t, s.dir)
	if kafkacluster.Requested() {
		b := startBroker(t, brokerOptions{})
		s.cluster, s.addr = b.cluster, b.addr
		s.sum.set("broker", fmt.Sprintf("Apache Kafka, %d nodes", s.cluster.Nodes()))
	} else {
		s.brokerDir, s.addr = filepath.Join(s.dir, "broker"), freeAddr(t)
		s.startBroker()
		s.sum.set("broker", "statehost broker (kfake)")
	}
	cl := testClient(t, s.addr)
	t.Cleanup(cl.Close)
	s.adm = kadm.NewClient(cl)
	for i := range *soakInstancesF {
		in := &soakInstance{name: string(rune('a' + i)), dir: filepath.Join(s.dir, string(rune('a'+i)))}
		s.ins = append(s.ins, in)
		s.start(in)
	}
	s.waitTasksRunning(2 * time.Minute)

	n := int(soakDuration.Seconds()*soakBatch/soakEvery.Seconds()*1.2) + 1000
	prod := startSoakProducer(t, s.addr, seed, n)
	s.began = time.Now()
	s.faultLoop(s.began.Add(*soakDuration))
	prod.stop()
	good, poison := soakProduced(prod)
	errs, last := prod.failures()
	retried := ""
	if errs > 0 {
		retried = fmt.Sprintf("; %d produce attempts failed and were tried again, the last with: %v", errs, last)
	}
	fmt.Printf("soak: input stopped after %v: %d good and %d poison records acknowledged%s\n",
		time.Since(s.began).Round(time.Millisecond), good, poison, retried)
	s.sum.set("produce_retries", errs)

	drain := time.Now()
	crashWaitProcessed(t, s.addr, e2eApp, 3*time.Minute, soakSentences, e2eRepart)
	for _, topic := range []string{soakOutput, e2eChangelog, soakGuardOut, soakGuardLog, soakGuardDLQ} {
		crashWaitStable(t, s.addr, topic, 70*time.Second)
	}
	s.sum.set("drain_seconds", fmt.Sprintf("%.1f", time.Since(drain).Seconds()))
	fmt.Printf("soak: drained in %v\n", time.Since(drain).Round(time.Millisecond))
	s.checkAlive()

	s.check()
	for _, in := range s.ins {
		if code := in.proc.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", in.proc.name, code)
		}
	}
}

// faultLoop makes faults until the deadline, one at a time, each after the application
// recovered from the previous one.
func (s *soak) faultLoop(deadline time.Time) {
	var deck []string
	for {
		gap := soakMinGap + time.Duration(s.rng.Int64N(int64(soakMaxGap-soakMinGap)))
		// The kinds come from a shuffled deck, so that every kind comes in each 11 faults (and
		// -soak.migrates more); the kind and its parameters are drawn now, so that a seed
		// repeats them. A card that cannot come now (soakEligible) waits in the deck.
		i := slices.IndexFunc(deck, s.soakEligible)
		for i < 0 {
			more := []string{"kill", "kill", "kill", "kill", "broker", "broker", "broker", "deploy", "deploy", "file", "file"}
			for range *soakMigratesF {
				more = append(more, "migrate")
			}
			s.rng.Shuffle(len(more), func(i, j int) { more[i], more[j] = more[j], more[i] })
			deck = append(deck, more...)
			i = slices.IndexFunc(deck, s.soakEligible)
		}
		kind := deck[i]
		deck = slices.Delete(deck, i, i+1)
		p1, p2 := s.rng.Int64(), s.rng.Int64()
		if time.Now().Add(gap).After(deadline) {
			s.sleep(time.Until(deadline))
			return
		}
		s.sleep(gap)
		f := soakFault{n: len(s.faults) + 1, kind: kind, at: time.Since(s.began)}
		began := time.Now()
		switch kind {
		case "kill":
			in := s.killTarget(p1)
			after := time.Duration(p2 % int64(soakMaxRestart))
			in.proc.killNow(s.t)
			s.sleep(after)
			s.start(in)
			f.detail = fmt.Sprintf("SIGKILL %s, started again after %v", in.name, after.Round(time.Millisecond))
		case "broker":
			down := soakMinDown + time.Duration(p1%int64(soakMaxDown-soakMinDown))
			if s.cluster != nil {
				f.detail = s.killKafka(p2, down)
				break
			}
			sig := syscall.SIGTERM
			if !s.exact && *soakBrokerKillF && p2%2 == 0 {
				sig = syscall.SIGKILL
			}
			s.broker.halt(s.t, sig)
			s.sleep(down)
			s.startBroker()
			f.detail = fmt.Sprintf("%v, away for %v", sig, down.Round(time.Millisecond))
		case "deploy", "file":
			f.detail = s.reload(kind == "deploy")
		case "migrate":
			f.detail = s.migrate()
		}
		fmt.Printf("soak: fault %d at %v: %s: %s\n", f.n, f.at.Round(time.Second), f.kind, f.detail)
		s.waitProgress(fmt.Sprintf("fault %d (%s: %s)", f.n, f.kind, f.detail))
		f.recovery = time.Since(began)
		fmt.Printf("soak: fault %d: new input committed on every partition %v after the fault began\n", f.n, f.recovery.Round(time.Millisecond))
		s.faults = append(s.faults, f)
	}
}

// killKafka SIGKILLs a node of the Kafka cluster, node 2 or 3 (by pick; node 1 is the
// bootstrap of every client), or, on a cluster of 1, the cluster, and starts it again after
// down.
func (s *soak) killKafka(pick int64, down time.Duration) string {
	if s.cluster.Nodes() == 1 {
		s.cluster.KillAll(s.t)
		s.sleep(down)
		s.cluster.StartAll(s.t)
		return fmt.Sprintf("Kafka's only node SIGKILLed, started again after %v", down.Round(time.Millisecond))
	}
	n := 2 + int(uint64(pick)%2)
	s.cluster.Kill(s.t, n)
	s.sleep(down)
	s.cluster.StartNode(s.t, n)
	return fmt.Sprintf("Kafka node %d SIGKILLed, started again after %v", n, down.Round(time.Millisecond))
}

// startBroker starts (again) the broker on its address and data directory.
func (s *soak) startBroker() {
	s.broker = startBroker(s.t, brokerOptions{kfake: true, dir: s.brokerDir, addr: s.addr})
	s.brokers = append(s.brokers, s.broker)
}

// reload switches count to its other version: with statehost deploy to every instance, then
// written over the module file (as README says to), or only written over the module file
// (the instances' watchers deploy it). It waits until every instance runs it on every running
// task (awaitModule).
func (s *soak) reload(viaDeploy bool) string {
	t := s.t
	next := 1 - s.current
	file := s.versions[next]
	how := "written over the module file"
	if viaDeploy {
		how = "statehost deploy to every instance"
		for _, in := range s.ins {
			code, out := soakCLI(t.Context(), s.bin, "deploy", "--config", in.cli, "--processor", "count", file)
			if code != 0 || !strings.Contains(out, "processor count: ") {
				t.Errorf("statehost deploy of count v%d to %s: exit %d: %s", next+1, in.proc.name, code, out)
			}
		}
	}
	soakCopy(t, file, s.mods["count"])
	s.current = next
	return s.awaitModule(file, fmt.Sprintf("count v%d, %s", next+1, how))
}

// checkAlive fails the test if an instance exited on its own.
func (s *soak) checkAlive() {
	s.t.Helper()
	for _, in := range s.ins {
		if !in.down && in.proc.exited() && in.proc.killedAt.IsZero() {
			s.t.Fatalf("%s exited %d on its own; its last error: %s", in.proc.name, in.proc.code, lastError(in.proc.appProcess))
		}
	}
}

// sleep sleeps d, checking that the instances live.
func (s *soak) sleep(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		s.checkAlive()
		time.Sleep(min(200*time.Millisecond, time.Until(end)))
	}
}

// waitTasksRunning waits until every task runs on one instance (of those not stopped on
// purpose).
func (s *soak) waitTasksRunning(timeout time.Duration) {
	t := s.t
	deadline := time.Now().Add(timeout)
	for {
		s.checkAlive()
		running, other := 0, 0
		for _, in := range s.ins {
			if in.down {
				continue
			}
			for _, ts := range in.proc.status(t).Tasks {
				switch ts.State {
				case "running":
					running++
				case "restoring":
					other++
				}
			}
		}
		if running == soakTasks && other == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks running (%d restoring) after %v", running, soakTasks, other, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitProgress waits until the group has committed new input on every partition of the
// sentences and repartition topics that has some, after the moment it is called; it fails
// the test after soakRecoverLimit.
func (s *soak) waitProgress(what string) {
	t := s.t
	deadline := time.Now().Add(soakRecoverLimit)
	var snap map[string]int64
	for snap == nil {
		s.checkAlive()
		c, _, err := soakCommitted(t.Context(), s.adm)
		if err == nil {
			snap = c
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: the group's offsets cannot be read: %v", what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	for {
		s.checkAlive()
		c, ends, err := soakCommitted(t.Context(), s.adm)
		var behind []string
		if err == nil {
			for _, id := range sortedIDs(ends) {
				// A partition with new input beyond the committed offset (under exactly_once the
				// end counts transaction markers: hence the margin) must move.
				if ends[id] > snap[id]+2 && c[id] <= snap[id] {
					behind = append(behind, fmt.Sprintf("%s committed %d, end %d", id, c[id], ends[id]))
				}
			}
			if len(behind) == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: no new input committed within %v: %v %v", what, soakRecoverLimit, behind, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// check compares the final state with the reference computed from the input topic, and
// fills the summary.
func (s *soak) check() {
	t := s.t
	in := readSoakInput(t, s.addr)
	sum := &s.sum
	sum.set("records_in", in.good+in.poison)
	sum.set("records_in_good", in.good)
	sum.set("records_in_poison", in.poison)
	sum.set("words_in", wordCount(in.words))
	sum.set("distinct_words", len(in.words))

	// The word count: its output, its changelog and its store.
	outSeqs, outRecords, outV2 := soakSeqs(t, s.addr, soakOutput)
	sum.set("records_out", outRecords)
	sum.set("records_out_v2", outV2)
	admin := s.ins[0].proc.admin
	diffs := map[string]soakDiff{
		"diff_output":    diffCounts(latestOf(outSeqs), in.words),
		"diff_changelog": diffCounts(soakChangelogLatest(t, s.addr, e2eChangelog), in.words),
	}
	// The stores are read once their commits have been applied: a few tries.
	var store, guardStore map[string]int
	var guardTotals map[int32]int
	for try := 0; ; try++ {
		parts, err := soakRange(t, admin, "counts", crashPartition)
		if err != nil {
			t.Fatal(err)
		}
		store = countsOf(t, "store counts", parts, nil)
		gparts, err := soakRange(t, admin, soakGuardStore, 4)
		if err != nil {
			t.Fatal(err)
		}
		guardStore = countsOf(t, "store "+soakGuardStore, gparts, func(k string) bool { return k == "#total" })
		guardTotals = map[int32]int{}
		for p, entries := range gparts {
			var n int
			fmt.Sscan(entries["#total"], &n)
			guardTotals[p] = n
		}
		ok := diffCounts(store, in.words).sum == 0 && diffCounts(guardStore, in.guard).sum == 0
		if ok || !s.exact && diffCounts(store, in.words).under == 0 || try == 10 {
			break
		}
		time.Sleep(time.Second)
	}
	diffs["diff_store"] = diffCounts(store, in.words)

	// The guard: its output, its store (each key and each task's #total) and its dead letters.
	gSeqs, gRecords, _ := soakSeqs(t, s.addr, soakGuardOut)
	sum.set("guard_records_out", gRecords)
	diffs["diff_guard_output"] = diffCounts(latestOf(gSeqs), in.guard)
	diffs["diff_guard_store"] = diffCounts(guardStore, in.guard)
	wantTotals, gotTotals := map[string]int{}, map[string]int{}
	for p, n := range in.guardTotal {
		wantTotals[fmt.Sprint(p)] = n
	}
	for p, n := range guardTotals {
		if n > 0 {
			gotTotals[fmt.Sprint(p)] = n
		}
	}
	diffs["diff_guard_total"] = diffCounts(gotTotals, wantTotals)

	dl := s.deadLetters(in)
	sum.set("dead_letters", dl.records)
	sum.set("dlq_missing", dl.missing)
	sum.set("dlq_duplicates", dl.dups)
	sum.set("dlq_stray", dl.stray)

	kinds := map[string]int{}
	for _, f := range s.faults {
		kinds[f.kind]++
	}
	sum.set("faults_kill", kinds["kill"])
	sum.set("faults_broker_restart", kinds["broker"])
	sum.set("faults_reload_deploy", kinds["deploy"])
	sum.set("faults_reload_file", kinds["file"])
	sum.set("faults_migrate", kinds["migrate"])
	sum.set("faults_poison_records", in.poison)
	sum.set("faults_survived", len(s.faults)+in.poison)
	for _, kind := range []string{"kill", "broker", "deploy", "file", "migrate"} {
		var worst time.Duration
		for _, f := range s.faults {
			if f.kind == kind {
				worst = max(worst, f.recovery)
			}
		}
		sum.set("recovery_max_"+kind, fmt.Sprintf("%.1fs", worst.Seconds()))
	}

	for _, name := range []string{"diff_output", "diff_changelog", "diff_store", "diff_guard_output", "diff_guard_store", "diff_guard_total"} {
		d := diffs[name]
		sum.set(name, d.sum)
		if !s.exact {
			sum.set(strings.Replace(name, "diff_", "over_keys_", 1), d.over)
		}
		switch {
		case s.exact && d.sum != 0:
			t.Errorf("%s: the final state differs from the reference by %s", name, d)
		case d.under != 0:
			t.Errorf("%s: under-counted: %s", name, d)
		case d.sum != 0:
			t.Logf("%s (at_least_once): %s", name, d)
		}
	}
	outBreaks, outEx := sequenceBreaks(outSeqs)
	gBreaks, gEx := sequenceBreaks(gSeqs)
	sum.set("output_sequence_breaks", outBreaks)
	sum.set("guard_sequence_breaks", gBreaks)
	switch {
	case s.exact && outBreaks+gBreaks > 0:
		t.Errorf("exactly_once: the outputs of %d words and %d guard keys are not exactly 1, 2, ..., n: e.g. %s %s", outBreaks, gBreaks, outEx, gEx)
	case outBreaks+gBreaks > 0:
		t.Logf("at_least_once: the outputs of %d words and %d guard keys are not exactly 1, 2, ..., n (records applied twice to the output): e.g. %s %s", outBreaks, gBreaks, outEx, gEx)
	}
	if dl.missing > 0 || dl.stray > 0 || s.exact && dl.dups > 0 {
		t.Errorf("dead letters: %d poison records missing, %d twice or more, %d records that are not poison; e.g. %s",
			dl.missing, dl.dups, dl.stray, dl.example)
	}
	s.queryChecks(in, store, guardStore)
	s.logCounts()
}

// soakDLQ is what the dead-letter topic holds against the poison records of the input.
type soakDLQ struct {
	records, missing, dups, stray int
	example                       string
}

func (s *soak) deadLetters(in soakInput) soakDLQ {
	t := s.t
	var d soakDLQ
	topics, err := s.adm.ListTopics(t.Context(), soakGuardDLQ)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	if topics.Has(soakGuardDLQ) {
		for _, r := range readChecked(t, s.addr, soakGuardDLQ, true) {
			d.records++
			id := soakHeader(r, runtime.HeaderPartition) + "@" + soakHeader(r, runtime.HeaderOffset)
			cmd, ok := in.poisons[id]
			switch {
			case !ok || soakHeader(r, runtime.HeaderTopic) != soakSentences:
				d.stray++
				d.example = fmt.Sprintf("a dead letter of %s %s that is not a poison record: %q", soakHeader(r, runtime.HeaderTopic), id, r.Value)
			case string(r.Value) != cmd:
				d.stray++
				d.example = fmt.Sprintf("the dead letter of %s has the value %q, the record %q", id, r.Value, cmd)
			}
			seen[id]++
		}
	}
	for id := range in.poisons {
		switch n := seen[id]; {
		case n == 0:
			d.missing++
			d.example = fmt.Sprintf("poison record %s (%s) is not in %s", id, in.poisons[id], soakGuardDLQ)
		case n > 1:
			d.dups++
			if s.exact {
				d.example = fmt.Sprintf("poison record %s (%s) is in %s %d times", id, in.poisons[id], soakGuardDLQ, n)
			}
		}
	}
	return d
}

// queryChecks reads a few words and keys with statehost query and compares them with the
// stores as the range reads found them.
func (s *soak) queryChecks(in soakInput, store, guardStore map[string]int) {
	t := s.t
	words := crashSortedKeys(in.words)
	keys := crashSortedKeys(in.guard)
	type q struct{ store, key string }
	var qs []q
	for range 5 {
		qs = append(qs, q{"counts", words[s.rng.IntN(len(words))]})
	}
	for range 3 {
		qs = append(qs, q{soakGuardStore, keys[s.rng.IntN(len(keys))]})
	}
	bad := 0
	for i, x := range qs {
		in := s.ins[i%len(s.ins)]
		code, out := soakCLI(t.Context(), s.bin, "query", "--config", in.cli, x.store, x.key)
		want := store[x.key]
		if x.store == soakGuardStore {
			want = guardStore[x.key]
		}
		if got, ok := soakCount(out); code != 0 || !ok || got != want {
			bad++
			t.Errorf("statehost query through %s %s %q: exit %d, %q; the range read %d", in.proc.name, x.store, x.key, code, out, want)
		}
	}
	s.sum.set("query_checks", len(qs))
	s.sum.set("query_mismatches", bad)
}

// logCounts counts the lines the instances logged at warn and error level, and their starts.
func (s *soak) logCounts() {
	warns, errs, runs := 0, 0, 0
	msgs := map[string]int{}
	for _, in := range s.ins {
		runs += in.runs
		for _, p := range in.procs {
			for _, l := range p.logLines() {
				switch l.Level {
				case "warn":
					warns++
				case "error":
					errs++
					msgs[l.Message]++
				}
			}
		}
	}
	s.sum.set("instance_starts", runs)
	s.sum.set("log_warnings", warns)
	s.sum.set("log_errors", errs)
	if len(msgs) > 0 {
		s.t.Logf("error lines by message: %v", msgs)
	}
}

// report writes the logs of every process and prints the summary.
func (s *soak) report() {
	t := s.t
	for _, in := range s.ins {
		for _, p := range in.procs {
			_ = os.WriteFile(filepath.Join(s.logDir, p.name+".log"), []byte(p.stderr.String()), 0o644)
		}
	}
	for i, b := range s.brokers {
		_ = os.WriteFile(filepath.Join(s.logDir, fmt.Sprintf("broker.%d.log", i+1)), []byte(b.log.String()), 0o644)
	}
	var faults strings.Builder
	for _, f := range s.faults {
		fmt.Fprintf(&faults, "  %3d at %6v  %-6s  %s; recovered in %v\n", f.n, f.at.Round(time.Second), f.kind, f.detail, f.recovery.Round(time.Millisecond))
	}
	_ = os.WriteFile(filepath.Join(s.logDir, "faults.txt"), []byte(faults.String()), 0o644)
	s.sum.set("logs", s.logDir)
	result := "PASS"
	if t.Failed() {
		result = "FAIL"
	}
	s.sum.set("result", result)
	var b strings.Builder
	fmt.Fprintf(&b, "soak summary (%d faults):\n%s", len(s.faults), faults.String())
	for _, name := range s.sum.names {
		fmt.Fprintf(&b, "SOAK %s=%s\n", name, s.sum.vals[name])
	}
	fmt.Print(b.String())
}
