package runtime

import (
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/govern"
)

func armedFromFile(t *testing.T, path string, rt govern.Runtime) *govern.Armed {
	t.Helper()
	f, err := configfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := govern.Compile(f.Governance)
	if err != nil {
		t.Fatal(err)
	}
	a, probs := p.Arm(rt)
	if len(probs) != 0 {
		t.Fatalf("arming %s: %v", path, probs)
	}
	return a
}

// TestOverrideRulesAgreeWithArm: an override PutOverride stores is one
// govern's Arm keeps, and one it refuses is one Arm drops, so nothing the
// API accepts is silently dropped when the accountant re-arms.
func TestOverrideRulesAgreeWithArm(t *testing.T) {
	db, _ := openTemp(t)
	rt := govern.Runtime{Nodes: []string{"org:beta", "org:beta/team:x"}}
	for _, n := range rt.Nodes {
		if _, err := db.CreateNode(ArmedPlan(armedFromFile(t, "testdata/overrides.yaml", govern.Runtime{})), n, admin(t0)); err != nil {
			t.Fatal(err)
		}
	}
	armed := armedFromFile(t, "testdata/overrides.yaml", rt)
	plan := ArmedPlan(armed)
	const usd = 1_000_000_000
	cases := []govern.Override{
		{LimitID: "acme_month", Node: "org:acme", Amount: 5000 * usd},
		{LimitID: "acme_month", Node: "org:acme", Amount: 5000*usd + 1},
		{LimitID: "acme_month", Node: "org:beta", Amount: 1},
		{LimitID: "acme_month", Node: "org:acme", Amount: 0},
		{LimitID: "acme_month", Node: "org:acme", Amount: -1},
		{LimitID: "acme_month", Node: "org:acme/team:ml", Amount: 1},
		{LimitID: "acme_month", Node: "org:zeta", Amount: 1},
		{LimitID: "acme_month", Node: govern.Global, Amount: 1},
		{LimitID: "ml_daily", Node: "org:acme/team:ml", Amount: 1},
		{LimitID: "user_rpm", Node: "org:acme/team:ml/user:dev1", Amount: 1},
		{LimitID: "global_rpm", Node: govern.Global, Amount: 1},
		{LimitID: "team_daily_requests", Node: "org:acme/team:ml", Amount: 40000},
		{LimitID: "team_daily_requests", Node: "org:acme/team:ml", Amount: 40001},
		{LimitID: "team_daily_requests", Node: "org:beta/team:x", Amount: 7},
		{LimitID: "team_daily_requests", Node: "org:acme", Amount: 7},
		{LimitID: "team_monthly_tokens", Node: "org:acme/team:ml", Amount: 7},
		{LimitID: "global_daily_requests", Node: govern.Global, Amount: 1 << 40},
		{LimitID: "global_daily_requests", Node: "org:acme", Amount: 1},
		{LimitID: "nope", Node: "org:acme", Amount: 1},
		{LimitID: "acme_month", Node: "org:acme/../org:beta", Amount: 1},
		{LimitID: "acme_month", Node: "org:Acme", Amount: 1},
	}
	for i, o := range cases {
		_, err := db.PutOverride(plan, o, admin(t1))
		_, probs := armed.Plan.Arm(govern.Runtime{Nodes: rt.Nodes, Overrides: []govern.Override{o}})
		kept := true
		for _, p := range probs {
			if strings.HasPrefix(p.Path, "runtime.overrides[") {
				kept = false
			}
		}
		if (err == nil) != kept {
			t.Errorf("step %d: %+v: PutOverride error %v, Arm keeps it: %v (%v)", i, o, err, kept, probs)
		}
		if check := CheckOverride(plan, o); (check == nil) != kept {
			t.Errorf("step %d: %+v: CheckOverride %v, Arm keeps it: %v", i, o, check, kept)
		}
		if err == nil {
			if _, err := db.DeleteOverride(o.LimitID, o.Node, admin(t1)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
