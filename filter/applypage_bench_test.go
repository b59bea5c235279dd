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
