package filter_test

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/cputime"
	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/internal/testwasm"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// Growth curves: what one more SSE event, body byte or limit costs the
// filter, measured as the filter's CPU per request less the no-op floor's
// for the same request, at several sizes, with the slope of that
// difference and its growth exponent. Run them with
//
//	make wasm
//	TT_FILTER_WASM=$PWD/build/filter.wasm TT_NOOP_WASM=$PWD/build/noop.wasm \
//	  go test ./filter -run '^$' -bench Growth -benchtime 20x
//
// Each op sends one request of every size to the filter and to the floor,
// alternately, so that a load spike falls on all of them alike.

// growthPoint is one size of a curve and the request that has it (sent
// to filter, when the size has a host of its own).
type growthPoint struct {
	size   int
	req    wasmtest.Request
	filter *wasmtest.Host
}

// curve drives the points through both hosts and reports, per size, the
// CPU time the process spent on one filter request and on one floor
// request (f-cpu@size, n-cpu@size; CPU time, not wall time, so that the
// figures hold on a loaded machine) and the filter's host calls (hc@size);
// over all sizes, the least-squares slope of the difference per unit of
// size in CPU time (ns/unit) and in wall time (wall-ns/unit), the slope of
// the host calls (calls/unit), and the growth exponent of the CPU
// difference between the two largest sizes (1.0 is linear).
func curve(b *testing.B, unit string, filter, noop *wasmtest.Host, points []growthPoint, wantStatus int) {
	b.Helper()
	for k := range points {
		if points[k].filter == nil {
			points[k].filter = filter
		}
	}
	for _, p := range points {
		for _, h := range []*wasmtest.Host{p.filter, noop} {
			for i := 0; i < 3; i++ { // warm: cells created, buffers grown
				if resp := h.Do(p.req); resp.Status != wantStatus {
					b.Fatalf("size %d: status %d, want %d: %.300s", p.size, resp.Status, wantStatus, resp.Body)
				}
			}
		}
	}
	tf := make([]time.Duration, len(points))
	tn := make([]time.Duration, len(points))
	cf := make([]time.Duration, len(points))
	cn := make([]time.Duration, len(points))
	calls := make([]float64, len(points))
	b.ResetTimer()
	for b.Loop() {
		for k, p := range points {
			c0 := p.filter.Counts()
			t, c := time.Now(), cputime.Now()
			p.filter.Do(p.req)
			m, cm := time.Now(), cputime.Now()
			calls[k] += float64(p.filter.Counts().HostCalls - c0.HostCalls)
			noop.Do(p.req)
			tf[k] += m.Sub(t)
			tn[k] += time.Since(m)
			cf[k] += cm - c
			cn[k] += cputime.Now() - cm
		}
	}
	b.StopTimer()
	n := float64(b.N)
	xs := make([]float64, len(points))
	dc := make([]float64, len(points))
	dw := make([]float64, len(points))
	dh := make([]float64, len(points))
	for k, p := range points {
		f, z := float64(cf[k].Nanoseconds())/n, float64(cn[k].Nanoseconds())/n
		b.ReportMetric(f, "f-cpu@"+strconv.Itoa(p.size))
		b.ReportMetric(z, "n-cpu@"+strconv.Itoa(p.size))
		b.ReportMetric(calls[k]/n, "hc@"+strconv.Itoa(p.size))
		xs[k], dc[k], dh[k] = float64(p.size), f-z, calls[k]/n
		dw[k] = float64((tf[k] - tn[k]).Nanoseconds()) / n
	}
	b.ReportMetric(slope(xs, dc), "ns/"+unit)
	b.ReportMetric(slope(xs, dw), "wall-ns/"+unit)
	b.ReportMetric(slope(xs, dh), "calls/"+unit)
	last := len(points) - 1
	if dc[last] > 0 && dc[last-1] > 0 {
		b.ReportMetric(math.Log(dc[last]/dc[last-1])/math.Log(xs[last]/xs[last-1]), "exponent")
	}
}

// curveHosts is curve over one filter host per size, each sent req.
func curveHosts(b *testing.B, unit string, filters []*wasmtest.Host, noop *wasmtest.Host, sizes []int, req wasmtest.Request, wantStatus int) {
	points := make([]growthPoint, len(sizes))
	for k, n := range sizes {
		points[k] = growthPoint{size: n, req: req, filter: filters[k]}
	}
	curve(b, unit, nil, noop, points, wantStatus)
}

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	n := float64(len(xs))
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// growthHosts starts the filter (plugin configuration cfg) and the floor
// over the same upstream, two worker VMs each, on the real clock.
func growthHosts(b *testing.B, cfg string, upstream http.Handler, acct *fakeAccountant, bufferLimit int) (filter, noop *wasmtest.Host) {
	b.Helper()
	return startHost(b, testwasm.Filter(b), cfg, upstream, acct, bufferLimit), growthNoop(b, upstream)
}

// growthNoop is the floor: the no-op filter over upstream.
func growthNoop(b *testing.B, upstream http.Handler) *wasmtest.Host {
	return startHost(b, testwasm.Noop(b), `{}`, upstream, nil, 16<<20)
}

func startHost(b *testing.B, module []byte, pc string, upstream http.Handler, a *fakeAccountant, bufferLimit int) *wasmtest.Host {
	b.Helper()
	return newBenchHost(b, wasmtest.Config{Module: module, PluginConfig: []byte(pc), Workers: 2, Upstream: wasmtest.Cluster{Handler: upstream}, MaxLogs: 64, BufferLimit: bufferLimit}, a)
}

// BenchmarkGrowthSSEEvents: a streamed chat answer of 10 to 10,000 token
// events (plus the role, finish and usage events and [DONE]), scanned for
// usage with its usage chunk stripped, on the full chain of BenchmarkFull.
func BenchmarkGrowthSSEEvents(b *testing.B) {
	cfg := rigOptions{governance: gov(benchGate1Limits+","+benchGate2Limits, `,"require_key":true`), keys: []testKey{dev1Key}}.pluginConfig()
	st := stub.New(stub.Options{History: -1})
	filter, noop := growthHosts(b, cfg, st, nil, 0)
	var points []growthPoint
	for _, events := range []int{10, 100, 1000, 10000} {
		req := fullRequest()
		req.Headers = req.Headers.Clone()
		req.Headers.Set(stub.HeaderCompletionTokens, strconv.Itoa(events))
		req.Headers.Set(stub.HeaderPieces, strconv.Itoa(events))
		points = append(points, growthPoint{size: events, req: req})
	}
	curve(b, "event", filter, noop, points, 200)
}

// BenchmarkGrowthRequestBody: a chat request whose prompt is 1 KB to 8 MB
// of prose, buffered and read at gate 2 (a tpm reserve counts its bytes).
func BenchmarkGrowthRequestBody(b *testing.B) {
	const max = 16 << 20
	cfg := rigOptions{governance: gov(benchGate1Limits+","+benchGate2Limits, `,"require_key":true`), keys: []testKey{dev1Key},
		extra: []string{`"max_body_bytes":` + strconv.Itoa(max)}}.pluginConfig()
	st := stub.New(stub.Options{History: -1})
	filter, noop := growthHosts(b, cfg, st, nil, max+1<<20)
	var points []growthPoint
	for _, size := range []int{1 << 10, 100 << 10, 1 << 20, 8 << 20} {
		req := wasmtest.Request{Method: "POST", Path: "/v1/chat/completions",
			Headers:    http.Header{"Authorization": {"Bearer " + dev1Key.key}, "Content-Type": {"application/json"}},
			BodyChunks: [][]byte{promptBody(size)}}
		points = append(points, growthPoint{size: size, req: req})
	}
	curve(b, "byte", filter, noop, points, 200)
}

// promptBody is a chat body of about size bytes whose user message is
// prose with the escapes a pasted document brings.
func promptBody(size int) []byte {
	return testkit.ProseChat(size-40, `"}],"max_tokens":16}`)
}

// chainLimits is n limits on dev1's chain: the six types in turn (rpm,
// concurrency, tpm, budget_usd, quota_tokens, quota_requests), attached
// at the user, the team and the org in turn, amounts no run reaches.
func chainLimits(n int) string {
	levels := []string{"user", "team", "org"}
	var out []string
	for i := 0; i < n; i++ {
		at := `{"level":"` + levels[(i/6)%3] + `"}`
		id := `"l` + strconv.Itoa(i) + `"`
		switch i % 6 {
		case 0:
			out = append(out, `{"id":`+id+`,"attach":`+at+`,"type":"rpm","amount":1000000000,"period":"1m"}`)
		case 1:
			out = append(out, `{"id":`+id+`,"attach":`+at+`,"type":"concurrency","amount":100000}`)
		case 2:
			out = append(out, `{"id":`+id+`,"attach":`+at+`,"type":"tpm","amount":1000000000,"period":"1m"}`)
		case 3:
			out = append(out, `{"id":`+id+`,"attach":`+at+`,"type":"budget_usd","amount_usd":1000000,"period":"month"}`)
		case 4:
			out = append(out, `{"id":`+id+`,"attach":`+at+`,"type":"quota_tokens","amount":1000000000000,"period":"month"}`)
		default:
			out = append(out, `{"id":`+id+`,"attach":`+at+`,"type":"quota_requests","amount":1000000000,"period":"day"}`)
		}
	}
	return strings.Join(out, ",")
}

// BenchmarkGrowthLimits: BenchmarkFull's streamed request on a chain of 1,
// 6, 20 and 50 limits (chainLimits), each size on its own host with the
// accountant's snapshot synced; the slopes are per limit. A limit costs a
// few microseconds against a request's millisecond, so the slope needs
// about 2,000 rounds to stand out of the noise (-benchtime 2000x).
func BenchmarkGrowthLimits(b *testing.B) {
	st := stub.New(stub.Options{History: -1})
	var filters []*wasmtest.Host
	sizes := []int{1, 6, 20, 50}
	for _, n := range sizes {
		acct := newFakeAccountant(wasmtest.RealClock())
		acct.setSnapshot("s1")
		cfg := rigOptions{governance: gov(chainLimits(n), `,"require_key":true`), keys: []testKey{dev1Key},
			accountant: true, extra: []string{`"sync_interval":"200ms"`}}.pluginConfig()
		f, _ := growthHosts(b, cfg, st, acct, 0)
		deadline := time.Now().Add(10 * time.Second)
		for resp := f.Do(fullRequest()); resp.Headers.Get("X-Tt-Suspended") != ""; resp = f.Do(fullRequest()) {
			if time.Now().After(deadline) {
				b.Fatal("the snapshot never arrived")
			}
			time.Sleep(50 * time.Millisecond)
		}
		filters = append(filters, f)
	}
	noop := growthNoop(b, st)
	curveHosts(b, "limit", filters, noop, sizes, fullRequest(), 200)
}
