package devserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// closedRows stops s (every queued row reaches the ledger) and returns the
// rows its ledger holds.
func closedRows(t testing.TB, s *Server) []ledger.Row {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	files, err := ledgerlog.Files(s.opts.DataDir, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var rows []ledger.Row
	for _, f := range files {
		err := ledgerlog.ScanFile(f, func(line []byte) error {
			r, err := ledgerlog.ParseRow(line)
			rows = append(rows, r)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return rows
}

// post sends a chat request with the key and extra headers and returns the
// status and body.
func post(t *testing.T, url, key string, extra http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
	for k, vs := range extra {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, b := testkit.Send(t, req)
	return resp.StatusCode, string(b)
}

func manyHeaders(n int) http.Header {
	h := http.Header{}
	for i := range n {
		h[fmt.Sprintf("X-H%d", i)] = []string{"v"}
	}
	return h
}

// TestHeaderFloodIsRefusedOrKeptWhole: a request past the gateway's header
// limits (Envoy's defaults, 100 fields and 60 KiB) is answered 431 before
// the filter runs, and leaves no row; with the limits raised, a governed
// request of 1,100 header fields, or with one header over 1 MiB, reaches
// the provider whole (its method, path and every header, the virtual key
// removed) and is recorded as what it was. Before, the filter rewrote the
// whole map to drop the key and the host emptied it: the provider got GET /
// with no header, recorded as an admitted chat call.
func TestHeaderFloodIsRefusedOrKeptWhole(t *testing.T) {
	ctx := testkit.Context(t)
	s := start(t, Options{})
	k := mintKey(ctx, t, s, "org:acme/team:ml/user:dev1")
	s.Stub().Forget()
	for i, h := range []http.Header{manyHeaders(150), {"X-Big": {strings.Repeat("b", 61<<10)}}} {
		code, body := post(t, s.URL(), k.Key, h)
		if code != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(body, "max_request_headers_") {
			t.Errorf("step %d: %d %.200s, want 431 naming the limit", i, code, body)
		}
	}
	if rec := s.Stub().Requests(); len(rec) != 0 {
		t.Errorf("the provider saw %d requests refused at their headers", len(rec))
	}
	if rows := closedRows(t, s); len(rows) != 0 {
		t.Errorf("%d ledger rows for requests refused before the filter: %+v", len(rows), rows[0])
	}

	s = start(t, Options{MaxRequestHeadersCount: 2000, MaxRequestHeadersKB: 4096})
	k = mintKey(ctx, t, s, "org:acme/team:ml/user:dev1")
	s.Stub().Forget()
	big := strings.Repeat("b", 1<<20+100)
	for i, h := range []http.Header{manyHeaders(1100), {"X-Big": {big}}} {
		if code, body := post(t, s.URL(), k.Key, h); code != 200 {
			t.Fatalf("step %d: %d %.300s", i, code, body)
		}
		rec, ok := s.Stub().Last()
		if !ok || rec.Method != http.MethodPost || rec.URI != "/v1/chat/completions" || !bytes.Contains(rec.Body, []byte(`"model":"gpt-4o-mini"`)) {
			t.Fatalf("step %d: the provider saw %s %s %.100s", i, rec.Method, rec.URI, rec.Body)
		}
		for name := range h {
			if got := rec.Header.Get(name); got != h.Get(name) {
				t.Errorf("step %d: the provider saw %s of %d bytes, want %d", i, name, len(got), len(h.Get(name)))
				break
			}
		}
		if got := rec.Header.Get("Authorization"); got != "" {
			t.Errorf("step %d: the virtual key reached the provider: %.40s", i, got)
		}
	}
	rows := closedRows(t, s)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	for i, r := range rows {
		if r.Endpoint != "/v1/chat/completions" || r.Decision != ledger.Admitted || r.KID == "" || r.Usage.Input == 0 || r.Estimated.Input {
			t.Errorf("row %d: %+v", i, r)
		}
	}
}

// usageUpstream answers every request with the usage object its
// X-Test-Usage header names, as JSON, or as an SSE stream when the request
// asks for one; the rest is what a provider sends.
func usageUpstream(w http.ResponseWriter, r *http.Request) {
	usage := r.Header.Get("X-Test-Usage")
	body, _ := io.ReadAll(r.Body)
	if bytes.Contains(body, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c1\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello there, how are you today?\"}}]}\n\n")
		io.WriteString(w, "data: {\"id\":\"c1\",\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":"+usage+"}\n\ndata: [DONE]\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":`+usage+`}`)
}

// TestProviderUsageIsBoundedAndRead: an upstream reporting usage no request
// could produce (1e12, 2^63-1, 1e308 prompt tokens) is billed the bound
// (the model's context bound, the output maximum), its rows marked
// estimated and usage_clamped, counted, and logged naming the upstream; so
// three such answers no longer exhaust an org's month. Usage given as a
// string, a negative or a fraction is estimated from the prompt and the
// streamed text, as missing usage is, never read as an exact 0.
func TestProviderUsageIsBoundedAndRead(t *testing.T) {
	ctx := testkit.Context(t)
	up := httptest.NewServer(http.HandlerFunc(usageUpstream))
	defer up.Close()
	var filterLog testkit.Buffer
	s := start(t, Options{Upstream: up.URL, OpenAIKey: "sk-test", FilterLog: &filterLog})
	k := mintKey(ctx, t, s, "org:acme/team:ml/user:dev1")
	send := func(usage string, stream bool) {
		t.Helper()
		body := `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"What is the capital of Germany?"}]}`
		if stream {
			body = `{"model":"gpt-4o-mini","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"What is the capital of Germany?"}]}`
		}
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+k.Key)
		req.Header.Set("X-Test-Usage", usage)
		resp, b := testkit.Send(t, req)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", usage, resp.StatusCode, b)
		}
	}
	absurd := []string{
		`{"prompt_tokens":1e12,"completion_tokens":5,"total_tokens":1000000000005}`,
		`{"prompt_tokens":9223372036854775807,"completion_tokens":5,"total_tokens":9223372036854775807}`,
		`{"prompt_tokens":1e308,"completion_tokens":5}`,
	}
	for _, u := range absurd {
		send(u, false)
	}
	malformed := []string{`{"prompt_tokens":"10","completion_tokens":5,"total_tokens":15}`, `{"prompt_tokens":-5,"completion_tokens":5}`, `{"prompt_tokens":"ten","completion_tokens":5}`}
	send(malformed[0], false)
	send(malformed[1], false)
	send(malformed[2], true)
	if n, _ := s.Host().Metric("tokentriage.usage_clamped"); n != 3 {
		t.Errorf("tokentriage.usage_clamped = %d, want 3", n)
	}
	rows := closedRows(t, s)
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6", len(rows))
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Start.Before(rows[j].Start) })
	upAddr := strings.TrimPrefix(up.URL, "http://")
	for i, r := range rows[:3] {
		// gpt-4o-mini's bound is twice its 128,000-token window; the
		// output is held to max_tokens.
		if r.Usage.Input != 256_000 || r.Usage.Output != 5 || !r.Estimated.Input || !r.UsageClamped {
			t.Errorf("absurd %d: %+v estimated %+v clamped %v", i, r.Usage, r.Estimated, r.UsageClamped)
		}
		// 256,000 input tokens of gpt-4o-mini cost cents, not billions.
		if r.Cost == nil || r.Cost.Nanos > 1e9 {
			t.Errorf("absurd %d: cost %+v", i, r.Cost)
		}
	}
	if got := strings.Count(filterLog.String(), "the upstream "+upAddr); got != 3 {
		t.Errorf("%d log lines name the upstream %s, want 3:\n%s", got, upAddr, filterLog.String())
	}
	for i, r := range rows[3:] {
		// "What is the capital of Germany?" is 31 bytes: 8 tokens.
		if r.Usage.Input != 8 || !r.Estimated.Input || !r.Estimated.Output || r.UsageClamped {
			t.Errorf("malformed %d (%s): %+v estimated %+v", i, malformed[i], r.Usage, r.Estimated)
		}
	}
	if r := rows[5]; r.Usage.Output != 8 { // 31 bytes of streamed text
		t.Errorf("malformed streamed usage: output %d, want the streamed text's 8", r.Usage.Output)
	}
}

// inFlight is the user_concurrency gauge /tt/v1/me shows for key.
func inFlight(t *testing.T, s *Server, key string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.URL()+"/tt/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var me struct {
		Limits []struct {
			LimitID  string  `json:"limit_id"`
			Observed float64 `json:"observed"`
		} `json:"limits"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&me); err != nil {
		t.Fatal(err)
	}
	for _, l := range me.Limits {
		if l.LimitID == "user_concurrency" {
			return int(l.Observed)
		}
	}
	t.Fatal("/tt/v1/me lists no user_concurrency")
	return 0
}

// TestEndpointVariantsAreRefusedAndPassthroughRecorded: with a key that
// allows passthrough, another spelling of a governed endpoint (escaped, in
// other case, with ;parameters, a trailing escaped slash, a lower-case
// method), which a server on the way may route as that endpoint, is
// refused with a 400 naming the canonical path and never reaches the
// upstream; every request that does reach it, passthrough included,
// leaves a ledger row. Before, the variants went upstream verbatim and
// left no row.
func TestEndpointVariantsAreRefusedAndPassthroughRecorded(t *testing.T) {
	ctx := testkit.Context(t)
	s := start(t, Options{})
	k, err := s.MintKey(ctx, "org:acme/team:ml/user:dev1", vkey.Scopes{AllowPassthrough: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Stub().Forget()
	do := func(method, path string) (int, string) {
		t.Helper()
		override := ""
		if m, rest, ok := strings.Cut(method, "+"); ok {
			method, override = m, rest
		}
		req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if override != "" {
			req.Header.Set("X-HTTP-Method-Override", override)
		}
		req.Header.Set("Authorization", "Bearer "+k.Key)
		resp, b := testkit.Send(t, req)
		return resp.StatusCode, string(b)
	}
	variants := []struct{ method, path string }{
		{"POST", "/v1/chat%2Fcompletions"},
		{"POST", "/V1/CHAT/COMPLETIONS"},
		{"POST", "/v1/chat/completions;x"},
		{"POST", "/v1/chat/completions%2F"},
		{"POST", "/v1/chat%252Fcompletions"},
		{"post", "/v1/chat/completions"},
		{"POST", "/v1/Messages"},
		{"GET+POST", "/v1/chat/completions"}, // X-HTTP-Method-Override: POST
		{"PUT+post", "/v1/responses"},
	}
	for _, c := range variants {
		code, body := do(c.method, c.path)
		if code != 400 || !strings.Contains(body, `"type":"invalid_request"`) || !strings.Contains(body, "/v1/") || !strings.Contains(body, "spelling") && !strings.Contains(body, "override") {
			t.Errorf("%s %s: %d %s, want a 400 naming the canonical path", c.method, c.path, code, body)
		}
	}
	if rec := s.Stub().Requests(); len(rec) != 0 {
		t.Errorf("%d variants reached the upstream: %s %s", len(rec), rec[0].Method, rec[0].URI)
	}
	for _, c := range []struct{ method, path string }{{"GET", "/v1/models"}, {"POST", "/v1/files"}, {"GET", "/v1/chat/completions"}} {
		do(c.method, c.path)
	}
	if n := len(s.Stub().Requests()); n != 3 {
		t.Errorf("the upstream saw %d passthrough requests, want 3", n)
	}
	if n, _ := s.Host().Metric("tokentriage.endpoint_variant"); n != int64(len(variants)) {
		t.Errorf("tokentriage.endpoint_variant = %d, want %d", n, len(variants))
	}
	rows := closedRows(t, s)
	var refused, passthrough []string
	for _, r := range rows {
		switch r.Decision {
		case ledger.Refused:
			refused = append(refused, r.Endpoint)
		case ledger.Passthrough:
			passthrough = append(passthrough, r.Endpoint)
			if r.KID != k.KID || r.Node != "org:acme/team:ml/user:dev1" || r.Status == 0 || r.Cost != nil {
				t.Errorf("passthrough row %+v", r)
			}
		default:
			t.Errorf("row %s %s", r.Decision, r.Endpoint)
		}
	}
	sort.Strings(passthrough)
	if len(refused) != len(variants) || strings.Join(passthrough, " ") != "/v1/chat/completions /v1/files /v1/models" {
		t.Errorf("refused rows %q, passthrough rows %q", refused, passthrough)
	}
}

// TestStalledBodiesTimeOut: ten clients that send 40 of a promised 1,000
// bytes of a governed request hold the user's ten concurrency leases; the
// stream idle timeout answers each 408 and the leases come back, so the
// user is served again. Before, the leases stayed held for as long as the
// connections stayed open.
func TestStalledBodiesTimeOut(t *testing.T) {
	ctx := testkit.Context(t)
	s := start(t, Options{StreamIdleTimeout: 2 * time.Second})
	k := mintKey(ctx, t, s, "org:acme/team:ml/user:dev1")
	addr := strings.TrimPrefix(s.URL(), "http://")
	deadline, _ := ctx.Deadline()
	conns := make([]net.Conn, 10)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n%s",
			addr, k.Key, `{"model":"gpt-4o-mini","messages":[{"ro`)
		conns[i] = c
	}
	// Once the ten hold their leases (the gateway's live gauge says so),
	// the user is at its concurrency cap.
	for inFlight(t, s, k.Key) != 10 {
		if ctx.Err() != nil {
			t.Fatalf("the ten stalled requests never held the user's ten leases: %d held", inFlight(t, s, k.Key))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body := post(t, s.URL(), k.Key, nil); code != 429 || !strings.Contains(body, "user_concurrency") {
		t.Fatalf("while ten bodies stall: %d %s, want the concurrency 429", code, body)
	}
	for i, c := range conns {
		c.SetReadDeadline(deadline)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("stalled request %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("stalled request %d: %d, want 408", i, resp.StatusCode)
		}
	}
	if code, body := post(t, s.URL(), k.Key, nil); code != 200 {
		t.Errorf("after the stalled requests timed out: %d %s", code, body)
	}
}
