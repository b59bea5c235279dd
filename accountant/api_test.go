package accountant

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/accountant/api"
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
	after := f.sync(t, "runtime="+before.Runtime.Version)
	if after.Runtime.Version == before.Runtime.Version || len(after.Runtime.Overrides) != 1 || after.Runtime.Overrides[0].Amount != 20000 {
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
	s := f.sync(t, "")
	if len(s.Runtime.Nodes) != 1 || len(s.Snapshot.Entries) != 2 || s.Snapshot.Version == after.Snapshot.Version {
		t.Errorf("after the runtime node: nodes %v, entries %+v", s.Runtime.Nodes, s.Snapshot.Entries)
	}

	// Reload through the API.
	code, body = f.admin(t, http.MethodPost, api.Prefix+"reload", "")
	if code/100 != 2 {
		t.Errorf("reload: %d %s", code, body)
	}
}
