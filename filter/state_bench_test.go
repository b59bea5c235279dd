package filter_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/cputime"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// envInt is the integer in environment variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkStateScale is issue 18's figure: a million virtual keys under
// 100,000 runtime user nodes, and 200,000 per-model counters in the spend
// snapshot, synced into a host of four VMs through the real filter.wasm
// (the accountant's feed played by the test, in pages of 64 KiB). It
// reports the first sync's wall and CPU time, the shared-data bytes per
// key and per counter, each VM's linear memory after the sync and after
// serving keys past its caches, and what one mint costs: the bytes of the
// next answer and the host calls and CPU each VM spends taking it in,
// beside a sync where nothing changed. It does a fixed amount of work:
//
//	make wasm
//	TT_FILTER_WASM=$PWD/build/filter.wasm TT_NOOP_WASM=$PWD/build/noop.wasm \
//	  go test ./filter -run '^$' -bench StateScale -benchtime 1x -timeout 60m
//
// TT_SCALE_KEYS, TT_SCALE_NODES and TT_SCALE_COUNTERS scale it down.
func BenchmarkStateScale(b *testing.B) {
	nKeys := envInt("TT_SCALE_KEYS", 1_000_000)
	nNodes := envInt("TT_SCALE_NODES", 100_000)
	nCounters := envInt("TT_SCALE_COUNTERS", 200_000)
	const workers = 4
	owner := func(i int) string { return fmt.Sprintf("org:acme/team:t%d/user:u%d", i%nNodes%100, i%nNodes) }
	key := func(i int) testKey { return newTestKey(fmt.Sprintf("vk_%012d", i), owner(i)) }
	counter := func(i int) string {
		return fmt.Sprintf("model_budget|budget_usd|org:acme/team:t0|model=m-%d|month|", i)
	}
	for range b.N {
		r := newRig(b, rigOptions{governance: gov(scaleLimits, `,"require_key":true`), accountant: true, workers: workers,
			acct: func(a *fakeAccountant) { a.setSnapshot("s0") }})
		r.sync()
		var empty [workers]uint32
		for n := range empty {
			empty[n] = r.h.MemoryPages(n + 1)
		}
		// The accountant's state, built before the clock starts.
		keys := make([]syncwire.Key, nKeys)
		for i := range keys {
			k := key(i)
			keys[i] = syncwire.Key{KID: k.kid, SHA256: vkey.Hash(k.key), Owner: k.owner}
		}
		r.acct.setKeys("", keys...)
		keys = nil
		nodes := make([]string, nNodes)
		for i := range nodes {
			nodes[i] = owner(i)
		}
		r.acct.setRuntime("", nodes)
		nodes = nil
		entries := make([]syncwire.Entry, nCounters)
		for i := range entries {
			entries[i] = syncwire.Entry{ID: counter(i), PeriodStart: monthStart(), Value: int64(i)}
		}
		r.acct.setSnapshot("s1", entries...)
		entries = nil
		runtime.GC()

		// The first sync: every page in at once, from one tick (the rig's
		// sync gives callouts 30 s; this one may take minutes).
		answers := len(r.acct.answerSizes())
		wall, cpu := time.Now(), cputime.Now()
		r.clock.Advance(time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		if err := r.h.WaitCallouts(ctx); err != nil {
			b.Fatalf("the first sync: %v", err)
		}
		cancel()
		r.step(0)
		syncWall, syncCPU := time.Since(wall), cputime.Now()-cpu
		pages := len(r.acct.answerSizes()) - answers
		kEntries, kBytes := sharedBytes(r.h, "tt/t/k/")
		nEntries, nBytes := sharedBytes(r.h, "tt/t/n/")
		sEntries, sBytes := sharedBytes(r.h, "tt/t/s/")
		// What each answer held the polling VM for: the guest's side of
		// the sync, page by page (the callout answers).
		prof, _ := r.h.Profile()
		for _, p := range prof {
			if p.Export == "proxy_on_http_call_response" && p.Calls > 0 {
				b.ReportMetric(float64(p.Total.Microseconds())/float64(p.Calls)/1000, "answer-mean-ms")
				b.ReportMetric(float64(p.Max.Microseconds())/1000, "answer-max-ms")
				b.ReportMetric(p.Total.Seconds(), "answers-guest-s")
			}
		}
		b.ReportMetric(syncWall.Seconds(), "first-sync-s")
		b.ReportMetric(syncCPU.Seconds(), "first-sync-cpu-s")
		b.ReportMetric(float64(pages), "first-sync-answers")
		b.ReportMetric(float64(kBytes)/float64(nKeys), "shared-B/key")
		b.ReportMetric(float64(nBytes)/float64(nNodes), "shared-B/node")
		b.ReportMetric(float64(sBytes)/float64(nCounters), "shared-B/counter")
		b.ReportMetric(float64(kEntries+nEntries+sEntries), "shared-entries")
		b.ReportMetric(float64(kBytes+nBytes+sBytes)/(1<<20), "shared-MiB")
		var synced, served [workers]uint32
		for n := range synced {
			synced[n] = r.h.MemoryPages(n + 1)
		}

		// Every VM serves keys past its caches (4,096 keys), and counters.
		for i := 0; i < 3*4096*workers; i++ {
			k := key((i * 7919) % nKeys)
			m := "gpt-4o-mini"
			if i%2 == 0 {
				m = fmt.Sprintf("m-%d", (i*104729)%nCounters)
			}
			if resp := r.do(req{path: "/v1/chat/completions", key: k, body: chatBody(m, "hi"), vm: 1 + i%workers}); resp.Status != 200 {
				b.Fatalf("request %d by %s (%s): %d %s", i, k.kid, m, resp.Status, resp.Body)
			}
			if i%200 == 0 {
				r.step(500 * time.Millisecond)
			}
		}
		for n := range served {
			served[n] = r.h.MemoryPages(n + 1)
		}
		var maxSynced, maxServed, maxEmpty uint32
		for n := range served {
			maxEmpty, maxSynced, maxServed = max(maxEmpty, empty[n]), max(maxSynced, synced[n]), max(maxServed, served[n])
			b.ReportMetric(float64(synced[n]-empty[n])*64/1024, fmt.Sprintf("vm%d-synced-MiB", n+1))
			b.ReportMetric(float64(served[n]-empty[n])*64/1024, fmt.Sprintf("vm%d-served-MiB", n+1))
		}
		b.ReportMetric(float64(maxServed)*64/1024, "vm-max-MiB")
		b.ReportMetric(float64(maxEmpty)*64/1024, "vm-empty-MiB")

		// What a mint costs each VM, beside syncs with nothing new just
		// before and after it.
		syncCost(b, r, nil) // the rows of the requests above leave
		before := syncCost(b, r, nil)
		minted := key(nKeys)
		mint := syncCost(b, r, func() {
			r.acct.putKeys(syncwire.Key{KID: minted.kid, SHA256: vkey.Hash(minted.key), Owner: minted.owner})
		})
		after := syncCost(b, r, nil)
		quiet := syncRound{answerBytes: (before.answerBytes + after.answerBytes) / 2, hostCalls: (before.hostCalls + after.hostCalls) / 2,
			cpu: (before.cpu + after.cpu) / 2}
		for n := 1; n <= workers; n++ {
			if resp := r.do(req{path: "/v1/chat/completions", key: minted, body: chatGermany, vm: n}); resp.Status != 200 {
				b.Fatalf("the minted key on VM %d: %d %s", n, resp.Status, resp.Body)
			}
		}
		b.ReportMetric(float64(mint.answerBytes), "mint-answer-B")
		b.ReportMetric(mint.hostCalls/workers, "mint-hostcalls/vm")
		b.ReportMetric(quiet.hostCalls/workers, "quiet-hostcalls/vm")
		b.ReportMetric(mint.cpu.Seconds()*1e6/workers, "mint-cpu-us/vm")
		b.ReportMetric(quiet.cpu.Seconds()*1e6/workers, "quiet-cpu-us/vm")
		b.Logf("%d keys, %d nodes, %d counters: first sync %s (%s CPU) in %d answers; shared data %.1f MiB; VM pages empty %v, synced %v, served %v; a mint: %+v, a quiet sync: %+v",
			nKeys, nNodes, nCounters, syncWall.Round(time.Millisecond), syncCPU.Round(time.Millisecond), pages,
			float64(kBytes+nBytes+sBytes)/(1<<20), empty, synced, served, mint, quiet)
		r.h.Close()
	}
}

// syncRound is what one sync cost the host: the bytes of the accountant's
// answers, and the host calls and process CPU of the poll and of every
// VM's next request after it (where each VM takes the change in).
type syncRound struct {
	answerBytes int
	hostCalls   float64
	cpu         time.Duration
}

func syncCost(b *testing.B, r *rig, change func()) syncRound {
	b.Helper()
	before := len(r.acct.answerSizes())
	if change != nil {
		change()
	}
	c0, cpu := r.h.Counts(), cputime.Now()
	r.sync()
	// Each VM reads what moved at its next callback: a request by a key
	// it has cached, so the request itself costs no probe.
	for n := 1; n <= r.h.Workers(); n++ {
		r.do(req{method: "GET", path: "/tt/v1/me", key: scaleKey(0), vm: n})
	}
	out := syncRound{cpu: cputime.Now() - cpu, hostCalls: float64(r.h.Counts().HostCalls - c0.HostCalls)}
	for _, s := range r.acct.answerSizes()[before:] {
		out.answerBytes += s
	}
	return out
}
