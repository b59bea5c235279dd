package govern_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/govern"
)

func problemLines(ps []govern.Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestArmOverrides: each override is validated on its own; the invalid ones
// are dropped with their reason and the rest kept (seed 004).
func TestArmOverrides(t *testing.T) {
	p := mustPlan(t, seed004Walk+`    - { id: team_tokens, attach: { level: team }, type: quota_tokens, amount: 1000, period: day, override: { allow: true } }
    - { id: team_requests, attach: { level: team }, type: quota_requests, amount: 10, period: day }
`)
	a, probs := p.Arm(govern.Runtime{Overrides: []govern.Override{
		{LimitID: "acme_month", Node: "org:acme", Amount: 2000 * usd},           // kept
		{LimitID: "acme_month", Node: "org:acme", Amount: 3000 * usd},           // second for one instance
		{LimitID: "acme_month", Node: "org:acme", Amount: 6000 * usd},           // also a duplicate
		{LimitID: "user_rpm", Node: dev1, Amount: 500},                          // rate type
		{LimitID: "team_tokens", Node: "org:acme/team:ml", Amount: 0},           // not positive
		{LimitID: "team_tokens", Node: "org:acme/team:search", Amount: 1 << 40}, // no ceiling: kept
		{LimitID: "team_tokens", Node: "org:acme", Amount: 5},                   // not an instance
		{LimitID: "team_requests", Node: "org:acme/team:ml", Amount: 5},         // allow false
		{LimitID: "ml_daily", Node: "org:acme/team:ml", Amount: 5},              // allow false
		{LimitID: "nope", Node: "org:acme", Amount: 5},                          // unknown limit
		{LimitID: "team_tokens", Node: "org:acme/team:ML", Amount: 5},           // bad node id
		{LimitID: "team_tokens", Node: "org:acme/team:ml", Amount: 2000},        // kept
	}})
	want := `runtime.overrides[1]: limit "acme_month" at node "org:acme": a second override for this instance; the first (runtime.overrides[0]) is kept
runtime.overrides[2]: limit "acme_month" at node "org:acme": amount_usd 6000 is above the ceiling override.max_amount_usd 5000; the override is dropped
runtime.overrides[3]: limit type "rpm" does not support per-node overrides (its cap is enforced by a per-window/gauge store that cannot honor a per-node amount); overrides apply only to spend/quota limits (budget_usd, quota_tokens, quota_requests)
runtime.overrides[4]: limit "team_tokens" at node "org:acme/team:ml": amount 0 must be positive (an override of zero or less would switch the cap off rather than lower it); the override is dropped
runtime.overrides[6]: limit "team_tokens" at node "org:acme": not an instance of the limit (it instantiates at every team node); the override is dropped
runtime.overrides[7]: limit "team_requests" at node "org:acme/team:ml": the limit does not allow per-node overrides (set override: { allow: true } on it); the override is dropped
runtime.overrides[8]: limit "ml_daily" at node "org:acme/team:ml": the limit does not allow per-node overrides (set override: { allow: true } on it); the override is dropped
runtime.overrides[9]: limit "nope" is not in the plan; the override is dropped
runtime.overrides[10]: limit "team_tokens" at node "org:acme/team:ML": node id "org:acme/team:ML": segment "team:ML": id "ML" is out of charset (lowercase letters, digits, - and _); the override is dropped
`
	if got := problemLines(probs); got != want {
		t.Errorf("problems:\n%s\nwant:\n%s", got, want)
	}
	if n := len(a.Overrides()); n != 3 {
		t.Errorf("%d overrides kept, want 3: %+v", n, a.Overrides())
	}
	got := show(a.Resolve(govern.Chain(dev1, kid), govern.Dims{}, govern.Gate2, nil))
	if want := fmt.Sprintf("ml_daily@org:acme/team:ml=%d team_requests@org:acme/team:ml=10 team_tokens@org:acme/team:ml=2000(override) acme_month@org:acme=%d(override)", 200*usd, 2000*usd); got != want {
		t.Errorf("resolve:\n got  %s\n want %s", got, want)
	}
	if v, ok := a.Override("team_tokens", "org:acme/team:search"); !ok || v != 1<<40 {
		t.Errorf("Override(team_tokens, search) = %d, %t", v, ok)
	}
	if _, ok := a.Override("team_tokens", "org:acme"); ok {
		t.Error("a dropped override is reported")
	}
	// An override replaces the amount and nothing else: same counter.
	before := mustArm(t, seed004Walk, govern.Runtime{}).Resolve(govern.Chain(dev1, kid), govern.Dims{}, govern.Gate2, nil)
	after := a.Resolve(govern.Chain(dev1, kid), govern.Dims{}, govern.Gate2, nil)
	if before[len(before)-1].ID != after[len(after)-1].ID {
		t.Errorf("an override changed the identity: %q vs %q", before[len(before)-1].ID, after[len(after)-1].ID)
	}
}

// TestArmRuntimeNodes: API-created nodes join the tree and pick up the
// config's templates; a collision keeps the config node; bad ids are
// skipped with their reason.
func TestArmRuntimeNodes(t *testing.T) {
	p := mustPlan(t, seed004Walk)
	a, probs := p.Arm(govern.Runtime{
		Nodes: []string{"org:acme/team:ml/user:dev3", "org:acme", "org:Evil", "org:beta/team:x", "org:acme/team:ml/user:dev3", "__global"},
		Overrides: []govern.Override{
			{LimitID: "acme_month", Node: "org:beta", Amount: 10 * usd}, // an instance through a runtime node
		},
	})
	want := `runtime.nodes[1]: node "org:acme" is also declared in governance.tenants; the config node is kept and the runtime node skipped
runtime.nodes[2]: node id "org:Evil": segment "org:Evil": id "Evil" is out of charset (lowercase letters, digits, - and _); the runtime node is skipped
runtime.nodes[5]: node id "__global" is the synthetic root, not a node (it cannot be declared, created or own a key); the runtime node is skipped
`
	if got := problemLines(probs); got != want {
		t.Errorf("problems:\n%s\nwant:\n%s", got, want)
	}
	if got := strings.Join(a.Nodes(), " "); got != "org:acme org:acme/team:ml org:acme/team:ml/user:dev1 org:acme/team:ml/user:dev2 org:acme/team:ml/user:dev3 org:acme/team:search org:beta org:beta/team:x" {
		t.Errorf("nodes: %s", got)
	}
	if got := show(a.Resolve(govern.Chain("org:acme/team:ml/user:dev3", kid), govern.Dims{}, govern.Gate1, nil)); got != "user_rpm@org:acme/team:ml/user:dev3=120 global_rpm@__global=5000" {
		t.Errorf("dev3 gate1: %s", got)
	}
	if got := show(a.Resolve(govern.Chain("org:beta/team:x", kid), govern.Dims{}, govern.Gate2, nil)); got != fmt.Sprintf("acme_month@org:beta=%d(override)", 10*usd) {
		t.Errorf("beta gate2: %s", got)
	}
	if got := strings.Join(a.Instances(p.Limit("acme_month")), " "); got != "org:acme org:beta" {
		t.Errorf("acme_month instances over the merged tree: %s", got)
	}
	if got := strings.Join(p.Instances(p.Limit("acme_month")), " "); got != "org:acme" {
		t.Errorf("the plan's own tree changed: %s", got)
	}
	if !a.HasNode("org:beta") || p.HasNode("org:beta") {
		t.Error("HasNode")
	}
}

// TestArmDoesNotShareState: two arms of one plan are independent.
func TestArmDoesNotShareState(t *testing.T) {
	p := mustPlan(t, seed004Walk)
	a1, _ := p.Arm(govern.Runtime{Nodes: []string{"org:zeta"}})
	a2, _ := p.Arm(govern.Runtime{})
	if !a1.HasNode("org:zeta") || a2.HasNode("org:zeta") {
		t.Error("runtime nodes leaked between arms")
	}
}
