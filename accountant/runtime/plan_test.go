package runtime

import (
	"github.com/tokentriage/tokentriage/shared/govern"
)

// fakePlan is a Plan built by hand: the seed 004 tenancy example and a few
// limits in seed 002's shapes.
type fakePlan struct {
	nodes  map[string]bool
	limits map[string]*govern.Limit
}

func (p fakePlan) ConfigNode(id string) bool     { return p.nodes[id] }
func (p fakePlan) TreeNode(id string) bool       { return p.nodes[id] }
func (p fakePlan) Limit(id string) *govern.Limit { return p.limits[id] }

var _ Plan = fakePlan{}

const usd = 1_000_000_000

func seedPlan() fakePlan {
	p := fakePlan{nodes: map[string]bool{}, limits: map[string]*govern.Limit{}}
	for _, n := range []string{"org:acme", "org:acme/team:ml", "org:acme/team:search",
		"org:acme/team:ml/user:dev1", "org:acme/team:ml/user:dev2"} {
		p.nodes[n] = true
	}
	for _, l := range []*govern.Limit{
		{ID: "org_monthly_budget", Type: govern.BudgetUSD, Level: "org", Amount: 1000 * usd, OverrideAllow: true, OverrideMax: 5000 * usd},
		{ID: "ml_daily", Type: govern.BudgetUSD, Node: "org:acme/team:ml", Amount: 200 * usd, OverrideAllow: true, OverrideMax: -1},
		{ID: "team_monthly_tokens", Type: govern.QuotaTokens, Level: "team", Amount: 50_000_000, OverrideMax: -1},
		{ID: "team_daily_requests", Type: govern.QuotaRequests, Level: "team", Amount: 20000, OverrideAllow: true, OverrideMax: 40000},
		{ID: "global_requests", Type: govern.QuotaRequests, Node: govern.Global, Amount: 1_000_000, OverrideAllow: true, OverrideMax: -1},
		{ID: "team_rpm", Type: govern.RPM, Level: "team", Amount: 300, OverrideAllow: true, OverrideMax: -1},
		{ID: "team_tpm", Type: govern.TPM, Level: "team", Amount: 200000, OverrideMax: -1},
		{ID: "user_concurrency", Type: govern.Concurrency, Level: "user", Amount: 8, OverrideMax: -1},
	} {
		p.limits[l.ID] = l
	}
	return p
}
