package api

import (
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/wire"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func golden(t *testing.T, name string, got []byte) {
	testkit.Golden(t, filepath.Join("testdata", name+".golden"), got, *update)
}

// TestLimitsSeedCapture reproduces seed 002's captured document: each
// definition line is the seed's, byte for byte; overrides are empty and the
// note is this project's.
func TestLimitsSeedCapture(t *testing.T) {
	f := newFixture(t, "testdata/seed002_sandbox.yaml")
	got := f.must(http.StatusOK, "GET", Prefix+"governance/limits", adminToken, nil, nil)
	seed := []string{
		`{"limit_id":"org_monthly_budget","limit_type":"budget_usd","class":"spend","unit":"usd","period":"month","posture":"enforcing","attach":"template","level":"org","amount":{"usd":1000,"estimated":false,"unpriced":false},"override_allowed":true,"override_max":{"usd":5000,"estimated":false,"unpriced":false}}`,
		`{"limit_id":"team_rpm","limit_type":"rpm","class":"count","unit":"requests","period":"1m0s","posture":"alert_only","attach":"template","level":"team","amount_count":2,"override_allowed":false}`,
		`{"limit_id":"team_tpm","limit_type":"tpm","class":"count","unit":"tokens","period":"1m0s","posture":"enforcing","attach":"template","level":"team","amount_count":20000,"override_allowed":false}`,
		`{"limit_id":"user_concurrency","limit_type":"concurrency","class":"count","unit":"concurrent-requests","posture":"enforcing","attach":"template","level":"user","amount_count":10,"override_allowed":false}`,
	}
	want := "{\n  \"definitions\": [\n    " + strings.Join(seed, ",\n    ") + "\n  ],\n  \"overrides\": [],\n  \"note\": " + jsonString(wire.LimitsNote) + "\n}\n"
	if string(got) != want {
		t.Fatalf("GET governance/limits\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(wire.LimitsNote, "next sync") || strings.Contains(wire.LimitsNote, "NEXT governance reload") {
		t.Fatalf("the note does not say overrides apply at the next sync: %q", wire.LimitsNote)
	}
	golden(t, "limits_seed_capture", got)
}

// TestLimitsGolden: the six limits of seed 002 with overrides written
// through the API, as the admin and as a delegated admin (overrides of its
// subtree only) see the document.
func TestLimitsGolden(t *testing.T) {
	f := newFixture(t, overridesConfig)
	f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "acme_month", Node: "org:acme", AmountUSD: usdPtr("2500")}, nil)
	f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "team_daily_requests", Node: "org:acme/team:search", Amount: ptr(int64(30000))}, nil)
	f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "team_daily_requests", Node: "org:acme/team:ml", Amount: ptr(int64(25000))}, nil)
	golden(t, "limits_overrides", f.must(http.StatusOK, "GET", Prefix+"governance/limits", adminToken, nil, nil))
	ml, _ := f.delegate("org:acme/team:ml")
	golden(t, "limits_delegated", f.must(http.StatusOK, "GET", Prefix+"governance/limits", ml, nil, nil))

	s := newFixture(t, seed002)
	golden(t, "limits_six_types", s.must(http.StatusOK, "GET", Prefix+"governance/limits", adminToken, nil, nil))
}

// lowerCeiling reloads overridesConfig with team_daily_requests' override
// ceiling lowered from 40000 to 28000.
func (f *fixture) lowerCeiling(t *testing.T) {
	t.Helper()
	src, err := os.ReadFile(overridesConfig)
	if err != nil {
		t.Fatal(err)
	}
	lowered := strings.Replace(string(src), "override: { allow: true, max_amount: 40000 }", "override: { allow: true, max_amount: 28000 }", 1)
	if lowered == string(src) {
		t.Fatal("the fixture config no longer has the ceiling this test lowers")
	}
	f.plan = compileFile(t, testkit.WriteFile(t, t.TempDir(), "lowered.yaml", []byte(lowered)))
	f.arm()
}

// TestLimitsDroppedOverride: a reload lowers a template's override ceiling
// under a stored override. The armed plan drops it and the gate enforces
// the template's amount, so governance/limits does not list it as if its
// amount applied: the note names it with the reason GET overrides gives,
// and the overrides still in force are listed as before.
func TestLimitsDroppedOverride(t *testing.T) {
	f := newFixture(t, overridesConfig)
	f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "acme_month", Node: "org:acme", AmountUSD: usdPtr("2500")}, nil)
	f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "team_daily_requests", Node: "org:acme/team:search", Amount: ptr(int64(30000))}, nil)
	f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "team_daily_requests", Node: "org:acme/team:ml", Amount: ptr(int64(25000))}, nil)

	f.lowerCeiling(t)

	var ovs OverrideList
	f.must(http.StatusOK, "GET", Prefix+"overrides?limit_id=team_daily_requests&node=org:acme/team:search", adminToken, nil, &ovs)
	if len(ovs.Overrides) != 1 || ovs.Overrides[0].State != StateDropped {
		t.Fatalf("GET overrides = %+v, want the search override dropped", ovs)
	}
	reason := ovs.Overrides[0].Reason

	got := f.must(http.StatusOK, "GET", Prefix+"governance/limits", adminToken, nil, nil)
	golden(t, "limits_dropped", got)
	var doc struct {
		Overrides []struct {
			LimitID, Node string
		}
		Note string
	}
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	for _, o := range doc.Overrides {
		if o.LimitID == "team_daily_requests" && o.Node == "org:acme/team:search" {
			t.Errorf("the dropped override is listed among the overrides: %s", got)
		}
	}
	if len(doc.Overrides) != 2 {
		t.Errorf("%d overrides listed, want the 2 in force: %s", len(doc.Overrides), got)
	}
	if !strings.HasPrefix(doc.Note, wire.LimitsNote+" ") || !strings.Contains(doc.Note, "team_daily_requests @ org:acme/team:search amount 30000 is dropped ("+reason+")") {
		t.Errorf("the note does not name the dropped override with its reason %q:\n%s", reason, doc.Note)
	}
}

// TestLimitsDelegatedSeesPinnedInItsChain: a delegated admin sees the
// limits pinned at its node, below it, at an ancestor (they bind its
// subtree too) and at __global, and every template, but not a limit pinned
// in another subtree, whose node and amount are another tenant's.
func TestLimitsDelegatedSeesPinnedInItsChain(t *testing.T) {
	src, err := os.ReadFile(overridesConfig)
	if err != nil {
		t.Fatal(err)
	}
	extra := `    - { id: acme_pinned, attach: { node: "org:acme" }, type: quota_requests, amount: 7, period: day }
    - { id: dev1_pinned, attach: { node: "org:acme/team:ml/user:dev1" }, type: quota_requests, amount: 8, period: day }
    - { id: search_pinned, attach: { node: "org:acme/team:search" }, type: quota_requests, amount: 9, period: day }
`
	path := filepath.Join(t.TempDir(), "pinned.yaml")
	if err := os.WriteFile(path, append(src, extra...), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, path)
	ids := func(token string) []string {
		var doc struct {
			Definitions []struct {
				LimitID string `json:"limit_id"`
			}
		}
		f.must(http.StatusOK, "GET", Prefix+"governance/limits", token, nil, &doc)
		var out []string
		for _, d := range doc.Definitions {
			out = append(out, d.LimitID)
		}
		return out
	}
	all := "acme_month acme_pinned dev1_pinned global_daily_requests global_rpm ml_daily search_pinned team_daily_requests team_monthly_tokens user_rpm"
	if got := strings.Join(ids(adminToken), " "); got != all {
		t.Errorf("admin sees %s\nwant %s", got, all)
	}
	ml, _ := f.delegate("org:acme/team:ml")
	want := "acme_month acme_pinned dev1_pinned global_daily_requests global_rpm ml_daily team_daily_requests team_monthly_tokens user_rpm"
	if got := strings.Join(ids(ml), " "); got != want {
		t.Errorf("org:acme/team:ml sees %s\nwant %s", got, want)
	}
	search, _ := f.delegate("org:acme/team:search")
	want = "acme_month acme_pinned global_daily_requests global_rpm search_pinned team_daily_requests team_monthly_tokens user_rpm"
	if got := strings.Join(ids(search), " "); got != want {
		t.Errorf("org:acme/team:search sees %s\nwant %s", got, want)
	}
}

// TestLimitsArmedOverrideNotListed: with the rollout tracked, an override
// the armed plan holds but not every live filter replica does is armed:
// GET overrides says how many replicas hold it, and governance/limits
// leaves it out of the list and names it in the note apart from a dropped
// one, while an override every replica holds is listed as before.
func TestLimitsArmedOverrideNotListed(t *testing.T) {
	f := newFixture(t, overridesConfig)
	held := map[string]int{}
	f.h = New(Deps{
		DB:         f.db,
		Armed:      f.armed.Load,
		Changed:    func() { f.arm() },
		AdminToken: adminToken,
		Now:        func() time.Time { return f.now },
		Rollout: func() Rollout {
			return Rollout{Live: 2, Window: 30 * time.Second, Holding: func(o govern.Override) int { return held[o.LimitID+"@"+o.Node] }}
		},
	})
	b := f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "acme_month", Node: "org:acme", AmountUSD: usdPtr("2500")}, nil)
	reason := "the accountant has armed it; 0 of 2 live gateway replicas hold it, and one that does not yet enforces it from its next sync (sync_interval, 1s by default) and checks traffic against the amount it held before until then"
	if !strings.Contains(string(b), `"state":"armed","reason":`+jsonString(reason)) {
		t.Errorf("PUT answer %s", b)
	}
	f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "team_daily_requests", Node: "org:acme/team:search", Amount: ptr(int64(30000))}, nil)
	f.must(http.StatusOK, "PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "team_daily_requests", Node: "org:acme/team:ml", Amount: ptr(int64(25000))}, nil)
	held["acme_month@org:acme"] = 1
	held["team_daily_requests@org:acme/team:ml"] = 2

	f.lowerCeiling(t)

	var ovs OverrideList
	f.must(http.StatusOK, "GET", Prefix+"overrides", adminToken, nil, &ovs)
	states := map[string]string{}
	for _, o := range ovs.Overrides {
		states[o.LimitID+"@"+o.Node] = o.State + ": " + o.Reason
	}
	want := map[string]string{
		"acme_month@org:acme":                      "armed: " + strings.Replace(reason, "0 of 2", "1 of 2", 1),
		"team_daily_requests@org:acme/team:ml":     "in_force: ",
		"team_daily_requests@org:acme/team:search": `dropped: override amount 30000 of limit "team_daily_requests" exceeds its ceiling 28000 (override.max_amount); raise the ceiling in the config first`,
	}
	for k, w := range want {
		if states[k] != w {
			t.Errorf("GET overrides: %s is %q, want %q", k, states[k], w)
		}
	}
	golden(t, "limits_dropped_and_armed", f.must(http.StatusOK, "GET", Prefix+"governance/limits", adminToken, nil, nil))
}
