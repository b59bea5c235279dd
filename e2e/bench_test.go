package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// benchBody is the request every benchmark client sends: a short chat
// completion whose answer is 16 tokens.
const benchBody = `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"What is the capital of Germany?"}]}`

// benchClients is how many clients run per GOMAXPROCS (b.SetParallelism).
const benchClients = 8

// pooledTransport is a proxy's transport to its upstream, the same for
// the bare proxy and for the dev system: keep-alive with enough idle
// connections for every client, no transparent decompression.
func pooledTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   true,
	}
}

// BenchmarkDevThroughput measures requests per second through the dev
// system (the filter in the embedded proxy with the example config's nine
// limits on the key's chain, the accountant ingesting every row) beside a
// bare httputil.ReverseProxy, both in front of the same stub upstream and
// both driven over real loopback connections by the same parallel clients,
// in the same run. noop is the same dev system serving the no-op filter
// (build/noop.wasm, built the same way): the embedded host's own floor, so
// that dev − noop is what the filter itself costs. Each sub-benchmark after
// bare reports ratio = its req/s ÷ the bare proxy's (DESIGN.md's budget for
// dev: ≥ 0.7). Run them together:
//
//	go test ./e2e -run '^$' -bench 'DevThroughput$' -benchtime 5s
func BenchmarkDevThroughput(b *testing.B) {
	sys := newBenchSystems(b)
	var bareRate float64
	for _, c := range sys.fronts {
		b.Run(c.name, func(b *testing.B) {
			client := benchClient()
			defer client.CloseIdleConnections()
			target := c.url + "/v1/chat/completions"
			var failed atomic.Int64
			var lastErr atomic.Value
			b.SetParallelism(benchClients)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := benchRequest(client, target, sys.key); err != nil {
						failed.Add(1)
						lastErr.Store(err.Error())
					}
				}
			})
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d of %d requests failed; the last: %v", n, b.N, lastErr.Load())
			}
			rate := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "req/s")
			switch {
			case c.name == "bare":
				bareRate = rate
			case bareRate > 0:
				b.ReportMetric(rate/bareRate, "ratio")
			}
		})
	}
}

// BenchmarkDevThroughputRatio measures the same three fronts as
// BenchmarkDevThroughput, interleaved: each iteration sends a batch of
// requests from the same parallel clients to bare, noop and dev in turn,
// and the ratios are of the summed times. A load spike from other work on
// the machine then hits all three alike instead of one sub-benchmark. It
// flatters dev somewhat: work the dev system defers to its ticks (ledger
// flushes, syncs, the accountant's ingest) partly lands in the other
// fronts' batches, so BenchmarkDevThroughput is the sustained figure.
//
//	go test ./e2e -run '^$' -bench DevThroughputRatio -benchtime 100x -count 3
func BenchmarkDevThroughputRatio(b *testing.B) {
	sys := newBenchSystems(b)
	client := benchClient()
	defer client.CloseIdleConnections()
	const batch = 64 * benchClients
	spent := make([]time.Duration, len(sys.fronts))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, f := range sys.fronts {
			d, err := benchBatch(client, f.url+"/v1/chat/completions", sys.key, batch, 2*benchClients)
			if err != nil {
				b.Fatalf("%s: %v", f.name, err)
			}
			spent[j] += d
		}
	}
	b.StopTimer()
	n := float64(b.N * batch)
	for j, f := range sys.fronts {
		b.ReportMetric(n/spent[j].Seconds(), f.name+"-req/s")
		if j > 0 {
			b.ReportMetric(float64(spent[0])/float64(spent[j]), f.name+"-ratio")
		}
	}
}

// benchSystems are the fronts the throughput benchmarks compare, all in
// front of one stub upstream: a bare reverse proxy, the dev system serving
// the no-op filter, and the dev system serving the filter.
type benchSystems struct {
	fronts []struct{ name, url string }
	key    string
}

func newBenchSystems(b *testing.B) *benchSystems {
	st := stub.New(stub.Options{History: -1})
	up := httptest.NewServer(st)
	b.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	bare := httputil.NewSingleHostReverseProxy(u)
	bare.Transport = pooledTransport()
	bareFront := httptest.NewServer(bare)
	b.Cleanup(bareFront.Close)

	noop := startModule(b, "testdata/bench.yaml", up.URL, testwasm.Noop(b))
	s := startDev(b, "testdata/bench.yaml", up.URL)
	return &benchSystems{
		fronts: []struct{ name, url string }{
			{"bare", bareFront.URL},
			{"noop", noop.URL()},
			{"dev", s.URL()},
		},
		key: mint(testContext(b), b, s, dev1),
	}
}

func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, DisableCompression: true}}
}

// benchRequest sends one chat completion and reads the whole answer.
func benchRequest(client *http.Client, target, key string) error {
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(benchBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", target, resp.Status)
	}
	return nil
}

// benchBatch sends n requests from clients goroutines and returns how long
// they took.
func benchBatch(client *http.Client, target, key string, n, clients int) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	var lastErr atomic.Value
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/clients; i++ {
				if err := benchRequest(client, target, key); err != nil {
					failed.Add(1)
					lastErr.Store(err.Error())
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return 0, fmt.Errorf("%d of %d requests failed; the last: %v", f, n, lastErr.Load())
	}
	return time.Since(start), nil
}
