package filter

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// BenchmarkApplyPage is the polling VM's side of a first sync, natively:
// pages of 1,000 keys (each with its own user node) written into the
// tables; the figure per key is what a page costs the VM's callback.
//
//	go test ./filter -run '^$' -bench ApplyPage -benchtime 50x
func BenchmarkApplyPage(b *testing.B) {
	store := newMemStore()
	clock := &manualClock{t: nativeT0}
	e := testEngines(b, 1, store, clock, `{"accountant":{"cluster":"a"}}`)[0]
	e.host.Log = func(LogLevel, string) {}
	page := func(n int) []byte {
		p := syncwire.Sync{Runtime: syncwire.RuntimePage{Page: syncwire.Page{Cursor: fmt.Sprintf("db.%d", n+1)}}}
		for i := range 1000 {
			kid := fmt.Sprintf("vk_%012d", n*1000+i)
			owner := fmt.Sprintf("org:acme/team:t%d/user:u%d", i%100, n*1000+i)
			p.Runtime.Keys = append(p.Runtime.Keys, syncwire.Key{KID: kid, SHA256: vkey.Hash(kid), Owner: owner})
		}
		if n == 0 {
			p.Runtime.Reset = true
		}
		b, _ := json.Marshal(p)
		return b
	}
	pages := make([][]byte, b.N)
	for i := range pages {
		pages[i] = page(i)
	}
	e.takeSyncLease(clock.Now())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.applySync(pages[i], clock.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/key")
}

// BenchmarkApplyUnchanged is the polling VM's side of an answer that
// changed nothing (most polls: the plan and prices current, no item after
// either cursor), natively, with the refresh that follows it.
//
//	go test ./filter -run '^$' -bench ApplyUnchanged
func BenchmarkApplyUnchanged(b *testing.B) {
	store := newMemStore()
	clock := &manualClock{t: nativeT0}
	e := testEngines(b, 1, store, clock, `{"accountant":{"cluster":"a"}}`)[0]
	e.host.Log = func(LogLevel, string) {}
	p := syncwire.Sync{
		Plan:     syncwire.Plan{Version: "5dfb3c2c2057201225052a64d7c912ebc6f94640d65106376681e683d82e0134"},
		Prices:   syncwire.Prices{Version: "0c2f6b1e6a4f0f7e2d9a5b3c1e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f"},
		Runtime:  syncwire.RuntimePage{Page: syncwire.Page{Cursor: "3f1c2a9b8e7d.12"}},
		Snapshot: syncwire.SnapshotPage{Page: syncwire.Page{Cursor: "s.41"}, GeneratedAt: nativeT0},
		Replicas: 1,
	}
	body, _ := json.Marshal(p)
	e.takeSyncLease(clock.Now())
	if _, err := e.applySync(body, clock.Now()); err != nil {
		b.Fatal(err)
	}
	e.refresh(clock.Now())
	gen := e.resolveGen
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.applySync(body, clock.Now()); err != nil {
			b.Fatal(err)
		}
		e.refresh(clock.Now())
	}
	b.StopTimer()
	if e.resolveGen != gen {
		b.Fatalf("an unchanged answer moved resolveGen from %d to %d", gen, e.resolveGen)
	}
}
