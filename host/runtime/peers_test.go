package runtime

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestProbeDead probes a listening port (alive) and a port nothing listens on any more
// (dead, after deadRefusals refusals over deadRefusalSpan at least).
func TestProbeDead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if reason, dead := probeDead(t.Context(), addr); dead {
		t.Fatalf("a listening port judged dead: %s", reason)
	}
	ln.Close()
	began := time.Now()
	reason, dead := probeDead(t.Context(), addr)
	if !dead {
		t.Fatalf("a closed port not judged dead")
	}
	if took := time.Since(began); took < deadRefusalSpan {
		t.Errorf("judged dead after %v, want the refusals over %v at least", took, deadRefusalSpan)
	}
	t.Logf("closed port: %s", reason)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, dead := probeDead(ctx, addr); dead {
		t.Errorf("judged dead after the context ended")
	}
}

// TestPeerWatchStream watches a peer's real admin endpoint: it names the peer, and ends with
// a goodbye on a requested stop, without one when the listener closes, and as a mismatch when
// another instance answers; behind admin.token it needs the token, and is refused without.
func TestPeerWatchStream(t *testing.T) {
	serve := func(t *testing.T, instance string, token ...string) (*peerWatches, string) {
		pw := newPeerWatches()
		pw.setInstance(instance)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET "+peerWatchPath, pw.serve)
		var h http.Handler = mux
		if len(token) > 0 {
			h = requireToken(mux, token[0], false) // as Handler with admin.token
		}
		srv := &http.Server{Handler: h}
		srv.RegisterOnShutdown(pw.close)
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		return pw, ln.Addr().String()
	}
	w := newPeerWatcher(hclog.NewNullLogger(), "app", "app-self", "", nil)
	watch := func(addr, instance string, after func()) watchEnd {
		got := make(chan watchEnd, 1)
		go func() { got <- w.stream(t.Context(), peer{instance: instance, addr: addr}) }()
		time.Sleep(1500 * time.Millisecond) // the first line and a beat
		after()
		select {
		case e := <-got:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("the watch did not end")
			return watchEnd{}
		}
	}
	t.Run("goodbye", func(t *testing.T) {
		pw, addr := serve(t, "app-b")
		e := watch(addr, "app-b", pw.goodbye)
		if !e.named || !e.goodbye {
			t.Errorf("watch ended %+v, want named, with a goodbye", e)
		}
	})
	t.Run("closed", func(t *testing.T) {
		pw, addr := serve(t, "app-b")
		e := watch(addr, "app-b", pw.close)
		if !e.named || e.goodbye || e.err == nil {
			t.Errorf("watch ended %+v, want named, without a goodbye, with an error", e)
		}
	})
	t.Run("mismatch", func(t *testing.T) {
		_, addr := serve(t, "app-c")
		e := watch(addr, "app-b", func() {})
		if e.mismatch != "app-c" || e.named {
			t.Errorf("watch ended %+v, want a mismatch naming app-c", e)
		}
	})
	t.Run("token", func(t *testing.T) {
		pw, addr := serve(t, "app-b", "s3cret")
		tw := newPeerWatcher(hclog.NewNullLogger(), "app", "app-self", "s3cret", nil)
		got := make(chan watchEnd, 1)
		go func() { got <- tw.stream(t.Context(), peer{instance: "app-b", addr: addr}) }()
		time.Sleep(500 * time.Millisecond)
		pw.goodbye()
		if e := <-got; !e.named || !e.goodbye {
			t.Errorf("watch with the admin token ended %+v, want named, with a goodbye", e)
		}
		e := w.stream(t.Context(), peer{instance: "app-b", addr: addr}) // no token
		if !e.refused || e.named {
			t.Errorf("watch without the admin token ended %+v, want refused", e)
		}
	})
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		e := w.stream(t.Context(), peer{instance: "app-b", addr: addr})
		var op *net.OpError
		if e.named || !errors.As(e.err, &op) {
			t.Errorf("watch of a closed port ended %+v, want a connection error", e)
		}
	})
}
