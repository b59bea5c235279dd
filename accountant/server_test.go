package accountant

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

var update = flag.Bool("update", false, "rewrite golden files with the actual output")

const testConfig = testkit.AcmeTenants + `  limits:
    - id: org_monthly_budget
      attach: { level: org }
      type: budget_usd
      amount_usd: 0.000001
      period: month
      posture: { thresholds: [0.5] }
    - id: team_monthly_tokens
      attach: { level: team }
      type: quota_tokens
      amount: 50000000
      period: month
    - id: team_daily_requests
      attach: { level: team }
      type: quota_requests
      amount: 20000
      period: day
    - id: team_rpm
      attach: { level: team }
      type: rpm
      amount: 300
      period: 1m
`

// clock is a settable clock for the server.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

var t0 = time.Date(2026, 8, 10, 12, 0, 0, 0, time.UTC)

type fixture struct {
	dir, config string
	pricing     string // a --pricing file, or ""
	clock       *clock
	s           *Server
	logs        *bytes.Buffer
}

func newFixture(t testing.TB, config string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, config: filepath.Join(dir, "tokentriage.yaml"), clock: &clock{t: t0}, logs: &bytes.Buffer{}}
	f.setConfig(t, config)
	f.start(t)
	return f
}

func (f *fixture) start(t testing.TB) {
	t.Helper()
	s, err := New(Options{
		ConfigPath: f.config, DataDir: filepath.Join(f.dir, "data"), AdminToken: "admin-secret", InternalToken: testInternalToken,
		Logger: slog.New(slog.NewTextHandler(f.logs, nil)), Now: f.clock.Now, PricingFile: f.pricing,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.s = s
	t.Cleanup(func() { s.Close() })
}

func (f *fixture) restart(t testing.TB) {
	t.Helper()
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	f.start(t)
}

// testInternalToken is the internal token of the test accountants.
const testInternalToken = "internal-secret"

// internalClient is an HTTP client that sends the internal token.
var internalClient = &http.Client{Timeout: 10 * time.Second, Transport: bearer{testInternalToken, http.DefaultTransport}}

// bearer adds Authorization: Bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// do serves one request, with the internal token on a path of the
// internal plane.
func (f *fixture) do(t testing.TB, method, target string, body []byte) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	if strings.HasPrefix(target, "/tt/internal/") {
		req.Header.Set("Authorization", "Bearer "+testInternalToken)
	}
	w := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(w, req)
	return w.Code, w.Body.Bytes()
}

func row(id string, end time.Time, node, model string, in, out int64) ledger.Row {
	return ledger.Row{
		RequestID: id, Start: end.Add(-time.Second), End: end, Node: node, Endpoint: "/v1/chat/completions",
		Provider: "openai", Model: model, Served: model, Usage: ledger.Usage{Input: in, Output: out, Total: in + out},
		Status: 200, Decision: ledger.Admitted, Replica: "r1",
	}
}

// reqID returns a valid request id numbered n: 128 bits in 26 base32
// characters, so the last character carries two zero bits.
func reqID(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	b := []byte("tt_aaaaaaaaaaaaaaaaaaaaaaaaaa")
	n <<= 2
	for i := len(b) - 1; n > 0 && i >= 3; i-- {
		b[i] = alphabet[n%32]
		n /= 32
	}
	return string(b)
}

func batch(rows ...ledger.Row) []byte {
	var b []byte
	for i := range rows {
		b = ledgerlog.AppendRow(b, &rows[i])
	}
	return b
}

func (f *fixture) ingest(t testing.TB, body []byte) syncwire.IngestAck {
	t.Helper()
	var ack syncwire.IngestAck
	f.call(t, "ingest", http.MethodPost, syncwire.IngestPath, body, &ack)
	return ack
}

func (f *fixture) sync(t testing.TB, query string) syncwire.Sync {
	t.Helper()
	var s syncwire.Sync
	f.call(t, "sync", http.MethodGet, syncwire.SyncPath+"?"+query, nil, &s)
	return s
}

// call sends an internal request that must answer 200 and decodes the
// answer into out; what names the call in a failure.
func (f *fixture) call(t testing.TB, what, method, target string, body []byte, out any) {
	t.Helper()
	code, resp := f.do(t, method, target, body)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", what, code, resp)
	}
	if err := json.Unmarshal(resp, out); err != nil {
		t.Fatal(err)
	}
}

func golden(t *testing.T, name string, got []byte) {
	testkit.Golden(t, filepath.Join("testdata", name), got, *update)
}

func TestIngestAndSyncGolden(t *testing.T) {
	f := newFixture(t, testConfig)
	f.clock.Set(t0.Add(time.Second))
	ack := f.ingest(t, batch(
		row(reqID(1), t0, "org:acme/team:ml/user:dev1", "gpt-4o-mini", 8, 19),
		row(reqID(2), t0, "org:acme/team:search", "gpt-4o-mini", 100, 20),
		row(reqID(3), t0, "org:acme/team:ml", "no-such-model", 5, 5),
	))
	if ack.Accepted != 3 || ack.Duplicates != 0 || ack.Rejected != 0 {
		t.Fatalf("ack = %+v", ack)
	}
	// A first poll gets every part.
	full, _ := json.MarshalIndent(normalize(f, f.sync(t, "replica=r1")), "", "  ")
	golden(t, "sync_full.golden", append(full, '\n'))

	// A current poll gets versions and cursors only.
	s := f.sync(t, "replica=r1")
	q := fmt.Sprintf("replica=r1&plan=%s&runtime=%s&snapshot=%s&prices=%s", s.Plan.Version, s.Runtime.Cursor, s.Snapshot.Cursor, s.Prices.Version)
	small, _ := json.MarshalIndent(normalize(f, f.sync(t, q)), "", "  ")
	golden(t, "sync_current.golden", append(small, '\n'))

	// Unpriced rows are counted in the metric.
	_, metrics := f.do(t, http.MethodGet, "/metrics", nil)
	for _, want := range []string{
		"tt_accountant_rows_ingested_total 3", "tt_accountant_rows_unpriced_total 1",
		"tt_accountant_threshold_alerts_total{limit_id=\"org_monthly_budget\"} 1",
		"tt_accountant_replicas_live 1", "tt_accountant_ledger_fsync_seconds_count",
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if !strings.Contains(f.logs.String(), "threshold alert: limit org_monthly_budget at org:acme crossed its threshold") {
		t.Errorf("alert not logged:\n%s", f.logs)
	}
}

// normalize replaces the feeds' random ids in their cursors.
func normalize(f *fixture, s syncwire.Sync) syncwire.Sync {
	for _, c := range []*string{&s.Runtime.Cursor, &s.Snapshot.Cursor} {
		if _, seq, ok := syncwire.ParseCursor(*c); ok {
			*c = fmt.Sprintf("ID.%d", seq)
		}
	}
	return s
}

func TestIngestRejectsBadLinesAlone(t *testing.T) {
	f := newFixture(t, testConfig)
	good := row(reqID(1), t0, "org:acme/team:ml", "gpt-4o-mini", 1, 1)
	body := append([]byte("{not json\n\n"), batch(good)...)
	body = append(body, batch(row("tt_BAD", t0, "", "x", 1, 1))...)
	ack := f.ingest(t, body)
	if ack.Accepted != 1 || ack.Rejected != 2 || len(ack.Errors) != 2 {
		t.Fatalf("ack = %+v", ack)
	}
	if ack.Errors[0] != "line 1: ledger: row: not valid JSON (at byte 1)" ||
		ack.Errors[1] != `line 3: ledger: row field "request_id": "tt_BAD" is not a request id (tt_ and 26 lowercase base32 characters)` {
		t.Errorf("errors = %q", ack.Errors)
	}
	// The same batch again: the good row is a duplicate.
	ack = f.ingest(t, body)
	if ack.Accepted != 0 || ack.Duplicates != 1 || ack.Rejected != 2 {
		t.Fatalf("retry ack = %+v", ack)
	}
}

func TestRestartReplaysCurrentPeriods(t *testing.T) {
	f := newFixture(t, testConfig)
	var rows []ledger.Row
	for i := range 50 {
		end := t0.Add(-time.Duration(i) * 7 * time.Hour) // back into July
		rows = append(rows, row(reqID(i+1), end, "org:acme/team:ml", "gpt-4o-mini", int64(i), 1))
	}
	f.clock.Set(t0)
	f.ingest(t, batch(rows...))
	before := f.sync(t, "")
	f.clock.Set(t0.Add(time.Minute))
	f.restart(t)
	after := f.sync(t, "")
	if fmt.Sprint(before.Snapshot.Entries) != fmt.Sprint(after.Snapshot.Entries) {
		t.Errorf("snapshot after restart:\n%v\nwant\n%v", after.Snapshot.Entries, before.Snapshot.Entries)
	}
	if id, _, _ := syncwire.ParseCursor(before.Snapshot.Cursor); strings.HasPrefix(after.Snapshot.Cursor, id+".") {
		t.Errorf("a restarted accountant reuses snapshot feed %s", id)
	}
	// Every id in the current periods is still known.
	ack := f.ingest(t, batch(rows...))
	if ack.Accepted != 0 {
		t.Errorf("after restart a retried batch recorded %d rows again: %+v", ack.Accepted, ack)
	}
}

func TestReloadKeepsPlanOnBadConfig(t *testing.T) {
	f := newFixture(t, testConfig)
	f.ingest(t, batch(row(reqID(1), t0, "org:acme/team:ml", "gpt-4o-mini", 10, 10)))
	first := f.sync(t, "")
	f.setConfig(t, strings.Replace(testConfig, "period: day", "period: fortnight", 1)+
		"    - id: Bad\n      attach: { level: team }\n      type: rpm\n      amount: 1\n      period: 1m\n")
	err := f.s.Reload()
	if err == nil {
		t.Fatal("reload of a broken config succeeded")
	}
	if strings.Count(err.Error(), "\n  ") < 2 {
		t.Errorf("reload error should list every problem:\n%v", err)
	}
	if got := f.sync(t, ""); got.Plan.Version != first.Plan.Version {
		t.Errorf("plan changed after a rejected reload")
	}
	// A good new config adds a limit that counts history.
	f.setConfig(t, testConfig+"    - id: ml_week\n      attach: { node: \"org:acme/team:ml\" }\n      type: quota_tokens\n      amount: 100\n      period: week\n")
	if err := f.s.Reload(); err != nil {
		t.Fatal(err)
	}
	got := f.sync(t, "plan="+first.Plan.Version)
	if got.Plan.Version == first.Plan.Version || got.Plan.Governance == nil {
		t.Fatalf("new plan not served: %+v", got.Plan)
	}
	found := false
	for _, e := range got.Snapshot.Entries {
		if strings.HasPrefix(e.ID, "ml_week|") && e.Value == 20 {
			found = true
		}
	}
	if !found {
		t.Errorf("new limit does not count history: %+v", got.Snapshot.Entries)
	}
	_, metrics := f.do(t, http.MethodGet, "/metrics", nil)
	if !strings.Contains(string(metrics), `tt_accountant_config_reloads_total{result="rejected"} 1`) {
		t.Errorf("rejected reload not counted")
	}
}

func TestReplicasAndDropped(t *testing.T) {
	f := newFixture(t, testConfig)
	f.sync(t, "replica=a&dropped=3")
	f.sync(t, "replica=b")
	f.clock.Set(t0.Add(LivenessWindow / 2))
	if got := f.sync(t, "replica=a&dropped=5").Replicas; got != 2 {
		t.Errorf("replicas = %d, want 2", got)
	}
	f.clock.Set(t0.Add(LivenessWindow + time.Second))
	if got := f.sync(t, "replica=a").Replicas; got != 1 {
		t.Errorf("replicas after b went quiet = %d, want 1", got)
	}
	_, metrics := f.do(t, http.MethodGet, "/metrics", nil)
	if !strings.Contains(string(metrics), "tt_accountant_rows_dropped_reported 5") {
		t.Errorf("dropped not reported:\n%s", metrics)
	}
}

// withWebhook starts an accountant on testConfig whose alert webhook
// hands each event it receives to the channel.
func withWebhook(t *testing.T) (*Server, chan AlertEvent) {
	t.Helper()
	got := make(chan AlertEvent, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev AlertEvent
		json.NewDecoder(r.Body).Decode(&ev)
		got <- ev
	}))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, testConfig)
	s, err := New(Options{ConfigPath: cfg, DataDir: dir, AlertWebhook: hook.URL, InternalToken: testInternalToken, Now: func() time.Time { return t0 },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, got
}

// expectWebhook waits for the webhook's next event and checks its JSON.
func expectWebhook(t *testing.T, got chan AlertEvent, want string) {
	t.Helper()
	select {
	case ev := <-got:
		b, _ := json.Marshal(ev)
		if string(b) != want {
			t.Errorf("webhook body:\n got %s\nwant %s", b, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook call")
	}
}

func TestAlertWebhook(t *testing.T) {
	s, got := withWebhook(t)
	if _, _, err := s.IngestLines(context.Background(), batch(row(reqID(1), t0, "org:acme/team:ml", "gpt-4o-mini", 8, 19))); err != nil {
		t.Fatal(err)
	}
	expectWebhook(t, got, `{"event":"threshold_crossed","limit_id":"org_monthly_budget","limit_type":"budget_usd","unit":"usd","node":"org:acme","counter":"org_monthly_budget|budget_usd|org:acme||month|","threshold":0.5,"period":"month","period_start":"2026-08-01T00:00:00Z","resets_at":"2026-09-01T00:00:00Z","observed":0.0000126,"limit":0.000001,"at":"2026-08-10T12:00:00Z"}`)
}

// TestPlanRoundTrip checks the plan a filter receives decodes strictly and
// compiles to the very hash the accountant announced as its version.
func TestPlanRoundTrip(t *testing.T) {
	f := newFixture(t, testConfig)
	s := f.sync(t, "")
	b, err := json.Marshal(s.Plan.Governance)
	if err != nil {
		t.Fatal(err)
	}
	g, err := config.DecodeGovernanceJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := govern.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	if p.Hash != s.Plan.Version {
		t.Errorf("the filter's plan hashes to %s, the accountant announced %s", p.Hash, s.Plan.Version)
	}
}

// TestReplicaTableBounded: a flood of made-up ?replica= ids keeps at most
// MaxReplicas tracked; the ones heard from longest ago are forgotten (their
// dropped counts kept) and counted, and a replica that keeps polling stays.
func TestReplicaTableBounded(t *testing.T) {
	f := newFixture(t, testConfig)
	f.sync(t, "replica=old&dropped=4")
	f.clock.Set(t0.Add(time.Second))
	note := func(id string) {
		f.s.noteReplica(httptest.NewRequest(http.MethodGet, "/tt/internal/v1/sync?replica="+id, nil), true)
	}
	const extra = 10
	for i := range MaxReplicas + extra {
		if i%1000 == 0 {
			f.sync(t, "replica=steady") // polls throughout the flood
			f.clock.Set(f.clock.Now().Add(time.Millisecond))
		}
		note(fmt.Sprintf("made-up-%d", i))
	}
	f.s.mu.Lock()
	n := len(f.s.replicas)
	_, oldKept := f.s.replicas["old"]
	_, steadyKept := f.s.replicas["steady"]
	f.s.mu.Unlock()
	if n > MaxReplicas {
		t.Errorf("%d replicas tracked, want at most %d", n, MaxReplicas)
	}
	if oldKept || !steadyKept {
		t.Errorf("old kept %v (want evicted first), steady kept %v (want kept)", oldKept, steadyKept)
	}
	_, metrics := f.do(t, http.MethodGet, "/metrics", nil)
	if !strings.Contains(string(metrics), "tt_accountant_rows_dropped_reported 4") {
		t.Errorf("the evicted replica's dropped rows are no longer reported")
	}
	if !strings.Contains(string(metrics), "tt_accountant_replicas_evicted_total ") || strings.Contains(string(metrics), "tt_accountant_replicas_evicted_total 0\n") {
		t.Errorf("evictions not counted:\n%s", metrics)
	}
}

// TestGateAlertsReachTheWebhook: the threshold alerts a filter raises for
// the limits it counts at the gate are posted to the webhook like the
// accountant's own; a line it cannot read is reported and skipped.
func TestGateAlertsReachTheWebhook(t *testing.T) {
	s, got := withWebhook(t)
	body := `{"limit_id":"team_tpm","limit_type":"tpm","node":"org:acme/team:ml","counter":"team_tpm|tpm|org:acme/team:ml|model=gpt-4o|1m0s|gcra","threshold":0.9,"window":"1m0s","observed":18000,"limit":20000,"at":"2026-08-10T12:00:30.5Z"}
{"limit_id":"x","limit_type":"budget_usd","node":"org:acme","counter":"c","threshold":0.5,"window":"","observed":1,"limit":2,"at":"2026-08-10T12:00:30Z"}
not json
`
	w := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, syncwire.AlertsPath, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testInternalToken)
	s.Handler().ServeHTTP(w, req)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"accepted":1,"rejected":2`) || !strings.Contains(w.Body.String(), `line 2: limit_type \"budget_usd\" is not one the gateway counts`) {
		t.Fatalf("POST %s: %d %s", syncwire.AlertsPath, w.Code, w.Body)
	}
	expectWebhook(t, got, `{"event":"threshold_crossed","limit_id":"team_tpm","limit_type":"tpm","unit":"tokens","node":"org:acme/team:ml","counter":"team_tpm|tpm|org:acme/team:ml|model=gpt-4o|1m0s|gcra","threshold":0.9,"period":"1m0s","period_start":"2026-08-10T12:00:00Z","resets_at":"2026-08-10T12:01:00Z","observed":18000,"limit":20000,"at":"2026-08-10T12:00:30.5Z"}`)
}

// TestIngestPricesEveryRow: a row's cost is the accountant's to set. A row
// sent with a cost of its own (a $0 for a model the catalog does not know,
// a wrong figure for one it does) is priced from the catalog: UNPRICED for
// the unknown model, the catalog's price for the known one.
func TestIngestPricesEveryRow(t *testing.T) {
	f := newFixture(t, testConfig)
	unknown := row(reqID(1), t0, "org:acme/team:ml", "no-such-model", 10, 10)
	unknown.Cost = &ledger.Cost{Nanos: 0}
	known := row(reqID(2), t0, "org:acme/team:ml", "gpt-4o-mini", 8, 19)
	known.Cost = &ledger.Cost{Nanos: 1}
	if ack := f.ingest(t, batch(unknown, known)); ack.Accepted != 2 {
		t.Fatalf("ack = %+v", ack)
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "data", "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ledger.ParseJSONL(b, nil)
	if err != nil || len(rows) != 2 {
		t.Fatalf("ledger: %d rows, %v", len(rows), err)
	}
	if c := rows[0].Cost; c == nil || !c.Unpriced || c.Nanos != 0 {
		t.Errorf("unknown model recorded with cost %+v, want UNPRICED", c)
	}
	if c := rows[1].Cost; c == nil || c.Unpriced || c.Nanos == 1 {
		t.Errorf("known model recorded with cost %+v, want the catalog's price", c)
	}
}
