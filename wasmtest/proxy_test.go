package wasmtest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// sse is an upstream that sends one event, waits for release, then sends
// the rest: a client that sees the first event before release proves the
// proxy streams.
type sse struct{ release chan struct{} }

func (s sse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, "data: one\n\n")
	w.(http.Flusher).Flush()
	<-s.release
	io.WriteString(w, "data: two\n\n")
	w.(http.Flusher).Flush()
	io.WriteString(w, "data: [DONE]\n\n")
}

func TestSSEStreamsThroughTheProxy(t *testing.T) {
	up := sse{release: make(chan struct{})}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	h := newHost(t, Config{Upstream: Cluster{URL: upstream.URL}})
	front := httptest.NewServer(h)
	defer front.Close()

	req, _ := http.NewRequest("POST", front.URL+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Mode", "resp-stream")
	req.Header.Set("X-Request-Id", "sse")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength != -1 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("length %d, type %q", resp.ContentLength, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || first != "|data: one\n" {
		t.Fatalf("first line %q, %v: the first event did not arrive before the upstream finished", first, err)
	}
	close(up.release)
	rest, _ := io.ReadAll(br)
	if got := first + string(rest); !strings.HasPrefix(got, "|data: one\n\n|data: two\n\n") || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Errorf("stream %q", got)
	}
	h.Close()
	n := notes(t, h, "sse")
	if !strings.Contains(n, "resp-body:11;") {
		t.Errorf("notes %q: want the first event in a body callback of its own", n)
	}
}

// The chunks a handler upstream flushes reach Do's client one by one.
func TestDoRecordsChunks(t *testing.T) {
	up := sse{release: make(chan struct{})}
	close(up.release)
	h := newHost(t, Config{Upstream: Cluster{Handler: up}})
	resp := h.Do(Request{Headers: hdr("X-Mode", "plain")})
	if len(resp.Chunks) < 2 || string(resp.Chunks[0]) != "data: one\n\n" {
		t.Errorf("chunks %q", resp.Chunks)
	}
}

// A client that goes away resets the stream: the filter's lifecycle still
// completes and the upstream request is cancelled.
func TestClientDisconnectResetsStream(t *testing.T) {
	started := make(chan struct{})
	cancelled := make(chan struct{})
	h := newHost(t, Config{Upstream: Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		close(cancelled)
	})}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Response)
	go func() { done <- h.Do(Request{Headers: hdr("X-Mode", "plain", "X-Request-Id", "gone"), Context: ctx}) }()
	<-started
	cancel()
	resp := <-done
	<-cancelled
	if !resp.Reset {
		t.Errorf("got %d, want a reset", resp.Status)
	}
	n := notes(t, h, "gone")
	if !strings.HasSuffix(n, "|log,done,delete") || !strings.Contains(n, "log-details=downstream_remote_disconnect") {
		t.Errorf("notes %q", n)
	}
}

// The same over a real connection: the client hangs up mid-stream.
func TestClientHangsUpOverHTTP(t *testing.T) {
	up := sse{release: make(chan struct{})}
	h := newHost(t, Config{Upstream: Cluster{Handler: up}})
	front := httptest.NewServer(h)
	defer front.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", front.URL, nil)
	req.Header.Set("X-Request-Id", "hangup")
	req.Header.Set("X-Mode", "plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, _ := br.ReadString('\n'); line != "data: one\n" {
		t.Fatalf("first line %q", line)
	}
	cancel()
	resp.Body.Close()
	close(up.release)
	front.Close() // waits for the handler to return
	if n := notes(t, h, "hangup"); !strings.HasSuffix(n, "|log,done,delete") {
		t.Errorf("notes %q", n)
	}
}

// An upstream that cannot be reached is a 503 from the host that still
// passes through the filter's response callbacks, as Envoy's router does.
func TestUpstreamConnectFailure(t *testing.T) {
	h := newHost(t, Config{Upstream: Cluster{URL: "http://127.0.0.1:1"}})
	resp := h.Do(Request{Headers: hdr("X-Mode", "headers", "X-Request-Id", "down")})
	if resp.Status != 503 || !strings.HasPrefix(string(resp.Body), "upstream connect error or disconnect/reset before headers") {
		t.Errorf("got %d %q", resp.Status, resp.Body)
	}
	if resp.Headers.Get("X-Resp-Added") != "1" {
		t.Error("the filter's response callbacks did not run for the 503")
	}
	if n := notes(t, h, "down"); !strings.Contains(n, "log-details=upstream_reset_before_response_started{connection_failure}") {
		t.Errorf("notes %q", n)
	}
}

// Request and response trailers pass through, and the filter can edit
// them in their own callbacks.
func TestTrailersPassThrough(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Up-Trailer")
		echo(w, r)
		w.Header().Set("X-Up-Trailer", "u")
	})
	h := newHost(t, Config{Upstream: Cluster{Handler: up}})
	resp := h.Do(Request{Headers: hdr("X-Mode", "plain", "X-Request-Id", "tr"), BodyChunks: chunks("ab"), Trailers: hdr("X-Trailer", "v")})
	if !strings.Contains(string(resp.Body), "trailers: X-Filter-Trailer=yes X-Trailer=v") {
		t.Errorf("upstream saw\n%s", resp.Body)
	}
	if resp.Trailers.Get("X-Up-Trailer") != "u" || resp.Trailers.Get("X-Filter-Resp-Trailer") != "yes" {
		t.Errorf("client trailers %v", resp.Trailers)
	}
	n := notes(t, h, "tr")
	if !strings.Contains(n, "req-trailers=1:v") || !strings.Contains(n, "resp-trailers=1") {
		t.Errorf("notes %q", n)
	}
}

// The no-op filter, built like the real one, serves through the proxy.
func TestNoopFilterThroughTheProxy(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(echo))
	defer upstream.Close()
	h := newHost(t, Config{Module: testwasm.Noop(t), Workers: 2, Upstream: Cluster{URL: upstream.URL}})
	front := httptest.NewServer(h)
	defer front.Close()
	for i := 0; i < 4; i++ {
		resp, err := http.Post(front.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `body: {"model":"m"}`) {
			t.Fatalf("got %d\n%s", resp.StatusCode, body)
		}
	}
	if err := CheckImports(context.Background(), testwasm.Noop(t)); err != nil {
		t.Error(err)
	}
	if c := h.Counts(); c.Streams != 4 {
		t.Errorf("counts %+v", c)
	}
}

// A provider behind the proxy gets its own host name and a key the client
// never sent, while the filter sees what the client sent.
func TestClusterHostRewriteAndSetHeaders(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(echo))
	defer upstream.Close()
	h := newHost(t, Config{Upstream: Cluster{URL: upstream.URL, AutoHostRewrite: true, SetHeaders: hdr("Authorization", "Bearer provider-key")}})
	resp := h.Do(Request{Host: "gateway.local", Headers: hdr("X-Mode", "properties", "Authorization", "Bearer tt-vk_client")})
	if !strings.Contains(string(resp.Body), "host=gateway.local") {
		t.Errorf("the filter saw %s", resp.Body)
	}
	resp = h.Do(Request{Host: "gateway.local", Headers: hdr("X-Mode", "plain", "Authorization", "Bearer tt-vk_client")})
	body := string(resp.Body)
	if !strings.Contains(body, "host="+strings.TrimPrefix(upstream.URL, "http://")) || !strings.Contains(body, "Authorization: Bearer provider-key") || strings.Contains(body, "tt-vk_client") {
		t.Errorf("upstream saw\n%s", body)
	}
}
