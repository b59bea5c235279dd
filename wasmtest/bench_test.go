package wasmtest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// stubLLM answers like a small chat completion.
var stubLLM = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Berlin."},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}`)
})

const benchBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What is the capital of Germany?"}]}`

// BenchmarkRequest is one request through every callback of a guest
// (context create, request headers and body, response headers and body,
// log, done, delete) via Do, against an in-process upstream.
func BenchmarkRequest(b *testing.B) {
	for _, g := range []struct {
		name string
		mod  func(testing.TB) []byte
		mode string
	}{
		{"noop", testwasm.Noop, ""},
		{"conformance", conformance, "plain"},
	} {
		b.Run(g.name, func(b *testing.B) {
			h := newHost(b, Config{Module: g.mod(b), Upstream: Cluster{Handler: stubLLM}, LogLevel: LogInfo})
			req := Request{Method: "POST", Path: "/v1/chat/completions", Headers: hdr("Content-Type", "application/json", "Authorization", "Bearer tt-vk_abc", "X-Mode", g.mode), BodyChunks: chunks(benchBody)}
			if resp := h.Do(req); resp.Status != 200 {
				b.Fatalf("status %d: %s", resp.Status, resp.Body)
			}
			before := h.Counts()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h.Do(req)
			}
			b.StopTimer()
			reportCounts(b, before, h.Counts())
		})
	}
}

func reportCounts(b *testing.B, before, after Counts) {
	n := float64(after.Streams - before.Streams)
	if n == 0 {
		return
	}
	b.ReportMetric(float64(after.HostCalls-before.HostCalls)/n, "host-calls/op")
	b.ReportMetric(float64(after.GuestCalls-before.GuestCalls)/n, "guest-calls/op")
	b.ReportMetric(float64(after.SharedGets+after.SharedSets-before.SharedGets-before.SharedSets)/n, "shared-ops/op")
}

// benchProxies are the two proxies the comparisons run over one stub
// upstream (closed at the benchmark's end): a bare httputil.ReverseProxy
// and the host with the no-op filter (two worker VMs), sharing one
// transport.
func benchProxies(b *testing.B) (bare *httputil.ReverseProxy, h *Host) {
	upstream := httptest.NewServer(stubLLM)
	b.Cleanup(upstream.Close)
	u, _ := url.Parse(upstream.URL)
	transport := NewProxyTransport()
	bare = httputil.NewSingleHostReverseProxy(u)
	bare.Transport = transport
	h = newHost(b, Config{Module: testwasm.Noop(b), Workers: 2, Upstream: Cluster{URL: upstream.URL, Transport: transport}, LogLevel: LogInfo, Clock: RealClock()})
	return bare, h
}

// postBench posts benchBody to the chat completions of the proxy at base
// and reads the answer: false if it failed or was not a 200.
func postBench(client *http.Client, base string) bool {
	resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(benchBody))
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == 200
}

// BenchmarkProxy compares the host as a reverse proxy (the no-op filter,
// one worker VM per CPU) with a bare httputil.ReverseProxy, both over real
// connections to the same stub upstream, with parallel clients.
// Throughput ratio = bare ns/op ÷ wasm ns/op.
func BenchmarkProxy(b *testing.B) {
	bare, h := benchProxies(b)
	for _, c := range []struct {
		name    string
		handler http.Handler
	}{{"bare", bare}, {"wasm", h}} {
		b.Run(c.name, func(b *testing.B) {
			front := httptest.NewServer(c.handler)
			defer front.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
			var failed atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !postBench(client, front.URL) {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			if failed.Load() > 0 {
				b.Fatalf("%d requests failed", failed.Load())
			}
			client.CloseIdleConnections()
		})
	}
}

// BenchmarkProxyRatio alternates batches of parallel requests through the
// bare proxy and through the host, so that both see the same machine load,
// and reports the throughput ratio (bare time ÷ host time; ≥ 0.7 is the
// budget). b.N counts batches of 64 requests through each.
func BenchmarkProxyRatio(b *testing.B) {
	bare, h := benchProxies(b)
	fronts := []*httptest.Server{httptest.NewServer(bare), httptest.NewServer(h)}
	defer fronts[0].Close()
	defer fronts[1].Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	defer client.CloseIdleConnections()
	const batch, workers = 64, 8
	run := func(url string) (time.Duration, error) {
		start := time.Now()
		var wg sync.WaitGroup
		var failed atomic.Int64
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < batch/workers; i++ {
					if !postBench(client, url) {
						failed.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if n := failed.Load(); n > 0 {
			return 0, fmt.Errorf("%d requests failed", n)
		}
		return time.Since(start), nil
	}
	var spent [2]time.Duration
	for i := 0; i < b.N; i++ {
		for j, f := range fronts {
			d, err := run(f.URL)
			if err != nil {
				b.Fatal(err)
			}
			spent[j] += d
		}
	}
	n := float64(b.N * batch)
	b.ReportMetric(float64(spent[0].Nanoseconds())/n, "bare-ns/req")
	b.ReportMetric(float64(spent[1].Nanoseconds())/n, "wasm-ns/req")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "throughput-ratio")
}
