package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The removal of dead members (config remove_dead_members; the decision note
// docs/decisions/20261203_dead_member_removal.md says why it works this way).
//
// Every instance serves GET /v1/peers/watch on its admin listener: a stream of JSON lines, the
// first naming the instance (its group.instance.id), then one every peerBeatInterval, and, when
// the instance stops on request, a last one with stopping set: its goodbye. Every instance
// keeps such a watch open on each other member of the group, found with DescribeGroups (the
// admin address is in the member's join metadata, memberState). A peer is judged dead only
// when a watch that named it broke without a goodbye and its listener then refused
// deadRefusals connections in a row over at least deadRefusalSpan: a SIGKILLed or crashed
// process's port answers a connection at once with a reset, while a slow or cut network only
// ever times out, which never counts. The judged peer is removed from the group by its
// instance id and member id (LeaveGroup, as Kafka's RemoveMembersFromConsumerGroup), so its
// tasks move at once instead of after the session timeout; under exactly-once its producer is
// fenced first, which aborts the transaction it left open.

const (
	peerWatchPath     = "/v1/peers/watch"
	peerBeatInterval  = time.Second     // a watch's lines, to notice a stalled stream
	peerStallAfter    = 5 * time.Second // no line for this long: the watch is opened again, nothing judged
	peerDialTimeout   = time.Second     // one connection attempt
	peerRetryInterval = 500 * time.Millisecond
	peerRefresh       = 5 * time.Second // DescribeGroups at least this often, for restarted peers' addresses
	deadRefusals      = 3
	deadRefusalSpan   = 200 * time.Millisecond
	deadProbeInterval = 100 * time.Millisecond
)

// peerBeat is a line of a watch.
type peerBeat struct {
	Instance string `json:"instance"`
	Stopping bool   `json:"stopping,omitempty"`
}

// peerWatches serves the watches of the other instances on this one, and says goodbye to them.
type peerWatches struct {
	mu       sync.Mutex
	instance string        // this instance's group.instance.id; set before the listener serves
	leaving  chan struct{} // closed by goodbye
	closed   chan struct{} // closed by close
	once     sync.Once
	closing  sync.Once
}

func newPeerWatches() *peerWatches {
	return &peerWatches{leaving: make(chan struct{}), closed: make(chan struct{})}
}

func (p *peerWatches) setInstance(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.instance = id
}

func (p *peerWatches) instanceID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.instance
}

// goodbye tells every watch that this instance stops on request: its peers leave its tasks
// to it for the session timeout.
func (p *peerWatches) goodbye() { p.once.Do(func() { close(p.leaving) }) }

// close ends every watch (the listener stops); without a goodbye said, the peers judge.
func (p *peerWatches) close() { p.closing.Do(func() { close(p.closed) }) }

// serve is GET /v1/peers/watch.
func (p *peerWatches) serve(w http.ResponseWriter, req *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, errors.New("the response cannot stream"))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	beat := peerBeat{Instance: p.instanceID()}
	send := func() bool {
		if err := enc.Encode(beat); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	if !send() {
		return
	}
	tick := time.NewTicker(peerBeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-p.leaving:
			beat.Stopping = true
			send()
			return
		case <-req.Context().Done():
			return
		case <-p.closed:
			return
		case <-tick.C:
			if !send() {
				return
			}
		}
	}
}

// peer is a member of the group that this instance watches.
type peer struct {
	instance string // group.instance.id
	member   string // member id when it was found
	addr     string // its admin address
}

// peerWatcher watches the other members of the group and removes the dead ones.
type peerWatcher struct {
	log   hclog.Logger
	group string
	self  string // this instance's group.instance.id
	token string // the admin token, sent with each watch
	adm   *kadm.Client
	cl    *kgo.Client // for LeaveGroup
	http  *http.Client
	// fence, under exactly-once, is the transaction timeout with which a dead peer's
	// producer (its transactional id is its instance id) is fenced before its removal: that
	// aborts its open transaction, whose records would hold back every read_committed reader
	// of its partitions until the transaction timed out. 0: at-least-once, no fencing.
	fence    time.Duration
	onRemove func(p peer, reason string)
	onGone   func(p peer) // a watched peer said goodbye

	refreshc chan struct{}
	watching map[string]watched // by instance id; only the run goroutine touches it
}

type watched struct {
	peer
	cancel context.CancelFunc
}

func newPeerWatcher(log hclog.Logger, group, self, token string, cl *kgo.Client) *peerWatcher {
	return &peerWatcher{
		log: log, group: group, self: self, token: token, adm: kadm.NewClient(cl), cl: cl,
		http:     &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: peerDialTimeout}).DialContext, DisableKeepAlives: true}},
		refreshc: make(chan struct{}, 1),
		watching: make(map[string]watched),
	}
}

// refresh asks for the members to be described again (after a rebalance).
func (w *peerWatcher) refresh() {
	select {
	case w.refreshc <- struct{}{}:
	default:
	}
}

// run watches the members until ctx ends.
func (w *peerWatcher) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer func() {
		for _, p := range w.watching {
			p.cancel()
		}
		wg.Wait()
	}()
	tick := time.NewTicker(peerRefresh)
	defer tick.Stop()
	for {
		g, err := w.describe(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Debug("describing the group's members failed; the watches go on", "error", err)
		}
		// Only a stable group's description has the members' metadata (their addresses);
		// during a rebalance the watches go on as they are.
		if err == nil && g.stable {
			w.update(ctx, &wg, g.peers)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.refreshc:
		case <-tick.C:
		}
	}
}

// update starts watching the new peers and peers whose member id or address changed (a new
// process), and stops watching those gone.
func (w *peerWatcher) update(ctx context.Context, wg *sync.WaitGroup, peers map[string]peer) {
	for id, p := range w.watching {
		if np, ok := peers[id]; !ok || np != p.peer {
			p.cancel()
			delete(w.watching, id)
		}
	}
	for id, p := range peers {
		if _, ok := w.watching[id]; ok {
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		w.watching[id] = watched{peer: p, cancel: cancel}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.watch(pctx, p)
		}()
	}
}

// groupView is what DescribeGroups says of the other static members of the group.
type groupView struct {
	stable  bool
	members map[string]string // instance id -> member id
	peers   map[string]peer   // those that published an admin address (stable only)
}

// describe describes the group.
func (w *peerWatcher) describe(ctx context.Context) (groupView, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	gs, err := w.adm.DescribeGroups(ctx, w.group)
	if err != nil {
		return groupView{}, err
	}
	g, ok := gs[w.group]
	if !ok {
		return groupView{}, fmt.Errorf("group %s not described", w.group)
	}
	if g.Err != nil {
		return groupView{}, g.Err
	}
	v := groupView{stable: g.State == "Stable", members: make(map[string]string), peers: make(map[string]peer)}
	for _, m := range g.Members {
		if m.InstanceID == nil || *m.InstanceID == w.self {
			continue
		}
		v.members[*m.InstanceID] = m.MemberID
		meta, ok := m.Join.AsConsumer()
		if !ok {
			continue
		}
		st, err := decodeMemberState(meta.UserData)
		if err != nil || st.admin == "" {
			continue // another version, or no admin listener: the session timeout decides
		}
		v.peers[*m.InstanceID] = peer{instance: *m.InstanceID, member: m.MemberID, addr: st.admin}
	}
	return v, nil
}

// watchEnd is how a watch ended.
type watchEnd struct {
	named    bool // the stream named the peer: it was the peer's listener
	goodbye  bool // the peer said it stops on request
	mismatch string
	refused  bool // the listener answered with an HTTP error (a wrong token, an older statehost)
	err      error
}

// watch watches p until ctx ends or p is removed.
func (w *peerWatcher) watch(ctx context.Context, p peer) {
	log := w.log.With("peer", p.instance, "addr", p.addr)
	named, stopping, warned := false, false, false
	var broke error // how the last watch that named p ended without a goodbye
	for ctx.Err() == nil {
		end := w.stream(ctx, p)
		switch {
		case ctx.Err() != nil:
			return
		case end.refused && !warned:
			// Every instance of an application shares one admin token (config admin).
			log.Warn("a peer refuses to be watched; it is not judged while it does", "error", end.err)
			warned = true
		case end.mismatch != "":
			// Another process answers at that address: the address is not p's (loopback
			// addresses of other machines, a port taken again). p is never judged.
			log.Warn("a peer's admin address answers as another instance; it is not watched", "answered", end.mismatch)
			<-ctx.Done()
			return
		case end.named && end.goodbye:
			named, stopping = true, true
			log.Info("peer stopping on request; its tasks wait for it for the session timeout")
			if w.onGone != nil {
				w.onGone(p)
			}
		case end.named:
			named, stopping, broke = true, false, end.err
		}
		if !named || stopping {
			// Never reached yet (it may start later), or it said goodbye: no judgement until
			// a watch names it again.
			if !sleepCtx(ctx, peerRetryInterval) {
				return
			}
			continue
		}
		if reason, dead := probeDead(ctx, p.addr); dead {
			if w.remove(ctx, p, log, fmt.Sprintf("its watch broke (%v) and %s", broke, reason)) {
				return
			}
		}
		if !sleepCtx(ctx, deadProbeInterval) {
			return
		}
	}
}

// stream opens a watch on p and reads it until it ends.
func (w *peerWatcher) stream(ctx context.Context, p peer) watchEnd {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, "http://"+p.addr+peerWatchPath, nil)
	if err != nil {
		return watchEnd{err: err}
	}
	if w.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.token)
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return watchEnd{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return watchEnd{refused: true, err: fmt.Errorf("GET %s: %s", peerWatchPath, resp.Status)}
	}
	// A line at least every peerBeatInterval; none for peerStallAfter ends the watch.
	stall := time.AfterFunc(peerStallAfter, cancel)
	defer stall.Stop()
	sc := bufio.NewScanner(resp.Body)
	end := watchEnd{}
	for sc.Scan() {
		stall.Reset(peerStallAfter)
		var b peerBeat
		if err := json.Unmarshal(sc.Bytes(), &b); err != nil {
			return watchEnd{named: end.named, err: fmt.Errorf("a line of the watch: %w", err)}
		}
		if b.Instance != p.instance {
			return watchEnd{mismatch: b.Instance}
		}
		end.named = true
		if b.Stopping {
			end.goodbye = true
			return end
		}
	}
	end.err = sc.Err()
	if end.err == nil {
		end.err = errors.New("closed without a goodbye")
	}
	return end
}

// probeDead connects to addr until a connection is accepted or times out (alive, or not
// known: false), or deadRefusals in a row, over deadRefusalSpan at least, are refused (dead:
// true, and what was seen).
func probeDead(ctx context.Context, addr string) (string, bool) {
	d := net.Dialer{Timeout: peerDialTimeout}
	var first time.Time
	for n := 0; ; {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return "", false
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return "", false // a timeout, an unreachable network: not a judgement
		}
		if n == 0 {
			first = time.Now()
		}
		n++
		if span := time.Since(first); n >= deadRefusals && span >= deadRefusalSpan {
			return fmt.Sprintf("its admin listener refused %d connections in a row over %v", n, span.Round(time.Millisecond)), true
		}
		if !sleepCtx(ctx, deadProbeInterval) {
			return "", false
		}
	}
}

// remove removes p from the group if it is still the member that was watched; it reports
// whether the watch is over (p removed, or replaced by another process of the same id).
func (w *peerWatcher) remove(ctx context.Context, p peer, log hclog.Logger, reason string) bool {
	g, err := w.describe(ctx)
	if err != nil {
		log.Warn("a dead peer is not removed: the group could not be described", "error", err)
		return false
	}
	if member, ok := g.members[p.instance]; !ok || member != p.member {
		return true // gone, or a new process joined in its name: the next refresh watches it
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if w.fence > 0 {
		if err := w.fenceProducer(rctx, p.instance); err != nil {
			log.Warn("a dead peer's producer could not be fenced; its open transaction times out", "error", err)
		}
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = w.group
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = p.member
	m.InstanceID = kmsg.StringPtr(p.instance)
	m.Reason = kmsg.StringPtr("statehost: " + w.self + " judged it dead: " + reason)
	req.Members = append(req.Members, m)
	resp, err := req.RequestWith(rctx, w.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil && len(resp.Members) > 0 {
		err = kerr.ErrorForCode(resp.Members[0].ErrorCode)
	}
	switch {
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.FencedInstanceID):
		return true // removed by another instance already, or replaced by a new process
	case err != nil:
		log.Warn("removing a dead peer from the group failed; the session timeout will", "error", err)
		return false
	}
	log.Info("removed a dead peer from the group", "member", p.member, "reason", reason)
	if w.onRemove != nil {
		w.onRemove(p, reason)
	}
	return true
}

// fenceProducer initializes a producer id for the transactional id: the coordinator aborts
// the transaction that the previous holder left open, and fences it (a new epoch).
func (w *peerWatcher) fenceProducer(ctx context.Context, transactionalID string) error {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr(transactionalID)
	req.TransactionTimeoutMillis = int32(w.fence.Milliseconds())
	for {
		resp, err := req.RequestWith(ctx, w.cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		// The abort of the open transaction is under way: asked again, the coordinator
		// answers once it completed.
		if !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// sleepCtx sleeps for d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// watchPeers starts watching the other members (with remove_dead_members) until ctx ends or
// the returned function is called.
func (r *Runtime) watchPeers(ctx context.Context, self string) (stop func()) {
	if !r.cfg.RemoveDeadMembers {
		return func() {}
	}
	w := newPeerWatcher(r.log.Named("peers"), r.cfg.ApplicationID, self, r.cfg.Admin.Token, r.kafka.prodCl)
	if r.eos != nil {
		w.fence = transactionTimeout(r.cfg.CommitInterval)
	}
	w.onRemove = func(p peer, reason string) {
		r.metrics.membersRemoved.Inc()
		r.emit(Event{Kind: EventMemberRemoved, Member: p.instance, Addr: p.addr, Reason: reason})
	}
	w.onGone = func(p peer) { r.emit(Event{Kind: EventPeerStopping, Member: p.instance, Addr: p.addr}) }
	r.watcher.Store(w)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx)
	}()
	return func() {
		r.watcher.Store(nil)
		cancel()
		<-done
	}
}
