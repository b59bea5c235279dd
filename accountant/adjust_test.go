package accountant

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

const countersConfig = `governance:
  enabled: true
  tenants:
    - org: acme
      teams: [ml, search]
      users: { ml: [dev1] }
  limits:
    - id: team_tokens
      attach: { level: team }
      type: quota_tokens
      amount: 10000
      period: month
      posture: { thresholds: [0.5] }
    - id: acme_day
      attach: { node: "org:acme" }
      type: budget_usd
      amount_usd: 1
      period: day
    - id: mini_requests
      attach: { level: team }
      type: quota_requests
      amount: 100
      period: day
      match: { model: "gpt-4o*" }
`

// entryOf is the snapshot's value of counter id, and whether it is there.
func entryOf(s syncwire.Sync, id string) (int64, bool) {
	for _, e := range s.Snapshot.Entries {
		if e.ID == id {
			return e.Value, true
		}
	}
	return 0, false
}

// TestCounterResetAndCredit: a reset takes the counter the filters read
// to zero and later rows count from there; a credit takes part of it off,
// never more than it holds; both are audited under the caller, survive a
// restart (the ledger's replay counts every row again, the adjustments
// come off again), and leave the spend report alone. A delegated admin
// adjusts only below its scope.
func TestCounterResetAndCredit(t *testing.T) {
	f := newFixture(t, countersConfig)
	const ml = "org:acme/team:ml"
	tokens := "team_tokens|quota_tokens|org:acme/team:ml||month|"
	f.ingest(t, batch(
		row(reqID(1), t0, ml+"/user:dev1", "gpt-4o-mini", 3000, 1000),
		row(reqID(2), t0, ml+"/user:dev1", "gpt-4o", 500, 500),
	))
	if v, _ := entryOf(f.sync(t, ""), tokens); v != 5000 {
		t.Fatalf("team_tokens before: %d", v)
	}
	code, body := f.admin(t, http.MethodPost, api.Prefix+"counters/reset", `{"limit_id":"team_tokens","node":"org:acme/team:ml"}`)
	var out api.CounterAdjusted
	json.Unmarshal([]byte(body), &out)
	if code != 200 || out.Before != "5000" || out.Taken != "5000" || out.After != "0" || out.Counter != tokens || out.Who != "admin" || out.Period != "month" {
		t.Fatalf("reset: %d %s", code, body)
	}
	s := f.sync(t, "")
	v, _ := entryOf(s, tokens)
	credit, _ := entryOf(s, tokens+syncwire.CreditSuffix)
	if v != 0 || credit != 5000 {
		t.Fatalf("after the reset the snapshot serves %d (credit entry %d); want 0 (5000)", v, credit)
	}
	// Later rows count from zero, and a threshold alert is judged on what
	// the gate counts: 4,000 tokens after the reset are under half.
	f.clock.Set(t0.Add(time.Minute))
	f.logs.Reset()
	f.ingest(t, batch(row(reqID(3), t0.Add(time.Minute), ml+"/user:dev1", "gpt-4o-mini", 3000, 1000)))
	if v, _ := entryOf(f.sync(t, ""), tokens); v != 4000 {
		t.Fatalf("after a row of 4000: %d", v)
	}
	if strings.Contains(f.logs.String(), "threshold") {
		t.Errorf("an alert fired at 4,000 of 10,000 tokens after the reset:\n%s", f.logs)
	}
	// A credit takes part off; more than the counter holds takes it all.
	code, body = f.admin(t, http.MethodPost, api.Prefix+"counters/credit", `{"limit_id":"team_tokens","node":"org:acme/team:ml","amount":1500}`)
	if code != 200 || !strings.Contains(body, `"before":4000,"taken":1500,"after":2500`) {
		t.Fatalf("credit: %d %s", code, body)
	}
	code, body = f.admin(t, http.MethodPost, api.Prefix+"counters/credit", `{"limit_id":"team_tokens","node":"org:acme/team:ml","amount":99999}`)
	if code != 200 || !strings.Contains(body, `"before":2500,"taken":2500,"after":0`) {
		t.Fatalf("credit past the counter: %d %s", code, body)
	}
	f.clock.Set(t0.Add(2 * time.Minute))
	f.ingest(t, batch(row(reqID(4), t0.Add(2*time.Minute), ml+"/user:dev1", "gpt-4o-mini", 100, 100)))
	if v, _ := entryOf(f.sync(t, ""), tokens); v != 200 {
		t.Fatalf("after the credits and a row of 200: %d", v)
	}

	// A restart replays the ledger (every row counted again) and takes the
	// adjustments off again.
	f.restart(t)
	if v, _ := entryOf(f.sync(t, ""), tokens); v != 200 {
		t.Fatalf("after a restart: %d; want 200", v)
	}
	code, body = f.admin(t, http.MethodGet, api.Prefix+"spend/limits", "")
	if code != 200 || !strings.Contains(body, `"counter":"`+strings.ReplaceAll(tokens, "|", "|")+`","credited":9000`) || !strings.Contains(body, `"used":200`) {
		t.Fatalf("spend/limits: %d %s", code, body)
	}
	// The spend report still has every row.
	var rep struct {
		Total struct {
			InputTokens int64 `json:"input_tokens"`
		} `json:"total"`
	}
	_, body = f.admin(t, http.MethodGet, api.Prefix+"spend?from=2026-08-01&to=2026-09-01", "")
	json.Unmarshal([]byte(body), &rep)
	if rep.Total.InputTokens != 6600 {
		t.Fatalf("spend report input tokens %d; want every row's 6600: %s", rep.Total.InputTokens, body)
	}

	// A dollar credit, a counter per model, and the refusals.
	f.ingest(t, batch(row(reqID(5), t0.Add(2*time.Minute), ml+"/user:dev1", "gpt-4o-mini", 1_000_000, 0)))
	code, body = f.admin(t, http.MethodPost, api.Prefix+"counters/credit", `{"limit_id":"acme_day","node":"org:acme","amount_usd":0.1}`)
	if code != 200 || !strings.Contains(body, `"taken":0.1,`) || !strings.Contains(body, `"unit":"usd"`) {
		t.Fatalf("dollar credit: %d %s", code, body)
	}
	code, body = f.admin(t, http.MethodPost, api.Prefix+"counters/reset", `{"limit_id":"mini_requests","node":"org:acme/team:ml","dims":{"model":"gpt-4o-mini"}}`)
	if code != 200 || !strings.Contains(body, `"before":4,"taken":4,"after":0`) || !strings.Contains(body, `"dims":{"model":"gpt-4o-mini"}`) {
		t.Fatalf("per-model reset: %d %s", code, body)
	}
	for _, c := range []struct {
		route, body string
		code        int
		msg         string
	}{
		{"counters/reset", `{"limit_id":"mini_requests","node":"org:acme/team:ml"}`, 400, `limit \"mini_requests\" keeps one counter per model matching \"gpt-4o*\": name the model in dims.model`},
		{"counters/reset", `{"limit_id":"team_tokens","node":"org:acme"}`, 404, `limit \"team_tokens\" has no instance at \"org:acme\"`},
		{"counters/reset", `{"limit_id":"nope","node":"org:acme"}`, 404, `limit \"nope\" is not armed`},
		{"counters/credit", `{"limit_id":"acme_day","node":"org:acme","amount":5}`, 400, `limit \"acme_day\" is budget_usd: send amount_usd`},
		{"counters/credit", `{"limit_id":"team_tokens","node":"org:acme/team:ml","amount":0}`, 400, `the amount to credit must be more than 0`},
		{"counters/reset", `{"limit_id":"team_tokens","node":"org:acme/team:ml","amount":3}`, 400, `a reset takes the whole counter and no amount`},
		{"counters/reset", `{"limit_id":"team_tokens","node":"org:acme/team:ml/../x"}`, 400, `node: `},
	} {
		code, body := f.admin(t, http.MethodPost, api.Prefix+c.route, c.body)
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("%s %s: %d %s\nwant %d %s", c.route, c.body, code, body, c.code, c.msg)
		}
	}

	// Every adjustment is in the audit log under who took it.
	_, body = f.admin(t, http.MethodGet, api.Prefix+"audit", "")
	for _, want := range []string{`"who":"admin","action":"counter.reset","target":"` + tokens + `","node":"org:acme/team:ml"`, `"action":"counter.credit"`} {
		if !strings.Contains(body, want) {
			t.Errorf("audit log lacks %s:\n%s", want, body)
		}
	}

	// A delegated admin of org:acme resets below it, never its own node.
	code, body = f.admin(t, http.MethodPost, api.Prefix+"admins", `{"scope":"org:acme"}`)
	var adm api.CreatedAdmin
	json.Unmarshal([]byte(body), &adm)
	as := func(route, body string) (int, string) {
		code, _, resp := f.postAs(t, adm.Token, api.Prefix+route, body)
		return code, resp
	}
	if code, body := as("counters/reset", `{"limit_id":"acme_day","node":"org:acme"}`); code != 403 || !strings.Contains(body, "writes only below its scope") {
		t.Errorf("delegated reset of its own node: %d %s", code, body)
	}
	f.ingest(t, batch(row(reqID(6), t0.Add(2*time.Minute), "org:acme/team:search", "gpt-4o-mini", 10, 10)))
	if code, body := as("counters/reset", `{"limit_id":"team_tokens","node":"org:acme/team:search"}`); code != 200 || !strings.Contains(body, `"who":"`+adm.ID+`"`) {
		t.Errorf("delegated reset below its scope: %d %s", code, body)
	}
}

// postAs serves a POST of body with token.
func (f *fixture) postAs(t *testing.T, token, target, body string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(w, req)
	return w.Code, w.Header(), w.Body.String()
}

// TestCounterResetOnAMirrorWithoutRedis: without a shared Redis each
// accountant counts its own replica's rows only, so a reset taken on the
// owner (which measures its own count) takes each mirror's own counter to
// zero as it stood when the reset reached it, and the mirror keeps that
// amount across a restart, where its ledger is replayed.
func TestCounterResetOnAMirrorWithoutRedis(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, countersConfig)
	owner := startNode(t, cfg, filepath.Join(dir, "owner"), "127.0.0.1:0", "")
	mirrorData := filepath.Join(dir, "mirror")
	mirror := startNode(t, cfg, mirrorData, "127.0.0.1:0", owner.url())
	tokens := "team_tokens|quota_tokens|org:acme/team:ml||month|"
	ingestAt := func(n *node, rows ...ledger.Row) {
		t.Helper()
		resp, err := internalClient.Post(n.url()+syncwire.IngestPath, "application/x-ndjson", bytes.NewReader(batch(rows...)))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("ingest: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	now := time.Now().UTC()
	ingestAt(owner, row(reqID(1), now, "org:acme/team:ml/user:dev1", "gpt-4o-mini", 100, 100))
	ingestAt(mirror, row(reqID(2), now, "org:acme/team:ml/user:dev1", "gpt-4o-mini", 1000, 500), row(reqID(3), now, "org:acme/team:ml/user:dev1", "gpt-4o-mini", 400, 100))
	value := func(n *node) int64 { v, _ := entryOf(n.sync("", "", ""), tokens); return v }
	if o, m := value(owner), value(mirror); o != 200 || m != 2000 {
		t.Fatalf("before: owner %d, mirror %d", o, m)
	}
	if _, err := owner.admin().ResetCounter(context.Background(), api.CounterRequest{LimitID: "team_tokens", Node: "org:acme/team:ml"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mirror's own counter reset", func() (bool, string) {
		o, m := value(owner), value(mirror)
		return o == 0 && m == 0, fmt.Sprintf("owner %d, mirror %d", o, m)
	})
	ingestAt(mirror, row(reqID(4), now, "org:acme/team:ml/user:dev1", "gpt-4o-mini", 30, 20))
	eventually(t, "the mirror counting from zero", func() (bool, string) { m := value(mirror); return m == 50, fmt.Sprint(m) })
	mirror.close()
	mirror = startNode(t, cfg, mirrorData, "127.0.0.1:0", owner.url())
	if m := value(mirror); m != 50 {
		t.Errorf("after a restart the mirror counts %d; want 50 (every row replayed, the reset's 2000 taken off again)", m)
	}
}

// TestCounterResetInOtherPeriods: a reset takes a counter of a period in a
// time zone, or of a quarter, to zero (they are keyed by their end as
// well, and before the reset named the UTC period and took nothing off);
// a rolling window's counter is refused with the reason.
func TestCounterResetInOtherPeriods(t *testing.T) {
	f := newFixture(t, testkit.Dev1Tenants+`  limits:
    - { id: berlin_day, attach: { level: team }, type: quota_tokens, amount: 10000, period: day, timezone: Europe/Berlin }
    - { id: team_quarter, attach: { level: team }, type: quota_tokens, amount: 10000, period: quarter }
    - { id: team_week, attach: { level: team }, type: quota_tokens, amount: 10000, period: 7d }
`)
	const ml = "org:acme/team:ml"
	f.ingest(t, batch(row(reqID(1), t0, ml+"/user:dev1", "gpt-4o-mini", 3000, 1000)))
	ids := map[string]string{}
	for _, e := range f.sync(t, "").Snapshot.Entries {
		if lid, _, _ := strings.Cut(e.ID, "|"); !strings.Contains(e.ID, "#") {
			ids[lid] = e.ID
			if e.Value != 4000 {
				t.Fatalf("%s before: %d", e.ID, e.Value)
			}
		}
	}
	for _, lid := range []string{"berlin_day", "team_quarter"} {
		code, body := f.admin(t, http.MethodPost, api.Prefix+"counters/reset", `{"limit_id":"`+lid+`","node":"`+ml+`"}`)
		if code != 200 || !strings.Contains(body, `"taken":4000`) {
			t.Fatalf("reset %s: %d %s", lid, code, body)
		}
		if v, ok := entryOf(f.sync(t, ""), ids[lid]); !ok || v != 0 {
			t.Errorf("%s after the reset: %d (%v); want 0", lid, v, ok)
		}
	}
	code, body := f.admin(t, http.MethodPost, api.Prefix+"counters/reset", `{"limit_id":"berlin_day","node":"`+ml+`"}`)
	if code != 200 || !strings.Contains(body, `"resets_at":"2026-08-10T22:00:00Z"`) {
		t.Errorf("the Berlin day's reset names its end (22:00 UTC in summer): %d %s", code, body)
	}
	code, body = f.admin(t, http.MethodPost, api.Prefix+"counters/reset", `{"limit_id":"team_week","node":"`+ml+`"}`)
	if code != 400 || !strings.Contains(body, "rolling window (7d)") {
		t.Errorf("a rolling window's reset: %d %s", code, body)
	}
	if v, _ := entryOf(f.sync(t, ""), ids["team_week"]); v != 4000 {
		t.Errorf("team_week after the refused reset: %d", v)
	}
	// The limits API reads the window as the gateway does.
	code, body = f.admin(t, http.MethodGet, api.Prefix+"spend/limits", "")
	if code != 200 || !strings.Contains(body, `"limit_id":"team_week","type":"quota_tokens","node":"org:acme/team:ml","period":"7d"`) || !strings.Contains(body, `"used":4000`) {
		t.Errorf("spend/limits: %d %s", code, body)
	}
}
