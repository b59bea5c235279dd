package filter_test

import (
	"testing"
	"time"
)

// TestMemoryStopsGrowing: each VM's linear memory reaches a plateau. After
// 100,000 requests through gate 1 (six instances, three VMs) it is within
// plateauSlack of what it was six tenths of the way; so it is after 32,000
// whole streamed requests whose ledger rows go to the accountant on the tick.
// The streamed run settles late: its pages went 112, 140, 144, 145 over the
// first 29,000 requests and then stayed at 145 up to 96,000 (a longer run of
// this test), which is why the reference point is not the half way mark.
func TestMemoryStopsGrowing(t *testing.T) {
	t.Run("gate1", func(t *testing.T) {
		r := newRig(t, rigOptions{governance: gov(benchGate1Limits, `,"require_key":true`), keys: []testKey{passKey}})
		checkPlateau(t, r, 100_000, req{method: "GET", path: "/v1/models", key: passKey}, nil)
	})
	t.Run("full", func(t *testing.T) {
		r := newRig(t, rigOptions{governance: gov(benchGate1Limits+","+benchGate2Limits, `,"require_key":true`), keys: []testKey{dev1Key},
			accountant: true})
		q := req{path: "/v1/chat/completions", key: dev1Key, body: chatBody("gpt-4o-mini", germany, `,"stream":true`)}
		checkPlateau(t, r, 32_000, q, func(i int) {
			if i%500 == 0 {
				r.step(500 * time.Millisecond) // the tick sends the rows
			}
		})
	})
}

// plateauSlack is the growth allowed over the last four tenths of a run:
// the Go heap in the module grows in steps as its collector paces itself,
// and one late step of 4 pages (256 KiB) is not a leak. A leak planted at
// the request headers to try it: 64 bytes a request fails the streamed run
// (168 to 185 pages over its last 12,800 requests), 128 bytes by 32 pages;
// 16 bytes a request (about 3 pages) is below what the collector's steps
// let this run tell apart.
const plateauSlack = 4

func checkPlateau(t *testing.T, r *rig, total int, q req, every func(i int)) {
	t.Helper()
	var pages [][]uint32
	for i := 1; i <= total; i++ {
		if resp := r.do(q); resp.Status != 200 {
			t.Fatalf("request %d: %d %s", i, resp.Status, resp.Body)
		}
		if every != nil {
			every(i)
		}
		if i%(total/10) == 0 {
			var p []uint32
			for n := 1; n <= r.h.Workers(); n++ {
				p = append(p, r.h.MemoryPages(n))
			}
			pages = append(pages, p)
			t.Logf("after %d requests: pages per VM %v", i, p)
		}
	}
	ref, end := pages[len(pages)*6/10-1], pages[len(pages)-1]
	for n := range end {
		if end[n] > ref[n]+plateauSlack {
			t.Errorf("VM %d grew from %d pages after %d requests to %d after %d", n+1, ref[n], total*6/10, end[n], total)
		}
	}
}
