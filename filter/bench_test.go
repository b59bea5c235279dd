package filter_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/filter"
	"github.com/tokentriage/tokentriage/internal/cputime"
	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/internal/testwasm"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// The benchmark chain: rpm and concurrency at org, team and user (six
// gate-1 instances for dev1's key), and for the full request a team tpm
// and an org budget read from the accountant's snapshot. Amounts are large
// enough that nothing is ever refused: the benchmarks measure the admitted
// path.
var (
	benchGate1Limits = filter.BenchGate1Limits
	benchGate2Limits = strings.Join([]string{
		`{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":1000000000,"period":"1m"}`,
		`{"id":"org_budget","attach":{"level":"org"},"type":"budget_usd","amount_usd":1000000,"period":"month"}`,
	}, ",")
	// passKey may call passthrough paths: gate 1 alone runs for them.
	passKey = dev1Key.withScopes(`{"allow_passthrough":true}`)
)

// okHandler is the cheapest upstream: the floor and the filter share it.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"object":"list","data":[]}`))
})

// benchHost starts a host on the real clock (ticks flush rows and poll the
// accountant as in production).
func benchHost(b *testing.B, module []byte, pluginConfig string, upstream http.Handler, acct *fakeAccountant) *wasmtest.Host {
	b.Helper()
	return newBenchHost(b, wasmtest.Config{
		Module:       module,
		PluginConfig: []byte(pluginConfig),
		Workers:      2,
		Upstream:     wasmtest.Cluster{Handler: upstream},
		MaxLogs:      64,

		AllowOnHeadersStopIteration: true, // the configs hold_headers (the rig's default)
	}, acct)
}

// newBenchHost starts a host with cfg, the accountant (if any) as its
// "accountant" cluster, closed when the benchmark ends.
func newBenchHost(b *testing.B, cfg wasmtest.Config, acct *fakeAccountant) *wasmtest.Host {
	b.Helper()
	if acct != nil {
		cfg.Clusters = map[string]wasmtest.Cluster{"accountant": {Handler: acct}}
	}
	h, err := wasmtest.New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h
}

// pair drives the same request through the filter and through the no-op
// floor, alternately, b.N times each, so that the load of a shared machine
// falls on both alike. It reports each one's time per request, their
// ratio, and what a filter request costs at the boundary: guest calls,
// host calls (proxy_* and WASI) and shared-data operations, ticks and
// callouts included, per request.
func pair(b *testing.B, filter, noop *wasmtest.Host, req wasmtest.Request, wantStatus int) {
	b.Helper()
	for _, h := range []*wasmtest.Host{filter, noop} {
		for i := 0; i < 50; i++ { // warm: cells created, streams pooled
			if resp := h.Do(req); resp.Status != wantStatus {
				b.Fatalf("status %d, want %d: %s", resp.Status, wantStatus, resp.Body)
			}
		}
	}
	c0 := filter.Counts()
	p0, _ := filter.Profile()
	var tf, tn, cf, cn time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t, c := time.Now(), cputime.Now()
		filter.Do(req)
		m, cm := time.Now(), cputime.Now()
		noop.Do(req)
		tf += m.Sub(t)
		tn += time.Since(m)
		cf += cm - c
		cn += cputime.Now() - cm
	}
	b.StopTimer()
	c := filter.Counts()
	n := float64(b.N)
	b.ReportMetric(float64(tf.Nanoseconds())/n, "filter-ns/req")
	b.ReportMetric(float64(tn.Nanoseconds())/n, "noop-ns/req")
	b.ReportMetric(float64(tf)/float64(tn), "x-noop")
	if cputime.Supported() {
		b.ReportMetric(float64(cf.Nanoseconds())/n, "filter-cpu/req")
		b.ReportMetric(float64(cn.Nanoseconds())/n, "noop-cpu/req")
		b.ReportMetric(float64(cf)/float64(cn), "x-noop-cpu")
	}
	b.ReportMetric(float64(c.HostCalls-c0.HostCalls)/n, "hostcalls/req")
	b.ReportMetric(float64(c.GuestCalls-c0.GuestCalls)/n, "guestcalls/req")
	b.ReportMetric(float64(c.SharedGets+c.SharedSets-c0.SharedGets-c0.SharedSets)/n, "shareddata/req")
	reportExports(b, p0, filter, n)
	if resp := filter.Do(req); resp.Status != wantStatus {
		b.Fatalf("after the loop: status %d, want %d: %s", resp.Status, wantStatus, resp.Body)
	}
}

func gate1Request() wasmtest.Request {
	return wasmtest.Request{Method: "GET", Path: "/v1/models", Headers: http.Header{"Authorization": {"Bearer " + passKey.key}}}
}

// BenchmarkGate1 is one request through gate 1 (key, chain, three rpm and
// three concurrency instances), the upstream and every response callback,
// in the real filter.wasm, beside the same request through the no-op
// filter built the same way (the floor).
func BenchmarkGate1(b *testing.B) {
	cfg := rigOptions{governance: gov(benchGate1Limits, `,"require_key":true`), keys: []testKey{passKey}}.pluginConfig()
	pair(b, benchHost(b, testwasm.Filter(b), cfg, okHandler, nil), benchHost(b, testwasm.Noop(b), `{}`, okHandler, nil), gate1Request(), 200)
}

func fullRequest() wasmtest.Request {
	return wasmtest.Request{Method: "POST", Path: "/v1/chat/completions",
		Headers:    http.Header{"Authorization": {"Bearer " + dev1Key.key}, "Content-Type": {"application/json"}},
		BodyChunks: [][]byte{[]byte(chatBody("gpt-4o-mini", germany, `,"stream":true`))}}
}

// BenchmarkFull is a whole governed request in the real filter.wasm: gate
// 1 as above, the body buffered and parsed at gate 2 (tpm reserve, a
// budget read from the synced snapshot, include_usage injected), the stub's
// SSE answer scanned event by event with its usage chunk stripped, and
// settlement (leases released, tpm reconciled, one ledger row queued and
// sent to the accountant from the tick); beside the same request and stub
// through the no-op filter.
func BenchmarkFull(b *testing.B) {
	acct := newFakeAccountant(wasmtest.RealClock())
	acct.setSnapshot("s1", syncwire.Entry{ID: "org_budget|budget_usd|org:acme||month|", PeriodStart: monthStart(), Value: 1})
	cfg := rigOptions{governance: gov(benchGate1Limits+","+benchGate2Limits, `,"require_key":true`), keys: []testKey{dev1Key},
		accountant: true, extra: []string{`"sync_interval":"200ms"`}}.pluginConfig()
	h := benchHost(b, testwasm.Filter(b), cfg, stub.New(stub.Options{History: -1}), acct)
	deadline := time.Now().Add(10 * time.Second)
	for resp := h.Do(fullRequest()); resp.Headers.Get("X-Tt-Suspended") != ""; resp = h.Do(fullRequest()) {
		if time.Now().After(deadline) {
			b.Fatal("the snapshot never arrived")
		}
		time.Sleep(50 * time.Millisecond)
	}
	pair(b, h, benchHost(b, testwasm.Noop(b), `{}`, stub.New(stub.Options{History: -1}), nil), fullRequest(), 200)
}

// BenchmarkHoldHeaders is the cost of hold_headers: the whole governed
// request of BenchmarkFull with its headers held until gate 2 (model and
// provider headers set, the route chosen again, the exact length set)
// beside the same filter letting them go at gate 1, alternately, on two
// hosts alike. The latency a held request pays (the provider sees its
// headers after the last body byte, not the first) is not in these
// in-process figures; BENCHMARKS.md says what it amounts to.
func BenchmarkHoldHeaders(b *testing.B) {
	hosts := make([]*wasmtest.Host, 2)
	for i, headersGo := range []bool{false, true} {
		acct := newFakeAccountant(wasmtest.RealClock())
		acct.setSnapshot("s1", syncwire.Entry{ID: "org_budget|budget_usd|org:acme||month|", PeriodStart: monthStart(), Value: 1})
		cfg := rigOptions{governance: gov(benchGate1Limits+","+benchGate2Limits, `,"require_key":true`), keys: []testKey{dev1Key},
			accountant: true, extra: []string{`"sync_interval":"200ms"`}, headersGo: headersGo}.pluginConfig()
		hosts[i] = benchHost(b, testwasm.Filter(b), cfg, stub.New(stub.Options{History: -1}), acct)
		deadline := time.Now().Add(10 * time.Second)
		for resp := hosts[i].Do(fullRequest()); resp.Headers.Get("X-Tt-Suspended") != ""; resp = hosts[i].Do(fullRequest()) {
			if time.Now().After(deadline) {
				b.Fatal("the snapshot never arrived")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	hold, goes := hosts[0], hosts[1]
	req := fullRequest()
	for i := 0; i < 50; i++ {
		hold.Do(req)
		goes.Do(req)
	}
	h0, g0 := hold.Counts(), goes.Counts()
	var th, tg time.Duration
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		if resp := hold.Do(req); resp.Status != 200 {
			b.Fatalf("held: status %d", resp.Status)
		}
		m := time.Now()
		if resp := goes.Do(req); resp.Status != 200 {
			b.Fatalf("not held: status %d", resp.Status)
		}
		th += m.Sub(t)
		tg += time.Since(m)
	}
	b.StopTimer()
	h, g := hold.Counts(), goes.Counts()
	n := float64(b.N)
	b.ReportMetric(float64(th.Nanoseconds())/n, "held-ns/req")
	b.ReportMetric(float64(tg.Nanoseconds())/n, "notheld-ns/req")
	b.ReportMetric(float64(th)/float64(tg), "x-notheld")
	b.ReportMetric(float64(h.HostCalls-h0.HostCalls)/n, "held-hostcalls/req")
	b.ReportMetric(float64(g.HostCalls-g0.HostCalls)/n, "notheld-hostcalls/req")
}

// reportExports reports the wall time per request each guest export of h
// took since p0 (its profile before the loop), ticks and callout answers
// included: where a request's guest time goes ("request_body-us/req").
func reportExports(b *testing.B, p0 []wasmtest.ExportProfile, h *wasmtest.Host, n float64) {
	before := map[string]time.Duration{}
	for _, p := range p0 {
		before[p.Export] = p.Total
	}
	p1, _ := h.Profile()
	for _, p := range p1 {
		if d := p.Total - before[p.Export]; d > 0 {
			b.ReportMetric(float64(d.Nanoseconds())/n/1e3, strings.TrimPrefix(p.Export, "proxy_on_")+"-us/req")
		}
	}
}
