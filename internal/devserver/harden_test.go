package devserver

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// closedRows stops s (every queued row reaches the ledger) and returns the
// rows its ledger holds.
func closedRows(t *testing.T, s *Server) []ledger.Row {
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
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
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
	ctx := testContext(t)
	s := start(t, Options{})
	k, err := s.MintKey(ctx, "org:acme/team:ml/user:dev1", vkey.Scopes{})
	if err != nil {
		t.Fatal(err)
	}
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
	k, err = s.MintKey(ctx, "org:acme/team:ml/user:dev1", vkey.Scopes{})
	if err != nil {
		t.Fatal(err)
	}
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
