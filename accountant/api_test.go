package accountant

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

const overrideConfig = `governance:
  enabled: true
  tenants:
    - org: acme
      teams: [ml]
  limits:
    - id: team_budget
      attach: { level: team }
      type: budget_usd
      amount_usd: 1
      period: month
      posture: { thresholds: [0.5] }
      override: { allow: true, max_amount_usd: 5 }
`

func (f *fixture) admin(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer admin-secret")
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// TestRuntimeWritesReachSyncAndCounters writes through the management API
// and checks the accountant re-arms at once: the runtime part of sync
// changes version and carries the override, the armed plan applies it, and
// a runtime node gets its history counted.
func TestRuntimeWritesReachSyncAndCounters(t *testing.T) {
	f := newFixture(t, overrideConfig)
	f.ingest(t, batch(
		row(reqID(1), t0, "org:acme/team:ml", "gpt-4o-mini", 8, 19),
		row(reqID(2), t0, "org:acme/team:ai", "gpt-4o-mini", 1000, 1000),
	))
	before := f.sync(t, "")
	if len(before.Snapshot.Entries) != 1 {
		t.Fatalf("entries before: %+v", before.Snapshot.Entries)
	}

	// An override lowers team:ml's cap to $0.00002: the re-derived counter
	// (12600 nanodollars) is past half of it, and the alert says so.
	code, body := f.admin(t, http.MethodPut, api.Prefix+"overrides", `{"limit_id":"team_budget","node":"org:acme/team:ml","amount_usd":0.00002}`)
	if code != http.StatusOK {
		t.Fatalf("put override: %d %s", code, body)
	}
	after := f.sync(t, "runtime="+before.Runtime.Cursor)
	if after.Runtime.Cursor == before.Runtime.Cursor || after.Runtime.Reset || len(after.Runtime.Keys)+len(after.Runtime.Nodes) != 0 ||
		len(after.Runtime.Overrides) != 1 || after.Runtime.Overrides[0].Amount != 20000 {
		t.Fatalf("runtime after the override: %+v", after.Runtime)
	}
	if amt, ok := f.s.Armed().Override("team_budget", "org:acme/team:ml"); !ok || amt != 20000 {
		t.Errorf("armed override = %d, %v", amt, ok)
	}
	if !strings.Contains(f.logs.String(), "threshold alert: limit team_budget at org:acme/team:ml") {
		t.Errorf("no alert after the override lowered the cap:\n%s", f.logs)
	}

	// A runtime node: team:ai's earlier row now counts.
	code, body = f.admin(t, http.MethodPost, api.Prefix+"nodes", `{"id":"org:acme/team:ai"}`)
	if code/100 != 2 {
		t.Fatalf("create node: %d %s", code, body)
	}
	s := f.sync(t, "runtime="+after.Runtime.Cursor+"&snapshot="+after.Snapshot.Cursor)
	if len(s.Runtime.Nodes) != 2 || s.Runtime.Nodes[1] != (syncwire.Node{ID: "org:acme/team:ai", Tree: true}) || len(s.Snapshot.Entries) != 1 || s.Snapshot.Cursor == after.Snapshot.Cursor {
		t.Errorf("after the runtime node: nodes %v, entries %+v", s.Runtime.Nodes, s.Snapshot.Entries)
	}

	// Reload through the API.
	code, body = f.admin(t, http.MethodPost, api.Prefix+"reload", "")
	if code/100 != 2 {
		t.Errorf("reload: %d %s", code, body)
	}
}

// TestReloadsAreAudited reloads the config through the API and by signal,
// once with a config that compiles and once with one that does not: each
// reload is in the audit log with who asked, the plan hash before and
// after, and the result.
func TestReloadsAreAudited(t *testing.T) {
	f := newFixture(t, overrideConfig)
	first := f.sync(t, "").Plan.Version

	if code, body := f.admin(t, http.MethodPost, api.Prefix+"reload", ""); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, body)
	}
	edited := strings.Replace(overrideConfig, "amount_usd: 1\n", "amount_usd: 2\n", 1)
	if edited == overrideConfig {
		t.Fatal("the edit changed nothing")
	}
	f.setConfig(t, edited)
	if err := f.s.Reload(); err != nil {
		t.Fatal(err)
	}
	second := f.sync(t, "").Plan.Version
	if second == first {
		t.Fatal("the edited config armed the same plan")
	}
	f.setConfig(t, "governance: {enabled: maybe}\n")
	if code, body := f.admin(t, http.MethodPost, api.Prefix+"reload", ""); code != http.StatusConflict {
		t.Fatalf("broken reload: %d %s", code, body)
	}
	if err := f.s.Reload(); err == nil {
		t.Fatal("a broken config reloaded by signal")
	}

	code, body := f.admin(t, http.MethodGet, api.Prefix+"audit", "")
	if code != http.StatusOK {
		t.Fatalf("audit: %d %s", code, body)
	}
	var page struct {
		Entries []struct {
			Who, Action, Target, Node string
			Before, After             struct{ Config, Plan, Result, Error string }
		}
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	want := []struct{ who, before, after, result string }{
		{"admin", first, first, "applied"},
		{"signal", first, second, "applied"},
		{"admin", second, second, "rejected"},
		{"signal", second, second, "rejected"},
	}
	if len(page.Entries) != len(want) {
		t.Fatalf("audit holds %d entries, want the %d reloads:\n%s", len(page.Entries), len(want), body)
	}
	for i, w := range want {
		e := page.Entries[i]
		if e.Action != "config.reload" || e.Who != w.who || e.Target != f.config || e.Node != "__global" ||
			e.Before.Plan != w.before || e.After.Plan != w.after || e.After.Result != w.result || e.Before.Config != f.config {
			t.Errorf("entry %d: %+v\nwant who %s, plan %s -> %s, %s", i, e, w.who, w.before, w.after, w.result)
		}
		if (w.result == "rejected") != (e.After.Error != "") {
			t.Errorf("entry %d: error %q for a reload %s", i, e.After.Error, w.result)
		}
	}
}

// TestReloadNamesKeysLeftOutOfTheTree: a reload that drops a key's owner
// from the tenants leaves the key working with only the limits of the
// nodes still in the tree above it; the accountant names each such key
// once, with what to do, and again only when the set changes.
func TestReloadNamesKeysLeftOutOfTheTree(t *testing.T) {
	f := newFixture(t, overrideConfig)
	code, body := f.admin(t, http.MethodPost, api.Prefix+"keys", `{"owner":"org:acme/team:ml"}`)
	if code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("mint: %d %s", code, body)
	}
	var minted struct {
		KID string `json:"kid"`
	}
	if err := json.Unmarshal([]byte(body), &minted); err != nil || minted.KID == "" {
		t.Fatalf("mint answer %s: %v", body, err)
	}
	const note = "is owned by org:acme/team:ml, which is no longer a node of the tenancy tree"
	if strings.Contains(f.logs.String(), note) {
		t.Fatalf("warned while the owner is in the tree:\n%s", f.logs)
	}
	f.setConfig(t, strings.Replace(overrideConfig, "teams: [ml]", "teams: [ai]", 1))
	if err := f.s.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(f.logs.String(), note); n != 1 || !strings.Contains(f.logs.String(), minted.KID) {
		t.Errorf("%d warnings naming the key's owner after the reload, want 1 naming %s:\n%s", n, minted.KID, f.logs)
	}
	// Another write re-arms with the same orphans: no second warning.
	if code, body := f.admin(t, http.MethodPost, api.Prefix+"nodes", `{"id":"org:acme/team:new"}`); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("node: %d %s", code, body)
	}
	if n := strings.Count(f.logs.String(), note); n != 1 {
		t.Errorf("%d warnings after an unrelated write, want 1:\n%s", n, f.logs)
	}
}

// TestReloadPinnedAtRuntimeNode: a limit pinned at a node that exists only
// in the runtime plane does not compile (the plan compiles from the config
// alone, in the accountant and in every filter); the reload says the node
// is a runtime one and how to pin there.
func TestReloadPinnedAtRuntimeNode(t *testing.T) {
	f := newFixture(t, overrideConfig)
	if code, body := f.admin(t, http.MethodPost, api.Prefix+"nodes", `{"id":"org:acme/team:rt"}`); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("node: %d %s", code, body)
	}
	pinned := overrideConfig + `    - id: rt_daily
      attach: { node: "org:acme/team:rt" }
      type: quota_requests
      amount: 3
      period: day
`
	f.setConfig(t, pinned)
	err := f.s.Reload()
	want := `governance: compile limits: govern: limit "rt_daily": pinned node "org:acme/team:rt" not in tenancy tree; ` +
		`it is a runtime node (created with POST /tt/api/v1/nodes), and a limit is pinned only at a node declared in governance.tenants ` +
		`(the plan compiles from the config alone, in the accountant and in every filter): declare it there, and the declaration stands for the runtime node`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("reload: %v\nwant it to contain %q", err, want)
	}
}
