package accountant

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestAbsurdUsageSaturatesCounters: rows reporting usage near the int64
// ceiling are accepted (they are valid rows), but the counters they fold
// into pin at the ceiling instead of wrapping negative, which would read as
// spend far under every limit; a restart re-derives the same values.
func TestAbsurdUsageSaturatesCounters(t *testing.T) {
	f := newFixture(t, testConfig)
	var rows []ledger.Row
	for i := range 3 {
		r := row(reqID(900+i), t0, "org:acme/team:ml", "gpt-4o-mini", math.MaxInt64, math.MaxInt64)
		r.Usage.Total = math.MaxInt64
		rows = append(rows, r)
	}
	if ack := f.ingest(t, batch(rows...)); ack.Accepted != 3 {
		t.Fatalf("ack %+v", ack)
	}
	check := func(when string) {
		t.Helper()
		seen := 0
		for _, e := range f.sync(t, "").Snapshot.Entries {
			if e.Value < 0 {
				t.Errorf("%s: counter %s wrapped to %d", when, e.ID, e.Value)
			}
			if strings.HasPrefix(e.ID, "team_monthly_tokens|") || strings.HasPrefix(e.ID, "org_monthly_budget|") {
				seen++
				if e.Value != math.MaxInt64 {
					t.Errorf("%s: counter %s = %d, want it pinned at %d", when, e.ID, e.Value, int64(math.MaxInt64))
				}
			}
		}
		if seen != 2 {
			t.Errorf("%s: %d of the two counters in the snapshot", when, seen)
		}
	}
	check("after ingest")
	f.restart(t)
	check("after restart")
}

// TestAccountantRoutesAnswerJSONErrors: an unknown path or a wrong method
// on the accountant's own routes gets a JSON error naming what to call,
// with 404 or 405 (and Allow), like the management API's answers.
func TestAccountantRoutesAnswerJSONErrors(t *testing.T) {
	f := newFixture(t, testConfig)
	for _, c := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/tt/internal/v1/ingest", http.StatusMethodNotAllowed, "POST"},
		{"DELETE", "/tt/internal/v1/sync", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"POST", "/healthz", http.StatusMethodNotAllowed, "GET, HEAD"},
		{"GET", "/nope", http.StatusNotFound, ""},
		{"GET", "/tt/internal/v1/", http.StatusNotFound, ""},
	} {
		req, _ := http.NewRequest(c.method, c.path, nil)
		w := &recorder{h: http.Header{}}
		f.s.Handler().ServeHTTP(w, req)
		var body struct {
			Error struct{ Message string } `json:"error"`
		}
		if w.code != c.status || json.Unmarshal(w.body, &body) != nil || body.Error.Message == "" ||
			!strings.HasPrefix(w.h.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: %d %q %s", c.method, c.path, w.code, w.h.Get("Content-Type"), w.body)
			continue
		}
		if got := w.h.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
		if !strings.Contains(body.Error.Message, c.path) {
			t.Errorf("%s %s: the message does not name the path: %s", c.method, c.path, body.Error.Message)
		}
	}
}

type recorder struct {
	h    http.Header
	code int
	body []byte
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	r.body = append(r.body, b...)
	return len(b), nil
}
