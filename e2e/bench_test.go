package e2e

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
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
//	go test ./e2e -run '^$' -bench DevThroughput -benchtime 5s
func BenchmarkDevThroughput(b *testing.B) {
	st := stub.New(stub.Options{History: -1})
	up := httptest.NewServer(st)
	defer up.Close()
	u, _ := url.Parse(up.URL)
	bare := httputil.NewSingleHostReverseProxy(u)
	bare.Transport = pooledTransport()
	bareFront := httptest.NewServer(bare)
	defer bareFront.Close()

	noop := startModule(b, "testdata/bench.yaml", up.URL, testwasm.Noop(b))
	s := startDev(b, "testdata/bench.yaml", up.URL)
	key := mint(testContext(b), b, s, dev1)

	var bareRate float64
	for _, c := range []struct{ name, url string }{
		{"bare", bareFront.URL},
		{"noop", noop.URL()},
		{"dev", s.URL()},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, DisableCompression: true}}
			defer client.CloseIdleConnections()
			target := c.url + "/v1/chat/completions"
			var failed atomic.Int64
			var lastErr atomic.Value
			b.SetParallelism(benchClients)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(benchBody))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+key)
					resp, err := client.Do(req)
					if err != nil {
						failed.Add(1)
						lastErr.Store(err.Error())
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						failed.Add(1)
						lastErr.Store(resp.Status)
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
