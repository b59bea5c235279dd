package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/internal/devserver"
	"github.com/tokentriage/tokentriage/internal/testwasm"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

const manageConfig = `governance:
  enabled: true
  require_key: true
  tenants:
    - org: acme
      teams: [ml, search]
      users: { ml: [dev1, dev2] }
    - org: beta
      teams: [x]
      users: { x: [y] }
  limits:
    - id: team_requests
      attach: { level: team }
      type: quota_requests
      amount: 2
      period: day
      override: { allow: true, max_amount: 500 }
    - id: team_budget
      attach: { level: team }
      type: budget_usd
      amount_usd: 10
      period: month
      override: { allow: true, max_amount_usd: 100 }
    - id: user_rpm
      attach: { level: user }
      type: rpm
      amount: 1000
      period: 1m
`

// page is a browser tab on the dashboard, with the helpers the
// management test drives it with.
type page struct {
	t        *testing.T
	ctx      context.Context
	problems func() []string
	art      string
}

func (p *page) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	p.t.Logf("%s %s", time.Now().Format("15:04:05.000"), step)
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", step, err)
	}
}

// until waits for a JavaScript condition on the page.
func (p *page) until(step, cond string) {
	p.t.Helper()
	p.do(step, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(0)))
}

func (p *page) eval(js string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		p.t.Fatalf("%s: %v", js, err)
	}
	return v
}

func (p *page) shot(name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(p.art, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
}

// pick chooses value in the select sel, as a user does (a change event
// follows).
func (p *page) pick(sel, value string) {
	p.t.Helper()
	js := fmt.Sprintf(`(() => { const s = document.querySelector(%s); if (![...s.options].some(o => o.value === %s)) return 'no option ' + %s + ' in ' + s.id;
		s.value = %s; s.dispatchEvent(new Event('change', {bubbles: true})); return ''; })()`, jsString(sel), jsString(value), jsString(value), jsString(value))
	if msg := p.eval(js); msg != "" {
		p.t.Fatalf("pick %s %q: %s", sel, value, msg)
	}
}

// tab opens a page of the dashboard and waits until it has drawn.
func (p *page) tab(name string) {
	p.t.Helper()
	before := p.eval(`document.body.dataset.pageState || ''`)
	p.do("open "+name, chromedp.Click(chromedp.CSS(`#tabs a[data-page=`+name+`]`)))
	p.until(name+" drawn", `(document.body.dataset.pageState || '').startsWith('`+name+`:ready') && document.body.dataset.pageState !== `+jsString(before))
}

// confirm presses OK in the open dialog and waits for it to close.
func (p *page) confirm(step string) {
	p.t.Helper()
	p.do(step, chromedp.WaitVisible(chromedp.CSS(`#dialog[open] #dialog-ok`)), chromedp.Click(chromedp.CSS(`#dialog-ok`)))
	p.until(step+": the dialog closes", `!document.querySelector('#dialog').open`)
}

// gateway is a client of the dev system's gateway.
type gateway struct {
	t   *testing.T
	url string
}

func (g gateway) chat(key string) (int, string) {
	g.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":8,"messages":[{"role":"user","content":"Say hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// until sends chats with key until the gateway answers status (the
// counters settle a second or two after a call).
func (g gateway) until(what, key string, status int) string {
	g.t.Helper()
	g.t.Logf("%s %s", time.Now().Format("15:04:05.000"), what)
	deadline := testDeadline(g.t)
	for {
		code, body := g.chat(key)
		if code == status {
			return body
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: the gateway still answers %d %s; want %d", what, code, body, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testDeadline is the test's deadline less a margin, or a long way off.
func testDeadline(t *testing.T) time.Time {
	if d, ok := t.Deadline(); ok {
		return d.Add(-30 * time.Second)
	}
	return time.Now().Add(time.Hour)
}

// TestManageInBrowser drives the dashboard's management pages in headless
// Chromium over a whole dev system (gateway, filter, accountant, stub):
// it mints a named key with an expiry from the page and reads the key
// shown once, sees its spend by name, meets a quota at the gateway and
// resets the counter from the page (the gateway serves again), sets an
// override from the page and sees it in force and enforced, rotates and
// revokes a key and sees the gateway refuse the old secret and the
// revoked key, reads the audit log filtered, downloads the CSV of a table;
// then a delegated admin of one team sees nothing of the other subtrees
// and cannot touch them with its token. Screenshots of every page are
// saved under the test's artifacts.
func TestManageInBrowser(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokentriage.yaml")
	os.WriteFile(cfg, []byte(manageConfig), 0o644)
	ctx0, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := devserver.Start(ctx0, devserver.Options{ConfigPath: cfg, DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0",
		AccountantListen: "127.0.0.1:0", Workers: 1, Module: testwasm.Filter(t), AdminToken: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	gw := gateway{t: t, url: s.URL()}
	// Another subtree's key, for the delegated admin not to see.
	beta, err := s.Admin().Mint(ctx0, api.MintRequest{Owner: "org:beta/team:x/user:y", Name: "beta-batch"})
	if err != nil {
		t.Fatal(err)
	}

	ctx, problems := browser(t)
	downloads := t.TempDir()
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatal(err)
	}
	p := &page{t: t, ctx: ctx, problems: problems, art: t.ArtifactDir()}
	p.do("load", chromedp.Navigate(s.AccountantURL()+"/tt/ui/?refresh=1"), chromedp.WaitVisible(chromedp.CSS("#token")))
	p.do("sign in", chromedp.SendKeys(chromedp.CSS("#token"), adminToken), chromedp.Click(chromedp.CSS("#signin-form button[type=submit]")))
	p.until("spend page", `document.body.dataset.state === 'ready'`)
	if c := p.eval(`document.cookie`); c != "" {
		t.Errorf("the dashboard set a cookie: %q", c)
	}

	// Mint a named key with an expiry from the page.
	p.tab("keys")
	p.pick("#mint-owner", "org:acme/team:ml/user:dev1")
	p.pick("#mint-expires", "30d")
	p.do("fill the mint form",
		chromedp.SendKeys(chromedp.CSS("#mint-name"), "ci-bot"),
		chromedp.Click(chromedp.CSS(`#mint-form input[value="/v1/chat/completions"]`)),
		chromedp.Click(chromedp.CSS("#mint-form button[type=submit]")))
	p.until("the key shown once", `!document.querySelector('#secret').hidden && document.querySelector('#secret-key').textContent.startsWith('tt-vk_')`)
	key := p.eval(`document.querySelector('#secret-key').textContent`)
	kid, err := vkey.KID(key)
	if err != nil {
		t.Fatalf("the page showed %q: %v", key, err)
	}
	p.until("the key listed", `!!document.querySelector('#keys tr[data-kid=`+kid+`][data-state=live]')`)
	row := p.eval(`document.querySelector('#keys tr[data-kid=` + kid + `]').innerText`)
	if !strings.Contains(row, "ci-bot") || !strings.Contains(row, "org:acme/team:ml/user:dev1") || !strings.Contains(row, time.Now().UTC().AddDate(0, 0, 30).Format("2006-01-02")) {
		t.Errorf("the key's row: %q", row)
	}
	p.shot("manage-keys-minted.png")
	got, err := s.Admin().ListKeys(ctx0, "org:acme/team:ml/user:dev1")
	if err != nil || len(got) != 1 || got[0].Name != "ci-bot" || got[0].ExpiresAt == nil || got[0].Scopes.Endpoints[0] != "/v1/chat/completions" {
		t.Fatalf("the minted key as the API lists it: %+v %v", got, err)
	}
	p.do("hide the secret", chromedp.Click(chromedp.CSS("#secret-hide")))

	// Spend by name: two calls, then the quota (2 a day for the team).
	gw.until("the new key served", key, 200)
	gw.until("the team's quota met", key, 429)
	p.tab("spend")
	p.pick("#flat-dim", "key")
	p.until("the key's spend by name", `[...document.querySelectorAll('#flat tr[data-group="`+kid+`"] td.name')].some(td => td.textContent === 'ci-bot (`+kid+`)')`)
	p.shot("manage-spend.png")
	p.do("download the table", chromedp.Click(chromedp.CSS("#flat-csv")))
	p.until("the CSV saved", `(document.body.dataset.csv || '').startsWith('spend-by-key-')`)
	csv := waitFile(t, downloads, p.eval(`document.body.dataset.csv`))
	if !strings.Contains(csv, "key,key_name,priced_usd") || !strings.Contains(csv, kid+",ci-bot,") {
		t.Errorf("the CSV of the table:\n%s", csv)
	}

	// Reset the counter from the page: the gateway serves again.
	p.tab("limits")
	reset := `#counters tr[data-limit=team_requests][data-node="org:acme/team:ml"] button[data-action=reset]`
	p.until("the team's quota counter", `!!document.querySelector('`+reset+`')`)
	p.do("reset", chromedp.Click(chromedp.CSS(reset)))
	p.shot("manage-reset-dialog.png")
	p.confirm("confirm the reset")
	p.until("the reset said", `document.querySelector('#notice').textContent.startsWith('Reset team_requests at org:acme/team:ml')`)
	gw.until("served after the reset", key, 200)
	gw.until("the quota met again", key, 429)

	// Set an override from the page: in force, and the gateway admits
	// up to it.
	p.tab("limits")
	p.pick("#ov-limit", "team_requests")
	p.until("the team's node offered", `!!document.querySelector('#ov-node option[value="org:acme/team:ml"]')`)
	p.pick("#ov-node", "org:acme/team:ml")
	p.do("set it", chromedp.SendKeys(chromedp.CSS("#ov-amount"), "400"),
		chromedp.Click(chromedp.CSS("#ov-form button[type=submit]")))
	p.until("the override listed", `!!document.querySelector('#overrides tr[data-limit=team_requests][data-node="org:acme/team:ml"]')`)
	gw.until("served under the override", key, 200)
	for p.eval(`(document.querySelector('#overrides tr[data-limit=team_requests]') || {dataset: {}}).dataset.state`) != "in_force" {
		time.Sleep(200 * time.Millisecond)
		p.tab("limits")
	}
	p.shot("manage-limits.png")

	// Rotate a second key with no grace, and revoke the first.
	k2, err := s.Admin().Mint(ctx0, api.MintRequest{Owner: "org:acme/team:ml/user:dev2", Name: "rotating"})
	if err != nil {
		t.Fatal(err)
	}
	p.tab("keys")
	p.do("rotate", chromedp.Click(chromedp.CSS(`#keys tr[data-kid=`+k2.KID+`] button[data-action=rotate]`)),
		chromedp.WaitVisible(chromedp.CSS("#dlg-grace")))
	p.pick("#dlg-grace", "0s")
	p.confirm("confirm the rotation")
	p.until("the rotated key shown", `document.querySelector('#secret-title').textContent.startsWith('Rotated') && document.querySelector('#secret-key').textContent !== ''`)
	rotated := p.eval(`document.querySelector('#secret-key').textContent`)
	if k, _ := vkey.KID(rotated); k != k2.KID || rotated == k2.Key {
		t.Fatalf("rotated key %q of %s", rotated, k2.KID)
	}
	gw.until("the old secret refused", k2.Key, 401)
	gw.until("the new secret served", rotated, 200)
	p.do("revoke", chromedp.Click(chromedp.CSS(`#keys tr[data-kid=`+kid+`] button[data-action=revoke]`)))
	p.confirm("confirm the revocation")
	p.pick("#keys-state", "")
	p.until("the key revoked", `!!document.querySelector('#keys tr[data-kid=`+kid+`][data-state=revoked]')`)
	if body := gw.until("the revoked key refused", key, 401); !strings.Contains(body, "revoked") {
		t.Errorf("the revoked key's refusal: %s", body)
	}
	p.shot("manage-keys.png")

	// Nodes: add a team from the page.
	p.tab("nodes")
	p.pick("#node-parent", "org:acme")
	p.do("add a node", chromedp.SendKeys(chromedp.CSS("#node-name"), "payments"),
		chromedp.Click(chromedp.CSS("#node-form button[type=submit]")))
	p.until("the node listed", `!!document.querySelector('#nodes tr[data-node="org:acme/team:payments"][data-source=runtime]')`)
	p.shot("manage-nodes.png")

	// The audit log, filtered to keys: every write named with its author.
	p.tab("audit")
	p.pick("#audit-action", "key.")
	p.until("key entries only", `[...document.querySelectorAll('#audit tr[data-action]')].length >= 5 && [...document.querySelectorAll('#audit tr[data-action]')].every(r => r.dataset.action.startsWith('key.'))`)
	actions := p.eval(`[...document.querySelectorAll('#audit tr[data-action]')].map(r => r.dataset.who + ' ' + r.dataset.action).join(',')`)
	if !strings.HasPrefix(actions, "admin key.revoke,admin key.rotate,admin key.mint,admin key.mint") {
		t.Errorf("the audit log's key entries, newest first: %s", actions)
	}
	p.shot("manage-audit.png")

	// A delegated admin of team:ml: its own subtree only.
	var adm api.CreatedAdmin
	if err := postJSON(s.AccountantURL()+"/tt/api/v1/admins", `{"scope":"org:acme/team:ml"}`, &adm); err != nil {
		t.Fatal(err)
	}
	p.do("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#token")))
	p.do("sign in delegated", chromedp.SendKeys(chromedp.CSS("#token"), adm.Token), chromedp.Click(chromedp.CSS("#signin-form button[type=submit]")))
	p.until("delegated", `document.querySelector('#who').textContent.includes('org:acme/team:ml')`)
	for _, name := range []string{"keys", "limits", "nodes", "audit"} {
		p.tab(name)
		if name == "keys" {
			p.pick("#keys-state", "")
		}
		text := p.eval(`document.querySelector('#page-` + name + `').innerText + [...document.querySelectorAll('#page-` + name + ` option')].map(o => o.value).join(' ')`)
		for _, other := range []string{"org:beta", "beta-batch", beta.KID, "team:search"} {
			if strings.Contains(text, other) {
				t.Errorf("the delegated admin's %s page shows %q", name, other)
			}
		}
		p.shot("manage-delegated-" + name + ".png")
	}
	p.tab("limits")
	if d := p.eval(`String(document.querySelector('#counters tr[data-limit=team_requests][data-node="org:acme/team:ml"] button[data-action=reset]').disabled)`); d != "true" {
		t.Errorf("the delegated admin may press Reset on its own scope's counter (the API refuses it): disabled=%s", d)
	}
	if p := p.problems(); len(p) > 0 {
		t.Errorf("the page raised errors:\n%s", strings.Join(p, "\n"))
	}
	// What the page's token can do to another subtree: nothing.
	forged, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const h = {Authorization: 'Bearer ' + sessionStorage.getItem('tt.token'), 'Content-Type': 'application/json'};
		const a = await fetch('/tt/api/v1/keys/`+beta.KID+`/revoke', {method: 'POST', headers: h});
		const b = await fetch('/tt/api/v1/counters/reset', {method: 'POST', headers: h, body: JSON.stringify({limit_id: 'team_requests', node: 'org:beta/team:x'})});
		const c = await fetch('/tt/api/v1/keys?owner=org:beta', {headers: h});
		return [a.status, b.status, c.status].join(',');
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if forged != "403,403,403" {
		t.Errorf("the delegated admin's token on another subtree: %s; want 403,403,403", forged)
	}
	if k, err := s.Admin().ListKeys(ctx0, "org:beta"); err != nil || len(k) != 1 || k[0].State != "live" {
		t.Errorf("beta's key after the delegated admin's attempts: %+v %v", k, err)
	}
}

// waitFile waits until the browser has written name into dir and returns
// its content.
func waitFile(t *testing.T, dir, name string) string {
	t.Helper()
	deadline := testDeadline(t)
	for {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no download %s in %s", name, dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// postJSON posts body with the admin token and decodes the answer.
func postJSON(url, body string, out any) error {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, b)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
