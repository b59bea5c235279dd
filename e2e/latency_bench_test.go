package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/stub"
)

// What users feel: the latency a streamed chat call sees through the
// gateway, beside the same call through a bare reverse proxy in front of
// the same upstream. The stub answers each call like a provider under
// load: the first event after 200 ms, then 100 token events 8 ms apart,
// about a second in all.
const (
	feelEvents    = 100
	feelFirstMS   = 200
	feelBetweenMS = 8
	feelSteadyFor = 5 // seconds of steady load
)

// feelCall is one call's timing: to the first byte of the answer and to
// its end.
type feelCall struct {
	first, total time.Duration
	err          error
}

// feelRequest sends one streamed chat call and reads the answer to its end.
func feelRequest(client *http.Client, target, key string) feelCall {
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"What is the capital of Germany?"}]}`
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return feelCall{err: err}
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadByte(); err != nil {
		return feelCall{err: fmt.Errorf("reading the first byte: %w", err)}
	}
	first := time.Since(start)
	rest, err := io.ReadAll(r)
	total := time.Since(start)
	switch {
	case err != nil:
		return feelCall{err: err}
	case resp.StatusCode != http.StatusOK:
		return feelCall{err: fmt.Errorf("%s answered %s", target, resp.Status)}
	case !strings.Contains(string(rest), "[DONE]"):
		return feelCall{err: fmt.Errorf("%s: the stream ended before [DONE]", target)}
	case strings.Count(string(rest), "data: ") < feelEvents:
		return feelCall{err: fmt.Errorf("%s: the answer had %d events, not the %d the upstream was told to send", target, strings.Count(string(rest), "data: "), feelEvents)}
	}
	return feelCall{first: first, total: total}
}

// feelSteady sends rate calls a second for 2×feelSteadyFor
// seconds, each on schedule whether or not earlier ones have ended, to
// the targets in turn a second each: both see the same load from the
// machine's other work. It returns each target's calls.
func feelSteady(client *http.Client, targets []string, key string, rate int) [][]feelCall {
	n := 2 * rate * feelSteadyFor
	calls := make([]feelCall, n)
	which := make([]int, n)
	every := time.Second / time.Duration(rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range calls {
		if d := time.Until(start.Add(time.Duration(i) * every)); d > 0 {
			time.Sleep(d)
		}
		which[i] = (i / rate) % len(targets)
		wg.Add(1)
		go func() {
			defer wg.Done()
			calls[i] = feelRequest(client, targets[which[i]], key)
		}()
	}
	wg.Wait()
	out := make([][]feelCall, len(targets))
	for i, c := range calls {
		out[which[i]] = append(out[which[i]], c)
	}
	return out
}

// feelBurstOf starts n calls at once.
func feelBurstOf(client *http.Client, target, key string, n int) []feelCall {
	calls := make([]feelCall, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			calls[i] = feelRequest(client, target, key)
		}()
	}
	close(gate)
	wg.Wait()
	return calls
}

// feelQuantiles is the p50 and p99 of first-byte and total times of the
// calls that were answered whole, and how many were not (a front or the
// machine past its capacity drops some).
func feelQuantiles(calls []feelCall) (first50, first99, total50, total99 time.Duration, failed int, err error) {
	var first, total []time.Duration
	for _, c := range calls {
		if c.err != nil {
			failed++
			err = c.err
			continue
		}
		first = append(first, c.first)
		total = append(total, c.total)
	}
	if len(first) == 0 {
		return 0, 0, 0, 0, failed, err
	}
	q := func(d []time.Duration, p float64) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[min(len(d)-1, int(p*float64(len(d))))]
	}
	return q(first, 0.5), q(first, 0.99), q(total, 0.5), q(total, 0.99), failed, nil
}

// BenchmarkUserLatency is what a user of the gateway feels, beside the
// bare proxy, at two loads: 50 and 200 streamed chat calls a second (about
// as many streams open at once) for five seconds on each front, the fronts
// taking turns a second each; then bursts of 500 and 2,000 calls started
// together, two on each front (bare, dev, dev, bare). Each call is a
// 100-event answer over about a second. For each front it reports the p50
// and p99 of the time to the first byte and to the end of the answer, in
// milliseconds, and the latency the gateway adds (dev's quantile less
// bare's), and how many calls were not answered whole (failed; the
// quantiles are of the others). Client, gateway, accountant and upstream share
// the machine, so the burst measures the whole machine's capacity, not
// only the gateway's. One op is the whole run:
//
//	go test ./e2e -run '^$' -bench UserLatency -benchtime 1x
func BenchmarkUserLatency(b *testing.B) {
	st := stub.New(stub.Options{History: -1})
	// The upstream paces every answer itself, so that both fronts get the
	// same answer whatever headers a front forwards (dev drops any client
	// header whose name holds "token", as it may carry a credential).
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set(stub.HeaderCompletionTokens, fmt.Sprint(feelEvents))
		r.Header.Set(stub.HeaderPieces, fmt.Sprint(feelEvents))
		r.Header.Set(stub.HeaderDelayMS, fmt.Sprint(feelFirstMS))
		r.Header.Set(stub.HeaderChunkDelayMS, fmt.Sprint(feelBetweenMS))
		st.ServeHTTP(w, r)
	}))
	b.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	bare := httputil.NewSingleHostReverseProxy(u)
	bare.Transport = pooledTransport()
	bare.FlushInterval = -1 // stream as the events come, as the gateway does
	bareFront := httptest.NewServer(bare)
	b.Cleanup(bareFront.Close)
	s := startDev(b, "testdata/bench.yaml", up.URL)
	key := mint(testContext(b), b, s, dev1)
	fronts := []struct{ name, url string }{{"bare", bareFront.URL}, {"dev", s.URL()}}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, DisableCompression: true}}
	defer client.CloseIdleConnections()
	for _, f := range fronts { // warm: connections, cells, the filter's buffers
		for _, c := range feelBurstOf(client, f.url+"/v1/chat/completions", key, 16) {
			if c.err != nil {
				b.Fatalf("%s: %v", f.name, c.err)
			}
		}
	}
	type row struct {
		first50, first99, total50, total99 time.Duration
		failed                             int
	}
	targets := []string{fronts[0].url + "/v1/chat/completions", fronts[1].url + "/v1/chat/completions"}
	for _, load := range []struct{ rate, burst int }{{50, 500}, {200, 2000}} {
		b.Run(fmt.Sprintf("rate=%d/burst=%d", load.rate, load.burst), func(b *testing.B) {
			results := map[string]row{}
			for b.Loop() {
				steady := feelSteady(client, targets, key, load.rate)
				// The bursts go bare, dev, dev, bare, so that a drift of
				// the machine's load over the run falls on both alike.
				burst := make([][]feelCall, 2)
				for _, k := range []int{0, 1, 1, 0} {
					burst[k] = append(burst[k], feelBurstOf(client, targets[k], key, load.burst)...)
				}
				for k, f := range fronts {
					for phase, calls := range map[string][]feelCall{"steady": steady[k], "burst": burst[k]} {
						f50, f99, t50, t99, failed, err := feelQuantiles(calls)
						if err != nil {
							b.Fatalf("%s %s: no call was answered whole: %v", phase, f.name, err)
						}
						results[phase+"-"+f.name] = row{f50, f99, t50, t99, failed}
					}
				}
			}
			b.StopTimer()
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			for _, phase := range []string{"steady", "burst"} {
				for _, f := range fronts {
					r := results[phase+"-"+f.name]
					b.ReportMetric(ms(r.first50), phase+"-"+f.name+"-first-p50-ms")
					b.ReportMetric(ms(r.first99), phase+"-"+f.name+"-first-p99-ms")
					b.ReportMetric(ms(r.total50), phase+"-"+f.name+"-total-p50-ms")
					b.ReportMetric(ms(r.total99), phase+"-"+f.name+"-total-p99-ms")
					b.ReportMetric(float64(r.failed), phase+"-"+f.name+"-failed")
				}
				bare, dev := results[phase+"-bare"], results[phase+"-dev"]
				b.ReportMetric(ms(dev.first50-bare.first50), phase+"-added-first-p50-ms")
				b.ReportMetric(ms(dev.first99-bare.first99), phase+"-added-first-p99-ms")
				b.ReportMetric(ms(dev.total50-bare.total50), phase+"-added-total-p50-ms")
				b.ReportMetric(ms(dev.total99-bare.total99), phase+"-added-total-p99-ms")
			}
		})
	}
}
