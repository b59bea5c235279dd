package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tokentriage/tokentriage/accountant"
	"github.com/tokentriage/tokentriage/accountant/accountanttest"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/wire"
)

const (
	adminToken    = "dashboard-admin-token"
	internalToken = "dashboard-internal-token"
)

const config = testkit.AcmeBetaTenants + `  limits:
    - id: acme_day
      attach: { node: "org:acme" }
      type: budget_usd
      amount_usd: 0.002
      period: day
      posture: { thresholds: [0.8] }
    - id: team_tokens
      attach: { level: team }
      type: quota_tokens
      amount: 50000
      period: month
    - id: user_rpm
      attach: { level: user }
      type: rpm
      amount: 60
      period: 1m
`

// seeded is one row of the seeded ledger.
type seeded struct {
	node, kid, model string
	in, out, nanos   int64
	unpriced         bool
	refusedBy        string
}

// seedRows spreads the rows over the current month up to now, so the
// page's "This month" holds them all.
func seedRows(now time.Time) []ledger.Row {
	spec := []seeded{
		{"org:acme/team:ml/user:dev1", "k1", "gpt-4o-mini", 1000, 200, 270000, false, ""},
		{"org:acme/team:ml/user:dev1", "k1", "gpt-4o-mini", 2000, 400, 540000, false, ""},
		{"org:acme/team:ml/user:dev1", "k5", "gpt-4o", 400, 100, 2000000, false, ""},
		{"org:acme/team:ml/user:dev2", "k2", "claude-x", 500, 100, 0, true, ""},
		{"org:acme/team:ml/user:dev2", "k2", "gpt-4o-mini", 0, 0, 0, false, "user_rpm"},
		{"org:acme/team:search", "k3", "gpt-4o-mini", 300, 50, 75000, false, ""},
		{"org:beta/team:x/user:y", "k4", "gpt-4o", 1000, 300, 5500000, false, ""},
		{"org:beta/team:x/user:y", "k4", "gpt-4o", 0, 0, 0, false, "user_rpm"},
	}
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	span := now.Sub(start)
	rows := make([]ledger.Row, len(spec))
	for i, s := range spec {
		end := start.Add(span * time.Duration(i+1) / time.Duration(len(spec)+1))
		var id [16]byte
		id[0], id[15] = byte(i+1), 0x5a
		r := ledger.Row{RequestID: wire.NewRequestID(id), Start: end.Add(-time.Second), End: end, KID: s.kid, Node: s.node,
			Endpoint: "/v1/chat/completions", Provider: "openai", Model: s.model, Served: s.model,
			Usage: ledger.Usage{Input: s.in, Output: s.out, Total: s.in + s.out}, Status: 200, Decision: ledger.Admitted, Replica: "r1",
			Cost: &ledger.Cost{Nanos: s.nanos, Unpriced: s.unpriced}}
		if s.refusedBy != "" {
			r.Decision, r.Status, r.ErrorType, r.Cost, r.Served = ledger.Refused, 429, "rate_limited", nil, ""
			r.RefusedBy = &ledger.Ref{LimitID: s.refusedBy, LimitType: "rpm", Node: s.node}
		}
		rows[i] = r
	}
	return rows
}

// browser starts Debian's chromium headless, with a fresh profile and no
// network of its own, and collects every console error, uncaught
// exception and log error (a blocked script, a failed load) the page
// raises.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("no chromium on PATH: the dashboard is tested in a real browser; install Debian's chromium (apt-get install chromium), as .ci/run does")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1366, 1100),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	var mu sync.Mutex
	var problems []string
	chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				problems = append(problems, "console."+string(e.Type)+": "+strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			desc := d.Text
			if d.Exception != nil {
				desc += " " + d.Exception.Description
			}
			problems = append(problems, fmt.Sprintf("exception: %s at %s:%d", desc, d.URL, d.LineNumber+1))
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError && !expected401(e.Entry) {
				problems = append(problems, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	})
	return ctx, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string{}, problems...) }
}

// expected401 is the one error the browser logs by itself in this test:
// the failed request of a token the accountant refuses.
func expected401(e *cdplog.Entry) bool {
	return e.Source == cdplog.EntrySourceNetwork && strings.Contains(e.Text, "401")
}

// TestDashboardInBrowser loads the dashboard in headless Chromium over an
// accountant with a seeded ledger, and reads back from the DOM: the
// series and totals of the charts, a drill-down from org to key, the
// budget line, the UNPRICED call-out, the refresh picking up a new row,
// and a delegated token that sees its subtree only; the page raises no
// console error. It saves screenshots under the test's artifacts
// (go test -artifacts -outputdir DIR keeps them).
func TestDashboardInBrowser(t *testing.T) {
	now := time.Now().UTC()
	dir := t.TempDir()
	rows := seedRows(now)
	var b []byte
	for i := range rows {
		b = ledgerlog.AppendRow(b, &rows[i])
	}
	cfg := filepath.Join(dir, "tokentriage.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	base := accountanttest.Serve(t, accountant.Options{ConfigPath: cfg, DataDir: accountanttest.LedgerDir(t, b),
		AdminToken: adminToken, InternalToken: internalToken})

	ctx, problems := browser(t)
	ui := base + "/tt/ui/?refresh=1"
	tab := &page{t: t, ctx: ctx, problems: problems, art: t.ArtifactDir()}
	shot, do := tab.shot, tab.do
	seriesOf := func(chart string) map[string]float64 {
		t.Helper()
		js := fmt.Sprintf(`Object.fromEntries([...document.querySelectorAll('#%s g.series')].map(g => [g.dataset.series, Number(g.dataset.total)]))`, chart)
		m, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](js))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	wantSeries := func(step, chart string, want map[string]float64) {
		t.Helper()
		got := seriesOf(chart)
		if !closeMaps(got, want) {
			t.Errorf("%s: %s series %v; want %v", step, chart, got, want)
		}
	}
	value := func(sel string) float64 {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+jsString(sel)+`).dataset.value`))
		if err != nil {
			t.Fatal(err)
		}
		var f float64
		fmt.Sscan(v, &f)
		return f
	}

	// A refused token stays on the sign-in form with the reason.
	do("load", chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.CSS("#token")))
	do("wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"), chromedp.Click(chromedp.CSS("#signin-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#signin-error")))
	msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#signin-error")))
	if !strings.Contains(msg, "refused the token") {
		t.Errorf("sign-in error: %q", msg)
	}

	// The admin: every org, stacked by org.
	do("sign in", chromedp.SendKeys(chromedp.CSS("#token"), adminToken), chromedp.Click(chromedp.CSS("#signin-form button[type=submit]")),
		chromedp.Poll[chromedp.Void](`document.body.dataset.state === 'ready'`, chromedp.WithPollingTimeout(0)))
	wantSeries("all spend", "spend-chart", map[string]float64{"org:beta": 0.0055, "org:acme": 0.002885})
	if p, u, r := value("#kpi-priced"), value("#kpi-unpriced"), value("#kpi-requests"); !near(p, 0.008385) || u != 1 || r != 8 {
		t.Errorf("KPIs: priced %v, unpriced %v, requests %v", p, u, r)
	}
	unpriced, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#unpriced")))
	if !strings.Contains(unpriced, "UNPRICED: 1 request(s), 600 tokens") || !strings.Contains(unpriced, "claude-x (1)") {
		t.Errorf("UNPRICED call-out: %q", unpriced)
	}
	wantSeries("all spend", "refusals-chart", map[string]float64{"user_rpm": 2})
	limits, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#limits li.limit')].map(l => l.dataset.limit + '@' + l.dataset.node).sort()`))
	if strings.Join(limits, " ") != "acme_day@org:acme team_tokens@org:acme/team:ml team_tokens@org:acme/team:search team_tokens@org:beta/team:x" {
		t.Errorf("limits panel: %v", limits)
	}
	shot("dashboard-admin.png")

	// Drill down: org → team → user → key.
	do("drill to org:acme", chromedp.Click(chromedp.CSS(`#top tr[data-group="org:acme"] a`)))
	waitRefreshedUntil(t, ctx, `document.querySelector('#crumbs [aria-current]').textContent === 'org:acme'`)
	wantSeries("org:acme", "spend-chart", map[string]float64{"org:acme/team:ml": 0.00281, "org:acme/team:search": 0.000075})
	budget, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('#spend-chart g.budget-g[data-limit=acme_day]') || {dataset: {}}).dataset.amount || ''`))
	if budget != "0.002" {
		t.Errorf("no acme_day budget line on org:acme's daily chart (got %q)", budget)
	}
	shot("dashboard-org.png")
	do("drill to team:ml", chromedp.Click(chromedp.CSS(`#top tr[data-group="org:acme/team:ml"] a`)))
	waitRefreshedUntil(t, ctx, `document.querySelector('#crumbs [aria-current]').textContent === 'team:ml'`)
	wantSeries("team:ml", "spend-chart", map[string]float64{"org:acme/team:ml/user:dev1": 0.00281, "org:acme/team:ml/user:dev2": 0})
	do("drill to dev1", chromedp.Click(chromedp.CSS(`#top tr[data-group="org:acme/team:ml/user:dev1"] a`)))
	waitRefreshedUntil(t, ctx, `document.querySelector('#crumbs [aria-current]').textContent === 'user:dev1'`)
	wantSeries("user:dev1", "spend-chart", map[string]float64{"k5": 0.002, "k1": 0.00081})
	do("drill to k1", chromedp.Click(chromedp.CSS(`#top tr[data-group="k1"] a`)))
	waitRefreshedUntil(t, ctx, `document.querySelector('#crumbs [aria-current]').textContent === 'key:k1'`)
	wantSeries("key k1", "spend-chart", map[string]float64{"gpt-4o-mini": 0.00081})
	do("back to all", chromedp.Click(chromedp.CSS(`#crumbs a[data-node=""]`)))
	waitRefreshedUntil(t, ctx, `document.querySelector('#crumbs [aria-current]').textContent === 'All spend'`)

	// It refreshes on its own: a row ingested now shows up.
	var nb []byte
	extra := seedRows(now)[6] // org:beta's gpt-4o row again, under a new id
	extra.RequestID = wire.NewRequestID([16]byte{0x77, 15: 0x5a})
	extra.Cost = nil // the accountant prices what it ingests
	nb = ledgerlog.AppendRow(nb, &extra)
	req, _ := http.NewRequest(http.MethodPost, base+"/tt/internal/v1/ingest", bytes.NewReader(nb))
	req.Header.Set("Authorization", "Bearer "+internalToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ingest: %v %v", err, resp)
	}
	resp.Body.Close()
	waitRefreshedUntil(t, ctx, `document.querySelector('#kpi-requests').dataset.value === '9'`)

	// A delegated admin of team:ml sees that subtree and nothing else.
	body := strings.NewReader(`{"scope":"org:acme/team:ml"}`)
	req, _ = http.NewRequest(http.MethodPost, base+"/tt/api/v1/admins", body)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var adm struct{ Token string }
	json.NewDecoder(resp.Body).Decode(&adm)
	resp.Body.Close()
	if adm.Token == "" {
		t.Fatalf("no delegated token: %d", resp.StatusCode)
	}
	do("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#token")))
	do("sign in delegated", chromedp.SendKeys(chromedp.CSS("#token"), adm.Token), chromedp.Click(chromedp.CSS("#signin-form button[type=submit]")),
		chromedp.Poll[chromedp.Void](`document.body.dataset.state === 'ready' && document.querySelector('#who').textContent.includes('team:ml')`, chromedp.WithPollingTimeout(0)))
	wantSeries("delegated", "spend-chart", map[string]float64{"org:acme/team:ml/user:dev1": 0.00281, "org:acme/team:ml/user:dev2": 0})
	if p := value("#kpi-priced"); !near(p, 0.00281) {
		t.Errorf("delegated priced total %v; want 0.00281", p)
	}
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	for _, other := range []string{"org:beta", "team:search", "acme_day"} {
		if strings.Contains(text, other) {
			t.Errorf("the delegated admin's page shows %q", other)
		}
	}
	shot("dashboard-delegated.png")

	if p := problems(); len(p) > 0 {
		t.Errorf("the page raised errors:\n%s", strings.Join(p, "\n"))
	}
}

// waitRefreshedUntil waits until cond holds on a page that has finished a
// refresh.
func waitRefreshedUntil(t *testing.T, ctx context.Context, cond string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`document.body.dataset.state === 'ready' && (`+cond+`)`, chromedp.WithPollingTimeout(0))); err != nil {
		t.Fatalf("waiting for %s: %v", cond, err)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12+1e-9*math.Abs(b) }

func closeMaps(got, want map[string]float64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || !near(g, w) {
			return false
		}
	}
	return true
}

func jsString(s string) string { b, _ := json.Marshal(s); return string(b) }
