package govern_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/govern"
)

// factsLimits template at every level, per model, at a key and pinned,
// with overrides allowed on the spend and quota limits.
const factsLimits = tenancy + `  limits:
    - { id: org_budget, attach: { level: org }, type: budget_usd, amount_usd: 100, period: month, override: { allow: true, max_amount_usd: 5000 } }
    - { id: team_tokens, attach: { level: team }, type: quota_tokens, amount: 1000, period: day, override: { allow: true, max_amount: 5000 } }
    - { id: team_model, attach: { level: team }, type: budget_usd, amount_usd: 5, period: day, match: { model: "gpt-*" }, override: { allow: true } }
    - { id: user_rpm, attach: { level: user }, type: rpm, amount: 60, period: 1m }
    - { id: key_budget, attach: { level: key }, type: budget_usd, amount_usd: 1, period: day, override: { allow: true } }
    - { id: global_req, attach: { node: "__global" }, type: quota_requests, amount: 100, period: day, override: { allow: true } }
    - { id: ml_req, attach: { node: "org:acme/team:ml" }, type: quota_requests, amount: 50, period: day, override: { allow: true } }
`

// TestResolveFactsMatchesArm: resolving a chain with the runtime plane's
// facts of its nodes (what the filter looks up per request) gives what
// resolving against the plan armed with the whole runtime plane gives, on
// random runtime planes (runtime nodes, overrides at config nodes, runtime
// nodes, key leaves and __global, some out of their ceilings).
func TestResolveFactsMatchesArm(t *testing.T) {
	plan := mustPlan(t, factsLimits)
	bare, _ := plan.Arm(govern.Runtime{})
	rng := rand.New(rand.NewSource(18))
	orgs := []string{"org:acme", "org:beta", "org:gamma"}
	for round := 0; round < 300; round++ {
		var rt govern.Runtime
		var owners []string
		for _, o := range orgs {
			for ti := 0; ti < 3; ti++ {
				team := fmt.Sprintf("%s/team:t%d", o, ti)
				user := team + "/user:u" + fmt.Sprint(ti)
				owners = append(owners, team, user)
				if o != "org:acme" && rng.Intn(2) == 0 {
					rt.Nodes = append(rt.Nodes, team)
					if rng.Intn(2) == 0 {
						rt.Nodes = append(rt.Nodes, user)
					}
				}
			}
		}
		owners = append(owners, "org:acme/team:ml/user:dev1", "org:acme/team:search")
		limits := []string{"org_budget", "team_tokens", "team_model", "key_budget", "global_req", "ml_req", "user_rpm"}
		seen := map[[2]string]bool{}
		for i := rng.Intn(12); i > 0; i-- {
			owner := owners[rng.Intn(len(owners))]
			chain := govern.Chain(owner, kid)
			node := chain[rng.Intn(len(chain))]
			l := limits[rng.Intn(len(limits))]
			if seen[[2]string{l, node}] {
				continue
			}
			seen[[2]string{l, node}] = true
			rt.Overrides = append(rt.Overrides, govern.Override{LimitID: l, Node: node, Amount: int64(rng.Intn(8000)) * 1_000_000})
		}
		armed, _ := plan.Arm(rt)
		facts := map[string]*govern.NodeFacts{}
		fact := func(n string) *govern.NodeFacts {
			if facts[n] == nil {
				facts[n] = &govern.NodeFacts{}
			}
			return facts[n]
		}
		for _, n := range rt.Nodes {
			for end := len(n); end > 0; end = strings.LastIndexByte(n[:end], '/') {
				fact(n[:end]).Tree = true
			}
		}
		for _, o := range rt.Overrides {
			f := fact(o.Node)
			f.Overrides = append(f.Overrides, govern.Override{LimitID: o.LimitID, Amount: o.Amount})
		}
		for _, owner := range owners {
			chain := govern.Chain(owner, kid)
			cf := make([]govern.NodeFacts, len(chain))
			for i, n := range chain {
				if f := facts[n]; f != nil {
					cf[i] = *f
				}
			}
			for _, d := range []govern.Dims{{}, {Model: "gpt-4o"}, {Model: "o3"}} {
				for _, g := range []govern.Gate{govern.Gate1, govern.Gate2} {
					want := armed.Resolve(chain, d, g, nil)
					got := bare.ResolveFacts(chain, cf, d, g, nil)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("round %d, %s, %+v, gate %v:\nfacts %+v\nwant %+v", round, owner, d, g, got, want)
					}
				}
				if got, want := bare.ResolveAllFacts(chain, cf, d, nil), armed.ResolveAll(chain, d, nil); !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d, %s, %+v, all:\nfacts %+v\nwant %+v", round, owner, d, got, want)
				}
			}
		}
	}
}
