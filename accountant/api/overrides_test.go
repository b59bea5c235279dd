package api

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/config"
)

func usdPtr(s string) *config.USD {
	u, err := config.ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return &u
}

func TestOverrides(t *testing.T) {
	f := newFixture(t, overridesConfig)
	b := f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "acme_month", Node: "org:acme", AmountUSD: usdPtr("2500.5")}, nil)
	want := `{"limit_id":"acme_month","limit_type":"budget_usd","node":"org:acme","amount":{"usd":2500.5,"estimated":false,"unpriced":false},"set_by":"admin","set_at":"2026-08-14T09:00:00Z","state":"armed","reason":"the accountant has armed it; the gateway enforces it from each filter's next sync (sync_interval, 1s by default) and checks traffic against the previous amount until then"}` + "\n"
	if string(b) != want {
		t.Fatalf("PUT budget override\n%s\nwant\n%s", b, want)
	}
	if got, ok := f.armed.Load().Override("acme_month", "org:acme"); !ok || got != 2500_500_000_000 {
		t.Fatalf("armed override = %d, %v; want 2500.5 dollars in nanodollars", got, ok)
	}
	f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, `{"limit_id":"team_daily_requests","node":"org:acme/team:ml","amount":30000}`, nil)
	f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, `{"limit_id":"global_daily_requests","node":"__global","amount":2000000}`, nil)

	for _, c := range []struct {
		body   any
		status int
		typ    string
		msg    string
	}{
		{`{"limit_id":"acme_month","node":"org:acme","amount":5}`, 400, "invalid_request", `limit "acme_month" is budget_usd: send amount_usd in dollars (for example 2500 or 0.5), not amount`},
		{`{"limit_id":"team_daily_requests","node":"org:acme/team:ml","amount_usd":5}`, 400, "invalid_request", `limit "team_daily_requests" is quota_requests: send amount as a count of requests, not amount_usd`},
		{`{"limit_id":"team_daily_requests","node":"org:acme/team:ml"}`, 400, "invalid_request", `the amount is missing: limit "team_daily_requests" is quota_requests, so send amount as a count of requests`},
		{`{"limit_id":"acme_month","node":"org:acme"}`, 400, "invalid_request", `the amount is missing: limit "acme_month" is budget_usd, so send amount_usd in dollars (for example 2500 or 0.5)`},
		{`{"limit_id":"acme_month","node":"org:acme","amount_usd":-1}`, 400, "invalid_request", `override amount -$1 of limit "acme_month" must be greater than zero (zero or less would switch the cap off rather than lower it); delete the override to return to the template's amount`},
		{`{"limit_id":"acme_month","node":"org:acme","amount_usd":-0.5}`, 400, "invalid_request", `override amount -$0.5 of limit "acme_month" must be greater than zero (zero or less would switch the cap off rather than lower it); delete the override to return to the template's amount`},
		{`{"limit_id":"team_daily_requests","node":"org:acme","amount":5}`, 400, "invalid_request", `limit "team_daily_requests" is a template at level "team" and has no instance at the org node "org:acme"; name a team node`},
		{`{"limit_id":"user_rpm","node":"org:acme/team:ml/user:dev1","amount":10}`, 400, "invalid_request", `limit type "rpm" does not support per-node overrides (its cap is enforced by a per-window/gauge store that cannot honor a per-node amount); overrides apply only to spend/quota limits (budget_usd, quota_tokens, quota_requests)`},
		{`{"limit_id":"team_monthly_tokens","node":"org:acme/team:ml","amount":10}`, 400, "invalid_request", `limit "team_monthly_tokens" does not allow per-node overrides; set override: { allow: true } on it in the config and reload`},
		{`{"limit_id":"acme_month","node":"org:acme","amount_usd":5000.01}`, 400, "invalid_request", `override amount $5000.01 of limit "acme_month" exceeds its ceiling $5000 (override.max_amount_usd); raise the ceiling in the config first`},
		{`{"limit_id":"acme_month","node":"org:acme","amount_usd":0}`, 400, "invalid_request", `override amount $0 of limit "acme_month" must be greater than zero (zero or less would switch the cap off rather than lower it); delete the override to return to the template's amount`},
		{`{"limit_id":"team_daily_requests","node":"org:acme/team:ml","amount":40001}`, 400, "invalid_request", `override amount 40001 of limit "team_daily_requests" exceeds its ceiling 40000 (override.max_amount); raise the ceiling in the config first`},
		{`{"limit_id":"ml_daily","node":"org:acme/team:ml","amount_usd":5}`, 400, "invalid_request", `limit "ml_daily" does not allow per-node overrides; set override: { allow: true } on it in the config and reload`},
		{`{"limit_id":"nope","node":"org:acme","amount":5}`, 404, "not_found", `limit "nope" is not armed; GET /tt/api/v1/governance/limits lists the armed limit ids`},
		{`{"limit_id":"acme_month","node":"org:acme/team:ml","amount_usd":5}`, 400, "invalid_request", `limit "acme_month" is a template at level "org" and has no instance at the team node "org:acme/team:ml"; name an org node`},
		{`{"limit_id":"acme_month","node":"org:zeta","amount_usd":5}`, 400, "invalid_request", `node "org:zeta" is not a node of the tenancy tree; declare it in the config's tenants or create it with POST /tt/api/v1/nodes first`},
		{`{"limit_id":"acme_month","node":"org:acme","amount_usd":"5"}`, 400, "invalid_request", `the request body is not the JSON object this route takes: config: usd amount: ` + usdErr(`"5"`)},
	} {
		f.wantError("PUT", Prefix+"overrides", adminToken, c.body, c.status, c.typ, c.msg)
	}
	if n := f.changed.Load(); n != 3 {
		t.Fatalf("Changed called %d times; want 3 (the three accepted writes)", n)
	}

	b = f.must(http.StatusOK, "GET", Prefix+"overrides?node=org:acme/team:ml", adminToken, nil, nil)
	want = `{"overrides":[{"limit_id":"team_daily_requests","limit_type":"quota_requests","node":"org:acme/team:ml","amount_count":30000,"set_by":"admin","set_at":"2026-08-14T09:00:00Z","state":"in_force"}]}` + "\n"
	if string(b) != want {
		t.Fatalf("GET overrides?node=\n%s\nwant\n%s", b, want)
	}
	var all OverrideList
	f.must(http.StatusOK, "GET", Prefix+"overrides", adminToken, nil, &all)
	if len(all.Overrides) != 3 {
		t.Fatalf("GET overrides = %+v", all)
	}
	f.must(http.StatusOK, "GET", Prefix+"overrides?node=__global", adminToken, nil, &all)
	if len(all.Overrides) != 1 || all.Overrides[0].LimitID != "global_daily_requests" {
		t.Fatalf("GET overrides?node=__global = %+v", all)
	}
	f.must(http.StatusOK, "GET", Prefix+"overrides?limit_id=acme_month", adminToken, nil, &all)
	if len(all.Overrides) != 1 || all.Overrides[0].Node != "org:acme" {
		t.Fatalf("GET overrides?limit_id= = %+v", all)
	}

	// The config changes under a stored override: it shows as dropped,
	// with the reason, until it is deleted.
	src, _ := os.ReadFile(overridesConfig)
	path := filepath.Join(t.TempDir(), "reloaded.yaml")
	os.WriteFile(path, []byte(strings.Replace(string(src), "override: { allow: true, max_amount: 40000 }", "override: { allow: true, max_amount: 25000 }", 1)), 0o600)
	f.plan = compileFile(t, path)
	f.arm()
	b = f.must(http.StatusOK, "GET", Prefix+"overrides?limit_id=team_daily_requests", adminToken, nil, nil)
	want = `{"overrides":[{"limit_id":"team_daily_requests","limit_type":"quota_requests","node":"org:acme/team:ml","amount_count":30000,"set_by":"admin","set_at":"2026-08-14T09:00:00Z","state":"dropped","reason":"override amount 30000 of limit \"team_daily_requests\" exceeds its ceiling 25000 (override.max_amount); raise the ceiling in the config first"}]}` + "\n"
	if string(b) != want {
		t.Fatalf("GET overrides after the ceiling dropped\n%s\nwant\n%s", b, want)
	}

	b = f.must(http.StatusOK, "DELETE", Prefix+"overrides?limit_id=team_daily_requests&node=org:acme/team:ml", adminToken, nil, nil)
	if !strings.Contains(string(b), `"state":"deleted","reason":"the instance returns to the template's amount at the filters' next sync"`) {
		t.Fatalf("DELETE answer %s", b)
	}
	f.wantError("DELETE", Prefix+"overrides?limit_id=team_daily_requests&node=org:acme/team:ml", adminToken, nil, http.StatusNotFound, "not_found",
		`no override of limit "team_daily_requests" at node "org:acme/team:ml"`)
	f.wantError("DELETE", Prefix+"overrides?node=org:acme", adminToken, nil, http.StatusBadRequest, "invalid_request",
		"limit_id is missing; DELETE /tt/api/v1/overrides?limit_id=ID&node=NODE")
}

func usdErr(s string) string {
	var u config.USD
	return strings.TrimPrefix(u.UnmarshalJSON([]byte(s)).Error(), "config: usd amount: ")
}
