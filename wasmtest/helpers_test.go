package wasmtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// conformance is the raw-ABI test guest (testdata/conformance).
func conformance(tb testing.TB) []byte {
	tb.Helper()
	return testwasm.Build(tb, "./wasmtest/testdata/conformance")
}

// t0 is the instant every manual clock starts at.
var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func newHost(tb testing.TB, cfg Config) *Host {
	tb.Helper()
	if cfg.Module == nil {
		cfg.Module = conformance(tb)
	}
	if cfg.Clock == nil {
		cfg.Clock = NewManualClock(t0)
	}
	if cfg.Upstream.Handler == nil && cfg.Upstream.URL == "" {
		cfg.Upstream = Cluster{Handler: http.HandlerFunc(echo)}
	}
	h, err := New(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	return h
}

// echo is an upstream that describes the request it got: method and target,
// the sorted headers, the body and the trailers.
func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var lines []string
	lines = append(lines, r.Method+" "+r.RequestURI+" host="+r.Host+" length="+fmt.Sprint(r.ContentLength))
	var keys []string
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lines = append(lines, k+": "+strings.Join(r.Header[k], ","))
	}
	lines = append(lines, "body: "+string(body))
	var tk []string
	for k, v := range r.Trailer {
		tk = append(tk, k+"="+strings.Join(v, ","))
	}
	sort.Strings(tk)
	if len(tk) > 0 {
		lines = append(lines, "trailers: "+strings.Join(tk, " "))
	}
	w.Header().Set("X-Upstream-Remove", "1")
	w.Header().Set("X-Upstream-Replace", "original")
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, strings.Join(lines, "\n"))
}

// notes returns what the conformance guest recorded for request id.
func notes(tb testing.TB, h *Host, id string) string {
	tb.Helper()
	v, _, ok := h.SharedData("notes:" + id)
	if !ok {
		tb.Fatalf("no notes for request %s; logs: %v", id, h.Logs())
	}
	return string(v)
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func chunks(ss ...string) [][]byte {
	var out [][]byte
	for _, s := range ss {
		out = append(out, []byte(s))
	}
	return out
}
