package govern_test

import (
	"testing"

	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// tenancy is seed 004's example tree: org acme, teams ml and search, users
// dev1 and dev2 under ml.
const tenancy = `governance:
  enabled: true
  tenants:
    - org: acme
      teams: [ml, search]
      users: { ml: [dev1, dev2] }
`

// seed004Walk is seed 004's four limits with acme_month lowered to $50,
// the variant its resolution walk uses.
const seed004Walk = tenancy + `  limits:
    - { id: acme_month, attach: { level: org }, type: budget_usd, amount_usd: 50, period: month, override: { allow: true, max_amount_usd: 5000 } }
    - { id: ml_daily, attach: { node: "org:acme/team:ml" }, type: budget_usd, amount_usd: 200, period: day }
    - { id: user_rpm, attach: { level: user }, type: rpm, amount: 120, period: 1m }
    - { id: global_rpm, attach: { node: "__global" }, type: rpm, amount: 5000, period: 1m }
`

// sixLimits is seed 002's six limits over the same tree.
const sixLimits = tenancy + `  limits:
    - { id: org_monthly_budget, attach: { level: org }, type: budget_usd, amount_usd: 1000, period: month, override: { allow: true, max_amount_usd: 5000 } }
    - { id: team_monthly_tokens, attach: { level: team }, type: quota_tokens, amount: 50000000, period: month }
    - { id: team_daily_requests, attach: { level: team }, type: quota_requests, amount: 20000, period: day }
    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 300, period: 1m, posture: { mode: shadow } }
    - { id: team_tpm, attach: { level: team }, type: tpm, amount: 200000, period: 1m, match: { model: "gpt-*" } }
    - { id: user_concurrency, attach: { level: user }, type: concurrency, amount: 8 }
`

const dev1 = "org:acme/team:ml/user:dev1"
const kid = "vk_FEKZdMs2UQRi"

func mustPlan(tb testing.TB, yaml string) *govern.Plan {
	tb.Helper()
	f, err := configfile.Parse("test.yaml", []byte(yaml))
	if err != nil {
		tb.Fatalf("decode: %v", err)
	}
	p, err := govern.Compile(f.Governance)
	if err != nil {
		tb.Fatalf("compile: %v", err)
	}
	return p
}

func mustArm(tb testing.TB, yaml string, rt govern.Runtime) *govern.Armed {
	tb.Helper()
	a, probs := mustPlan(tb, yaml).Arm(rt)
	if len(probs) > 0 {
		tb.Fatalf("arm: %v", govern.Problems(probs))
	}
	return a
}
