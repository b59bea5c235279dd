package accountant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/core"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/govern"
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

// TestStoppingDoesNotWaitOnAStalledWebhook: alerts queued for a webhook
// that never answers are given up AlertDrain after the accountant starts
// stopping, with a log line counting them, so SIGTERM does not hang on
// five seconds per queued alert.
func TestStoppingDoesNotWaitOnAStalledWebhook(t *testing.T) {
	f := newFixture(t, testConfig)
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hook.Close()
	defer close(release)
	var logs bytes.Buffer
	a := newAlerter(hook.URL, AlertJSON, "", slog.New(slog.NewTextHandler(&logs, nil)), f.s.metrics)
	a.drainIn = 50 * time.Millisecond
	var alerts []core.Alert
	for i := range 4 {
		alerts = append(alerts, core.Alert{LimitID: fmt.Sprintf("l%d", i), Type: govern.BudgetUSD, Node: "org:acme", Threshold: 0.5, At: t0})
	}
	a.emit(alerts)
	a.close()
	if !strings.Contains(logs.String(), "alerts not posted") {
		t.Fatalf("no log of the alerts given up:\n%s", logs.String())
	}
}

// TestNewRefusesBadInputsClearly: a data directory that is a file, an
// alert webhook that is not a URL and a data directory another accountant
// holds are refused at start with what is wrong and what to do.
func TestNewRefusesBadInputsClearly(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, testConfig)
	file := testkit.WriteFile(t, dir, "afile", []byte("x"))
	quiet := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"data is a file", Options{InternalToken: testInternalToken, ConfigPath: cfg, DataDir: file}, "is a file, not a directory; pass --data a directory"},
		{"webhook", Options{InternalToken: testInternalToken, ConfigPath: cfg, DataDir: filepath.Join(dir, "d0"), AlertWebhook: "::nope"}, `the alert webhook "::nope" is not an http(s) URL`},
		{"no internal token", Options{ConfigPath: cfg, DataDir: filepath.Join(dir, "d0")}, "accountant: no internal token; set TT_ACCOUNTANT_TOKEN or pass --internal-token-file FILE"},
		{"webhook scheme", Options{InternalToken: testInternalToken, ConfigPath: cfg, DataDir: filepath.Join(dir, "d0"), AlertWebhook: "ftp://x/y"}, `is not an http(s) URL`},
	} {
		c.o.Logger = quiet
		s, err := New(c.o)
		if err == nil {
			s.Close()
			t.Errorf("%s: started", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}

	data := filepath.Join(dir, "data")
	first, err := New(Options{InternalToken: testInternalToken, ConfigPath: cfg, DataDir: data, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Options{InternalToken: testInternalToken, ConfigPath: cfg, DataDir: data, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "is in use by another accountant") || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Fatalf("a second accountant on the same data directory: %v", err)
	}
	first.Close()
	second, err := New(Options{InternalToken: testInternalToken, ConfigPath: cfg, DataDir: data, Logger: quiet})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	second.Close()
}

// TestReplayNamesTheLineItSkips: a line of decisions.jsonl that is not a
// row is skipped on start with a warning naming its line in the file
// (empty lines counted), and the rows around it are counted once.
func TestReplayNamesTheLineItSkips(t *testing.T) {
	f := newFixture(t, testConfig)
	f.ingest(t, batch(row(reqID(1), t0, "org:acme/team:ml", "gpt-4o-mini", 10, 10)))
	f.s.Close()
	path := filepath.Join(f.dir, "data", "decisions.jsonl")
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.Write([]byte("\n{not a row\n"))
	fh.Write(batch(row(reqID(2), t0, "org:acme/team:ml", "gpt-4o-mini", 10, 10)))
	fh.Close()
	f.logs.Reset()
	f.start(t)
	if !strings.Contains(f.logs.String(), "skipping a line that is not a ledger row") || !strings.Contains(f.logs.String(), "line=3") {
		t.Errorf("the skipped line is not named as line 3:\n%s", f.logs.String())
	}
	for _, e := range f.sync(t, "").Snapshot.Entries {
		if strings.HasPrefix(e.ID, "team_daily_requests|") && e.Value != 2 {
			t.Errorf("%s = %d, want 2", e.ID, e.Value)
		}
	}
}

// TestMissingConfigNamedOnce: a config file that cannot be read is named
// once, with the cause (it read "x.yaml: configfile: cannot read x.yaml: …").
func TestMissingConfigNamedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.yaml")
	_, err := CompileFile(path)
	if err == nil || err.Error() != "cannot read the config file "+path+": no such file or directory" {
		t.Errorf("%v", err)
	}
}
