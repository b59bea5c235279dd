package filter_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedUpstream holds every request in the upstream until the test opens
// the gate (or the client goes away), counting those in flight and the most
// ever in flight at once, then lets next answer.
type gatedUpstream struct {
	next     http.Handler
	inflight atomic.Int64
	peak     atomic.Int64
	served   atomic.Int64

	mu   sync.Mutex
	gate chan struct{}
}

func newGatedUpstream(next http.Handler) *gatedUpstream {
	return &gatedUpstream{next: next, gate: make(chan struct{})}
}

func (g *gatedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := g.inflight.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	select {
	case <-gate:
	case <-r.Context().Done():
	}
	g.inflight.Add(-1)
	g.served.Add(1)
	g.next.ServeHTTP(w, r)
}

// open lets every held and later request through.
func (g *gatedUpstream) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.gate:
	default:
		close(g.gate)
	}
}

// close makes later requests wait again.
func (g *gatedUpstream) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.gate:
		g.gate = make(chan struct{})
	default:
	}
}

// waitFor polls cond (real time: it waits for goroutines, it measures
// nothing) until it holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
