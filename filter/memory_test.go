package filter_test

import (
	"testing"
)

// TestMemoryStopsGrowing: each VM's linear memory reaches a plateau; after
// 100,000 requests it is what it was half way.
func TestMemoryStopsGrowing(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(benchGate1Limits, `,"require_key":true`), keys: []testKey{passKey}})
	q := req{method: "GET", path: "/v1/models", key: passKey}
	const total = 100_000
	var pages [][]uint32
	for i := 1; i <= total; i++ {
		if resp := r.do(q); resp.Status != 200 {
			t.Fatalf("request %d: %d %s", i, resp.Status, resp.Body)
		}
		if i%10_000 == 0 {
			var p []uint32
			for n := 1; n <= r.h.Workers(); n++ {
				p = append(p, r.h.MemoryPages(n))
			}
			pages = append(pages, p)
			t.Logf("after %d requests: pages per VM %v", i, p)
		}
	}
}
