package filter_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// The state a VM holds does not grow with the tenants (RATIONALE.md, "Why
// are keys, nodes and counters hash tables in shared data?"). These tests
// run it scaled down, as make test does; BenchmarkStateScale runs the
// figures of BENCHMARKS.md (a million keys, 100,000 nodes, 200,000
// counters).

// scaleLimits are a team rpm high enough never to refuse, an org budget
// and a per-model team budget: every request resolves instances at both
// gates and reads counters.
const scaleLimits = `{"id":"team_rpm","attach":{"level":"team"},"type":"rpm","amount":1000000000,"period":"1m"},` +
	`{"id":"org_budget","attach":{"level":"org"},"type":"budget_usd","amount_usd":1000000,"period":"month"},` +
	`{"id":"model_budget","attach":{"level":"team"},"type":"budget_usd","amount_usd":1000000,"period":"month","match":{"model":"m-*"}}`

// scaleKey is the i-th key of a scale run, owned by a user node of its
// own under one of 50 teams: each key's chain meets runtime nodes.
func scaleKey(i int) testKey {
	return newTestKey(fmt.Sprintf("vk_%012d", i), scaleOwner(i))
}

func scaleOwner(i int) string { return fmt.Sprintf("org:acme/team:t%d/user:u%d", i%50, i) }

// scaleTenants publishes keys [0, n) with their user nodes.
func scaleTenants(a *fakeAccountant, n int) {
	keys := make([]syncwire.Key, n)
	nodes := make([]string, n)
	for i := range keys {
		k := scaleKey(i)
		keys[i] = syncwire.Key{KID: k.kid, SHA256: vkey.Hash(k.key), Owner: k.owner}
		nodes[i] = k.owner
	}
	a.setKeys("", keys...)
	a.setRuntime("", nodes)
}

// touch sends one chat request by each key in [from, to) to VM 1, and
// fails on any answer but 200.
func (r *rig) touch(from, to int) {
	r.t.Helper()
	for i := from; i < to; i++ {
		q := req{path: "/v1/chat/completions", key: scaleKey(i), body: chatBody("gpt-4o-mini", "hi"), vm: 1}
		if resp := r.do(q); resp.Status != 200 {
			r.t.Fatalf("key %d: %d %s", i, resp.Status, resp.Body)
		}
		if i%200 == 0 {
			// The tick sends the rows, a batch at a time: the queue stays
			// short, and what grows is what the test is about.
			r.step(500 * time.Millisecond)
		}
	}
}

// sharedBytes is what shared data holds under prefix: keys and values.
func sharedBytes(h *wasmtest.Host, prefix string) (entries, bytes int) {
	for _, k := range h.SharedDataKeys() {
		if strings.HasPrefix(k, prefix) {
			v, _, _ := h.SharedData(k)
			entries++
			bytes += len(k) + len(v)
		}
	}
	return entries, bytes
}

// scaleSlack is the growth allowed on a plateau: the collector's steps
// (1 MiB). Keeping what the caches evict, 600 bytes a key or more, would
// grow a VM by 75 pages over 8,000 keys.
const scaleSlack = 16

// syncGrowthBounded judges what a sync did to two VMs' memory (pages
// before: a1, a2; after: b1, b2): the VM that polled and wrote the pages
// into shared data handled a page at a time, which with the collector's
// headroom is at most 128 pages (8 MiB); the other VM read nothing of the
// sync's size and stays within 8 pages. (Decoding the tables in every VM,
// as the filter once did, grew both by their size.)
func syncGrowthBounded(a1, a2, b1, b2 uint32) bool {
	g1, g2 := int(b1)-int(a1), int(b2)-int(a2)
	return min(g1, g2) <= 8 && max(g1, g2) <= 128
}

// TestStateDoesNotGrowWithKeys: syncing 18,000 more keys (each with a
// runtime user node) grows no VM by their number; a VM serving them
// fills its caches (4,096 keys with their chains, 4,096 node records) and
// stays on a plateau however many more it serves; a mint is one key in
// the next answer, not the table, and reaches every VM at the next sync,
// as does a revocation of a key every VM has cached.
func TestStateDoesNotGrowWithKeys(t *testing.T) {
	const small, large = 2_000, 20_000
	r := newRig(t, rigOptions{governance: gov(scaleLimits, `,"require_key":true`), accountant: true, workers: 2,
		acct: func(a *fakeAccountant) {
			a.pageBytes = 64 << 10
			scaleTenants(a, small)
		}})
	r.sync()
	a1, a2 := r.h.MemoryPages(1), r.h.MemoryPages(2)
	scaleTenants(r.acct, large)
	polls := len(r.acct.pollQueries())
	r.sync()
	if n := len(r.acct.pollQueries()) - polls; n < 10 {
		t.Errorf("18,000 keys and nodes came in %d answers of at most 64 KiB", n)
	}
	b1, b2 := r.h.MemoryPages(1), r.h.MemoryPages(2)
	r.touch(0, 12_000)
	p1 := r.h.MemoryPages(1)
	r.touch(12_000, large)
	p2 := r.h.MemoryPages(1)
	entries, bytes := sharedBytes(r.h, "tt/t/")
	t.Logf("pages of VMs 1 and 2: %d, %d with %d keys; %d, %d with %d; VM 1 after serving 12,000 and 20,000 keys: %d, %d; shared data: %d entries, %d bytes, %.0f bytes a key (with its node)",
		a1, a2, small, b1, b2, large, p1, p2, entries, bytes, float64(bytes)/large)
	if !syncGrowthBounded(a1, a2, b1, b2) {
		t.Errorf("syncing %d more keys grew the VMs from %d and %d pages to %d and %d", large-small, a1, a2, b1, b2)
	}
	// The caches' bound, with the collector's headroom: 256 pages are
	// 16 MiB (RELIABILITY.md).
	if p1 > b1+256 {
		t.Errorf("VM 1 grew from %d to %d pages serving 12,000 keys", b1, p1)
	}
	if p2 > p1+scaleSlack {
		t.Errorf("VM 1 grew from %d to %d pages over 8,000 more keys served", p1, p2)
	}
	if per := float64(bytes) / large; per > 400 {
		t.Errorf("%.0f bytes of shared data a key and node", per)
	}

	// A mint: the next sync carries that key, not the table.
	answers := len(r.acct.answerSizes())
	minted := scaleKey(large)
	r.acct.putKeys(syncwire.Key{KID: minted.kid, SHA256: vkey.Hash(minted.key), Owner: "org:acme/team:t1"})
	r.sync()
	sizes := r.acct.answerSizes()[answers:]
	total := 0
	for _, s := range sizes {
		total += s
	}
	if len(sizes) == 0 || total > 2048 {
		t.Errorf("the sync after one mint took %d answers, %d bytes", len(sizes), total)
	}
	q := req{path: "/v1/chat/completions", key: minted, body: chatGermany}
	r.onEveryVM(q, 200)
	// A revocation likewise, though every VM has the key cached.
	r.acct.putKeys(syncwire.Key{KID: minted.kid, SHA256: vkey.Hash(minted.key), Owner: "org:acme/team:t1", Revoked: true})
	r.sync()
	r.onEveryVM(q, 401)
}

// TestStateDoesNotGrowWithCounters: 20,000 per-model counters in the
// snapshot cost no VM memory by their number: syncing them grows no VM
// beyond the page it writes, a VM serving a key whose requests name 9,000
// of those models fills its caches (8,192 counters, and govern's
// identities of a per-model limit at a runtime node) and stays on a
// plateau, every other tenant is served throughout, and each counter is
// read where it lives (a model past its budget is refused, on every VM).
func TestStateDoesNotGrowWithCounters(t *testing.T) {
	const models, named = 20_000, 9_000
	start := monthStart()
	id := func(i int) string {
		return fmt.Sprintf("model_budget|budget_usd|org:acme/team:t0|model=m-%d|month|", i)
	}
	r := newRig(t, rigOptions{governance: gov(scaleLimits, `,"require_key":true`), accountant: true, workers: 2,
		acct: func(a *fakeAccountant) {
			a.pageBytes = 64 << 10
			scaleTenants(a, 100)
			a.setSnapshot("s0")
		}})
	r.sync()
	a1, a2 := r.h.MemoryPages(1), r.h.MemoryPages(2)
	entries := make([]syncwire.Entry, models)
	for i := range entries {
		entries[i] = syncwire.Entry{ID: id(i), PeriodStart: start, Value: int64(i)}
	}
	entries[7].Value = 1_000_000 * 1e9 // m-7 is spent
	r.acct.setSnapshot("s1", entries...)
	r.sync()
	b1, b2 := r.h.MemoryPages(1), r.h.MemoryPages(2)
	other := func() {
		t.Helper()
		if resp := r.do(req{path: "/v1/chat/completions", key: scaleKey(1), body: chatGermany}); resp.Status != 200 {
			t.Fatalf("another tenant: %d %s", resp.Status, resp.Body)
		}
	}
	next := 0
	key0 := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			m := fmt.Sprintf("m-%d", 1000+next%named)
			next++
			if resp := r.do(req{path: "/v1/chat/completions", key: scaleKey(0), body: chatBody(m, "hi"), vm: 1}); resp.Status != 200 {
				t.Fatalf("model %s: %d %s", m, resp.Status, resp.Body)
			}
			if i%200 == 0 {
				other()
				r.step(500 * time.Millisecond) // the tick sends the rows
			}
		}
	}
	key0(2 * named)
	p1 := r.h.MemoryPages(1)
	key0(named)
	p2 := r.h.MemoryPages(1)
	tab, bytes := sharedBytes(r.h, "tt/t/s/")
	t.Logf("pages of VMs 1 and 2: %d, %d before the %d counters, %d, %d after; VM 1 after naming %d models twice and once more: %d, %d; the counter table: %d entries, %d bytes, %.0f bytes a counter",
		a1, a2, models, b1, b2, named, p1, p2, tab, bytes, float64(bytes)/models)
	if !syncGrowthBounded(a1, a2, b1, b2) {
		t.Errorf("syncing %d counters grew the VMs from %d and %d pages to %d and %d", models, a1, a2, b1, b2)
	}
	if p1 > b1+256 {
		t.Errorf("VM 1 grew from %d to %d pages serving %d models", b1, p1, named)
	}
	if p2 > p1+scaleSlack {
		t.Errorf("VM 1 grew from %d to %d pages over %d more requests", p1, p2, named)
	}
	for n := 1; n <= r.h.Workers(); n++ {
		q := req{path: "/v1/chat/completions", key: scaleKey(0), body: chatBody("m-7", "hi"), vm: n}
		if resp := r.do(q); resp.Status != 429 || !strings.Contains(string(resp.Body), "model_budget") {
			t.Errorf("VM %d, the spent model: %d %s", n, resp.Status, resp.Body)
		}
	}
	// A counter that moves reaches every VM at the next sync.
	r.acct.set(func(a *fakeAccountant) {
		a.snapshot.Version = "s2"
		a.snapshot.Entries[7].Value = 0
	})
	r.sync()
	for n := 1; n <= r.h.Workers(); n++ {
		q := req{path: "/v1/chat/completions", key: scaleKey(0), body: chatBody("m-7", "hi"), vm: n}
		if resp := r.do(q); resp.Status != 200 {
			t.Errorf("VM %d, the model whose counter went back to 0: %d %s", n, resp.Status, resp.Body)
		}
	}
}
