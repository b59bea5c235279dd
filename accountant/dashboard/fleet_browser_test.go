package dashboard_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tokentriage/tokentriage/accountant"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// fleetMember is one in-process accountant of a two-accountant fleet.
type fleetMember struct {
	url  string
	stop func()
}

// startMember starts an accountant over rows on a loopback port,
// mirroring control ("" for the owner).
func startMember(t *testing.T, cfg string, rows []ledger.Row, control string) *fleetMember {
	t.Helper()
	data := t.TempDir()
	var b []byte
	for i := range rows {
		b = ledgerlog.AppendRow(b, &rows[i])
	}
	os.WriteFile(filepath.Join(data, ledgerlog.ActiveName), b, 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := accountant.New(accountant.Options{ConfigPath: cfg, DataDir: data, Listen: ln.Addr().String(), Control: control,
		AdminToken: adminToken, InternalToken: internalToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	m := &fleetMember{url: "http://" + ln.Addr().String()}
	stopped := false
	m.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(m.stop)
	return m
}

// TestDashboardShowsTheFleet: the seeded rows split over two accountants'
// ledgers (an owner and a mirror); the dashboard of the mirror shows the
// fleet's totals, every row once, and says both answered; with the owner
// stopped it shows what the mirror's ledger holds under a banner that
// names the owner as not answering.
func TestDashboardShowsTheFleet(t *testing.T) {
	now := time.Now().UTC()
	cfg := filepath.Join(t.TempDir(), "tokentriage.yaml")
	os.WriteFile(cfg, []byte(config), 0o644)
	rows := seedRows(now)
	for i := range rows {
		rows[i].Replica = []string{"gw-a", "gw-b"}[i/4]
	}
	owner := startMember(t, cfg, rows[:4], "")
	mirror := startMember(t, cfg, rows[4:], owner.url)

	ctx, problems := browser(t)
	tab := &page{t: t, ctx: ctx, problems: problems, art: t.ArtifactDir()}
	shot, do := tab.shot, tab.do
	do("load", chromedp.Navigate(mirror.url+"/tt/ui/?refresh=1"), chromedp.WaitVisible(chromedp.CSS("#token")))
	do("sign in", chromedp.SendKeys(chromedp.CSS("#token"), adminToken), chromedp.Click(chromedp.CSS("#signin-form button[type=submit]")))
	// The mirror hears of the owner's list with its first pull, and the
	// owner of the mirror: the page refreshes every second until both
	// ledgers are in.
	waitRefreshedUntil(t, ctx, `document.querySelector('#fleet').dataset.answered === '2' && document.querySelector('#kpi-requests').dataset.value === '8'`)
	info, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`({partial: fleet.dataset.partial, text: fleet.innerText, priced: document.querySelector('#kpi-priced').dataset.value,
		accts: [...document.querySelectorAll('#fleet li')].map(l => l.dataset.accountant + '=' + l.dataset.answered).sort().join(' ')})`))
	if err != nil {
		t.Fatal(err)
	}
	if info["partial"] != "false" || !strings.Contains(info["text"], "all 2 accountants answered") || info["priced"] != "0.008385" {
		t.Errorf("the fleet's page: %v", info)
	}
	if want := strings.Join(sorted(owner.url+"=true", mirror.url+"=true"), " "); info["accts"] != want {
		t.Errorf("accountants listed %q; want %q", info["accts"], want)
	}
	shot("dashboard-fleet.png")

	// The owner stops: the mirror's page shows its own ledger's rows,
	// flagged partial, the owner named.
	owner.stop()
	waitRefreshedUntil(t, ctx, `document.querySelector('#fleet').dataset.partial === 'true'`)
	info, err = chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`({text: fleet.innerText, cls: fleet.className, requests: document.querySelector('#kpi-requests').dataset.value,
		priced: document.querySelector('#kpi-priced').dataset.value, down: [...document.querySelectorAll('#fleet li.down')].map(l => l.dataset.accountant).join(' ')})`))
	if err != nil {
		t.Fatal(err)
	}
	if info["requests"] != "4" || info["priced"] != "0.005575" || info["down"] != owner.url || info["cls"] != "fleet partial" ||
		!strings.Contains(info["text"], "Partial: 1 of 2 accountants of the fleet did not answer") || !strings.Contains(info["text"], owner.url+" did not answer: ") {
		t.Errorf("the partial page: %v", info)
	}
	shot("dashboard-fleet-partial.png")
	if p := problems(); len(p) > 0 {
		t.Errorf("the page raised errors:\n%s", strings.Join(p, "\n"))
	}
}

func sorted(s ...string) []string {
	out := append([]string{}, s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
