package accountant

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/accountant/spend"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

const spendConfig = testkit.AcmeBetaTenants + `  limits:
    - id: acme_month
      attach: { node: "org:acme" }
      type: budget_usd
      amount_usd: 0.001
      period: month
      posture: { thresholds: [0.5, 0.9] }
    - id: team_tokens
      attach: { level: team }
      type: quota_tokens
      amount: 1000
      period: week
    - id: user_rpm
      attach: { level: user }
      type: rpm
      amount: 60
      period: 1m
`

// spendFixture starts an accountant at now over a data directory that
// already holds ledgers: rotated (older than the replay reads) and active.
func spendFixture(t *testing.T, now time.Time, rotated map[string][]byte, active []byte) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, config: filepath.Join(dir, "tokentriage.yaml"), clock: &clock{t: now}, logs: &bytes.Buffer{}}
	f.setConfig(t, spendConfig)
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o755)
	for name, b := range rotated {
		testkit.WriteFile(t, data, name, b)
	}
	if active != nil {
		testkit.WriteFile(t, data, ledgerlog.ActiveName, active)
	}
	s, err := New(Options{ConfigPath: f.config, DataDir: data, AdminToken: "admin-secret", InternalToken: testInternalToken,
		Logger: slog.New(slog.NewTextHandler(f.logs, nil)), Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.s = s
	t.Cleanup(func() { s.Close() })
	<-s.spendState.readyCh
	return f
}

func (f *fixture) get(t *testing.T, token, target string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(w, req)
	return w.Code, w.Header(), w.Body.String()
}

func (f *fixture) report(t *testing.T, token, query string) *spend.Report {
	t.Helper()
	code, _, body := f.get(t, token, api.Prefix+"spend?"+query)
	if code != http.StatusOK {
		t.Fatalf("GET spend?%s: %d %s", query, code, body)
	}
	var rep spend.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	return &rep
}

// TestSpendReportCoversHistoryReplayAndIngest: the report sums a rotated
// file older than the replay window (read after start), the active file
// (read by the replay) and rows ingested since, each once; it is the same
// after a restart, which rebuilds it from the ledger alone.
func TestSpendReportCoversHistoryReplayAndIngest(t *testing.T) {
	active, err := os.ReadFile(filepath.Join("spend", "testdata", "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	old := batch(row(reqID(1), time.Date(2026, 6, 3, 10, 0, 0, 0, time.UTC), "org:acme/team:ml/user:dev1", "gpt-4o-mini", 1000, 100))
	now := time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)
	f := spendFixture(t, now, map[string][]byte{ledgerlog.RotatedName(time.Date(2026, 6, 4, 0, 0, 0, 0, time.UTC)): old}, active)

	// A live row: acknowledged now, counted at once.
	ack := f.ingest(t, batch(row(reqID(2), now.Add(-time.Hour), "org:acme/team:ml/user:dev2", "gpt-4o-mini", 100, 20)))
	if ack.Accepted != 1 {
		t.Fatalf("ack %+v", ack)
	}
	// A duplicate is not counted twice.
	f.ingest(t, batch(row(reqID(2), now.Add(-time.Hour), "org:acme/team:ml/user:dev2", "gpt-4o-mini", 100, 20)))

	check := func(rep *spend.Report) {
		t.Helper()
		got := map[string]string{}
		for _, p := range rep.Series {
			got[p.Start.Format("2006-01")] = spendLine(&p.Values)
		}
		want := map[string]string{
			"2026-06": "1 req, 0 refused, 1000/100 tokens, $0.00021 priced, $0 estimated, 0 unpriced",
			"2026-08": "3 req, 0 refused, 350/70 tokens, $0.000081 priced, $0 estimated, 1 unpriced",
			"2026-09": "8 req, 3 refused, 1420/165 tokens, $0.0035975 priced, $0.0000045 estimated, 0 unpriced",
		}
		if len(got) != len(want) {
			t.Fatalf("months %v; want %v", got, want)
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %s; want %s", k, got[k], w)
			}
		}
		if rep.Source.Rows != 12 {
			t.Errorf("source rows %d; want 12", rep.Source.Rows)
		}
	}
	q := "from=2026-01-01&to=2026-10-01&bucket=month"
	check(f.report(t, "admin-secret", q))
	f.restart(t)
	<-f.s.spendState.readyCh
	check(f.report(t, "admin-secret", q))
}

func spendLine(v *spend.Values) string {
	b, _ := json.Marshal(v)
	var m map[string]json.Number
	json.Unmarshal(b, &m)
	return string(m["requests"]) + " req, " + string(m["refused"]) + " refused, " + string(m["input_tokens"]) + "/" + string(m["output_tokens"]) +
		" tokens, $" + string(m["priced_usd"]) + " priced, $" + string(m["estimated_usd"]) + " estimated, " + string(m["unpriced_requests"]) + " unpriced"
}

// TestSpendAPIAsCSVAndForDelegatedAdmins: CSV by Accept or format=csv;
// a delegated admin's report is its subtree's, whatever it asks.
func TestSpendAPIAsCSVAndForDelegatedAdmins(t *testing.T) {
	active, err := os.ReadFile(filepath.Join("spend", "testdata", "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	f := spendFixture(t, time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC), nil, active)
	q := "from=2026-08-01&to=2026-10-01&bucket=month&group_by=org"
	for _, c := range []struct{ query, accept string }{
		{q + "&format=csv", ""},
		{q, "text/csv"},
		{q, "application/json;q=0.5, text/csv"},
	} {
		code, h, body := f.get(t, "admin-secret", api.Prefix+"spend?"+c.query, "Accept", c.accept)
		if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") {
			t.Fatalf("%s (Accept %q): %d %s %s", c.query, c.accept, code, h.Get("Content-Type"), body)
		}
		if !strings.HasPrefix(body, `"bucket_start","org","requests",`) || strings.Count(body, "\n") != 5 {
			t.Errorf("CSV:\n%s", body)
		}
	}
	if code, h, _ := f.get(t, "admin-secret", api.Prefix+"spend?"+q, "Accept", "text/csv;q=0.1, application/json"); code != http.StatusOK || h.Get("Content-Type") != "application/json" {
		t.Errorf("JSON preferred: %d %s", code, h.Get("Content-Type"))
	}

	code, body := f.admin(t, http.MethodPost, api.Prefix+"admins", `{"scope":"org:acme/team:ml"}`)
	if code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("create admin: %d %s", code, body)
	}
	var adm struct{ Token string }
	json.Unmarshal([]byte(body), &adm)

	rep := f.report(t, adm.Token, q)
	if rep.Scope != "org:acme/team:ml" || rep.Node != "org:acme/team:ml" || len(rep.Groups) != 1 || rep.Groups[0].Key["org"] != "org:acme" {
		t.Fatalf("delegated report: scope %q node %q groups %+v", rep.Scope, rep.Node, rep.Groups)
	}
	if got := spendLine(&rep.Total); got != "7 req, 2 refused, 660/110 tokens, $0.0001515 priced, $0 estimated, 1 unpriced" {
		t.Errorf("delegated total: %s", got)
	}
	for _, node := range []string{"org:acme", "org:beta", "org:acme/team:search"} {
		code, _, body := f.get(t, adm.Token, api.Prefix+"spend?node="+node)
		if code != http.StatusForbidden || !strings.Contains(body, "outside the subtree of delegated admin") {
			t.Errorf("node=%s: %d %s", node, code, body)
		}
	}
	if code, _, body := f.get(t, adm.Token, api.Prefix+"spend?node=org:acme/team:ml/user:dev1&group_by=key&from=2026-08-01&to=2026-10-01"); code != http.StatusOK || !strings.Contains(body, `"key":{"key":"k1"}`) {
		t.Errorf("a node below the scope: %d %s", code, body)
	}
	if code, _, body := f.get(t, "admin-secret", api.Prefix+"spend?bucket=fortnight"); code != http.StatusBadRequest || !strings.Contains(body, `bucket \"fortnight\" is not one of hour, day, week, month`) {
		t.Errorf("bad bucket: %d %s", code, body)
	}
	if code, _, body := f.get(t, "", api.Prefix+"spend"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d %s", code, body)
	}
}

// TestSpendLimitsShowLiveCounters: the budgets and quotas of the current
// period beside their amounts, fullest first, a delegated admin's only
// within its subtree.
func TestSpendLimitsShowLiveCounters(t *testing.T) {
	now := time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)
	f := spendFixture(t, now, nil, nil)
	f.ingest(t, batch(
		row(reqID(1), now.Add(-time.Hour), "org:acme/team:ml/user:dev1", "gpt-4o-mini", 1000, 1000), // $0.00075, 2000 tokens
		row(reqID(2), now.Add(-time.Hour), "org:acme/team:search", "no-such-model", 10, 10),
	))
	code, _, body := f.get(t, "admin-secret", api.Prefix+"spend/limits")
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var l api.SpendLimits
	json.Unmarshal([]byte(body), &l)
	var got []string
	for _, x := range l.Limits {
		got = append(got, x.LimitID+"@"+x.Node+" "+string(x.Used)+"/"+string(x.Amount)+" "+x.Unit+" "+x.PeriodStart.Format("01-02")+".."+x.ResetsAt.Format("01-02")+" "+strings.TrimRight(strings.TrimRight(jsonFloat(x.Fraction), "0"), "."))
		if x.UnpricedRows > 0 {
			got[len(got)-1] += " unpriced"
		}
	}
	want := []string{
		"team_tokens@org:acme/team:ml 2000/1000 tokens 09-07..09-14 2",
		"acme_month@org:acme 0.00075/0.001 usd 09-01..10-01 0.75 unpriced",
		"team_tokens@org:acme/team:search 20/1000 tokens 09-07..09-14 0.02",
		"team_tokens@org:beta/team:x 0/1000 tokens 09-07..09-14 0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("limits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	_, body = f.admin(t, http.MethodPost, api.Prefix+"admins", `{"scope":"org:acme/team:ml"}`)
	var adm struct{ Token string }
	json.Unmarshal([]byte(body), &adm)
	_, _, body = f.get(t, adm.Token, api.Prefix+"spend/limits")
	json.Unmarshal([]byte(body), &l)
	if len(l.Limits) != 1 || l.Limits[0].Node != "org:acme/team:ml" {
		t.Fatalf("delegated limits: %s", body)
	}
}

func jsonFloat(f float64) string { b, _ := json.Marshal(f); return string(b) + "." }

// TestSpendCountsOnlyDurableRows: a batch the ledger failed to make
// durable is not acknowledged and not counted.
func TestSpendCountsOnlyDurableRows(t *testing.T) {
	now := time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)
	f := spendFixture(t, now, nil, nil)
	f.ingest(t, batch(row(reqID(1), now.Add(-time.Hour), "org:acme/team:ml/user:dev1", "gpt-4o-mini", 10, 10)))
	f.s.ledger.Close() // every later append fails
	code, _ := f.do(t, http.MethodPost, "/tt/internal/v1/ingest", batch(row(reqID(2), now.Add(-time.Hour), "org:acme/team:ml/user:dev1", "gpt-4o-mini", 10, 10)))
	if code == http.StatusOK {
		t.Fatalf("ingest after the ledger closed answered 200")
	}
	rep := f.report(t, "admin-secret", "")
	if rep.Total.Requests != 1 {
		t.Fatalf("report counts %d rows; want the 1 durable", rep.Total.Requests)
	}
}

var _ = ledger.Admitted

// TestSpendAPIScript runs spend/testdata/report.txt, the hand-counted
// reports of every grouping and bucket, through GET /tt/api/v1/spend as
// CSV: a block's scope= is a delegated admin of that subtree.
func TestSpendAPIScript(t *testing.T) {
	active, err := os.ReadFile(filepath.Join("spend", "testdata", "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	f := spendFixture(t, time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC), nil, active)
	src, err := os.ReadFile(filepath.Join("spend", "testdata", "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{"": "admin-secret"}
	token := func(scope string) string {
		if tk, ok := tokens[scope]; ok {
			return tk
		}
		_, body := f.admin(t, http.MethodPost, api.Prefix+"admins", `{"scope":"`+scope+`"}`)
		var adm struct{ Token string }
		json.Unmarshal([]byte(body), &adm)
		tokens[scope] = adm.Token
		return adm.Token
	}
	lines := strings.Split(string(src), "\n")
	blocks := 0
	for i := 0; i < len(lines); i++ {
		cmd, ok := strings.CutPrefix(lines[i], "query ")
		if !ok {
			continue
		}
		var want []string
		for j := i + 2; j < len(lines) && lines[j] != ""; j++ {
			want = append(want, lines[j])
		}
		v, _ := url.ParseQuery(cmd)
		scope, cols := v.Get("scope"), v.Get("cols")
		v.Del("scope")
		v.Del("cols")
		v.Set("format", "csv")
		code, _, body := f.get(t, token(scope), api.Prefix+"spend?"+v.Encode())
		blocks++
		if msg, isErr := strings.CutPrefix(want[0], "error: "); isErr {
			var eb api.ErrorBody
			json.Unmarshal([]byte(body), &eb)
			switch {
			case strings.Contains(msg, "outside the subtree"):
				if code != http.StatusForbidden {
					t.Errorf("line %d: %s: %d %s; want 403", i+1, cmd, code, body)
				}
			case code != http.StatusBadRequest || eb.Error.Message != msg:
				t.Errorf("line %d: %s: %d %s\nwant 400 %s", i+1, cmd, code, body, msg)
			}
			continue
		}
		if code != http.StatusOK {
			t.Fatalf("line %d: %s: %d %s", i+1, cmd, code, body)
		}
		if got := projectCSV(t, body, len(strings.Split(v.Get("group_by"), ",")), v.Get("group_by") != "", cols); got != strings.Join(want, "\n") {
			t.Errorf("line %d: %s\ngot:\n%s\nwant:\n%s", i+1, cmd, got, strings.Join(want, "\n"))
		}
	}
	if blocks < 20 {
		t.Fatalf("only %d blocks ran", blocks)
	}
}

// projectCSV keeps bucket_start, the group columns and cols (default:
// report.txt's) of a CSV report.
func projectCSV(t *testing.T, s string, groups int, grouped bool, cols string) string {
	if !grouped {
		groups = 0
	}
	keep := []string{"requests", "refused", "input_tokens", "output_tokens", "priced_usd", "estimated_usd", "unpriced_requests", "unpriced_tokens"}
	if cols != "" {
		keep = strings.Split(cols, ",")
	}
	recs, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rec := range recs {
		row := append([]string{}, rec[:1+groups]...)
		for _, c := range keep {
			for k, h := range recs[0] {
				if h == c {
					row = append(row, rec[k])
				}
			}
		}
		var b strings.Builder
		w := csv.NewWriter(&b)
		w.Write(row)
		w.Flush()
		out = append(out, strings.TrimSuffix(b.String(), "\n"))
	}
	return strings.Join(out, "\n")
}
