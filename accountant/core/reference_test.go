package core

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

const referenceConfig = testkit.AcmeTenants + `  limits:
    - id: budget
      attach: { level: org }
      type: budget_usd
      amount_usd: 1
      period: month
      posture: { thresholds: [0.1, 0.5] }
    - id: tokens_week
      attach: { level: team }
      type: quota_tokens
      amount: 100000
      period: week
    - id: gpt_day
      attach: { level: team }
      type: quota_requests
      amount: 100
      period: day
      match: { model: "gpt-*" }
    - id: user_day
      attach: { level: user }
      type: quota_requests
      amount: 10
      period: day
    - id: team_reserve
      attach: { level: team }
      type: budget_usd
      amount_usd: 0.01
      period: day
      reserve: true
      posture: { thresholds: [0.5] }
    - id: rpm
      attach: { level: team }
      type: rpm
      amount: 10
      period: 1m
`

// TestAgainstReference drives a Core with random batches — duplicates,
// retried batches, refused rows, unknown models, rows spread over several
// days, restarts that replay the recorded rows, re-arms and ticks, rows
// from several filter replicas — and checks every snapshot against an
// obvious reference: resolve each distinct forwarded row with govern and
// sum it into the current periods (and, for a budget in reserve mode, into
// its replica's companion).
func TestAgainstReference(t *testing.T) {
	g, err := parseGovernanceYAML(referenceConfig)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := govern.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	nodes := []string{"", "org:acme", "org:acme/team:ml", "org:acme/team:search", "org:acme/team:ml/user:dev1", "org:acme/team:ml/user:dev2", "org:beta/team:x"}
	models := []string{"gpt-4o-mini", "gpt-4o", "claude-3-5-haiku-latest", "unknown-model"}
	replicas := []string{"", "r1", "r2", "envoy-7f9c"}
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		armed, _ := plan.Arm(govern.Runtime{})
		c := New(Options{})
		now := time.Date(2026, 8, 30, 20, 0, 0, 0, time.UTC) // a Sunday near a month end
		c.Arm(now, armed)
		var recorded []ledger.Row
		var sent []ledger.Row
		id := 0
		for step := range 60 {
			now = now.Add(time.Duration(r.IntN(90)) * time.Minute)
			switch op := r.IntN(10); {
			case op == 0: // restart: replay what was recorded
				c = New(Options{})
				c.Arm(now, armed)
				from := c.ReplayFrom(now)
				var rows []ledger.Row
				for _, row := range recorded {
					if !row.End.Before(from) {
						rows = append(rows, row)
					}
				}
				c.Restore(now, rows)
			case op == 1: // re-arm, sometimes with a runtime node
				rt := govern.Runtime{}
				if r.IntN(2) == 0 {
					rt.Nodes = []string{"org:beta/team:x"}
				}
				armed, _ = plan.Arm(rt)
				c.Arm(now, armed)
			case op == 2:
				c.Tick(now)
			default:
				var batch []ledger.Row
				for range 1 + r.IntN(20) {
					if len(sent) > 0 && r.IntN(4) == 0 { // a retry of an earlier row
						batch = append(batch, sent[r.IntN(len(sent))])
						continue
					}
					id++
					end := now.Add(-time.Duration(r.IntN(36*60)) * time.Minute)
					row := ledger.Row{
						RequestID: fmt.Sprintf("tt_%026s", strings.Repeat("a", 26-len(b32(id)))+b32(id)),
						Start:     end.Add(-time.Second), End: end, Node: nodes[r.IntN(len(nodes))],
						Model: models[r.IntN(len(models))], Provider: "openai", Endpoint: "/v1/chat/completions",
						Usage:    ledger.Usage{Input: int64(r.IntN(2000)), Output: int64(r.IntN(500))},
						Decision: []ledger.Decision{ledger.Admitted, ledger.Admitted, ledger.Refused, ledger.ShadowRefused}[r.IntN(4)],
						Replica:  replicas[r.IntN(len(replicas))],
					}
					sent = append(sent, row)
					batch = append(batch, row)
				}
				in := append([]ledger.Row(nil), batch...)
				res := c.Ingest(now, in, uint64(step+1))
				for i, o := range res.Outcomes {
					if o == Accepted {
						recorded = append(recorded, in[i])
					}
				}
			}
			snap, err := c.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, e := range snap.Entries {
				got[e.ID+"@"+e.PeriodStart.Format(time.RFC3339)] = e.Value
			}
			want := reference(armed, recorded, c.now)
			if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
				t.Fatalf("seed %d step %d: snapshot differs from the reference\n got %v\nwant %v", seed, step, sorted(got), sorted(want))
			}
		}
	}
}

// reference folds every recorded forwarded row the slow, obvious way.
func reference(armed *govern.Armed, rows []ledger.Row, now time.Time) map[string]int64 {
	cat := New(Options{}).opts.Pricing
	out := map[string]int64{}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.RequestID] || r.Decision == ledger.Refused {
			continue
		}
		seen[r.RequestID] = true
		cost := cat.PriceRow(&r)
		for _, in := range armed.Resolve(govern.Chain(r.Node, r.KID), govern.Dims{Model: r.Model, Provider: r.Provider, Endpoint: r.Endpoint}, govern.Gate2, nil) {
			l := in.Limit
			if l.Type.Class() != govern.LedgerSettled {
				continue
			}
			u := l.Period.Calendar
			start := calendar.Start(u, r.End)
			if !start.Equal(calendar.Start(u, now)) {
				continue
			}
			var v int64
			switch l.Type {
			case govern.BudgetUSD:
				if cost.Unpriced {
					// The companion counter of UNPRICED rows.
					out[in.ID+syncwire.UnpricedSuffix+"@"+start.Format(time.RFC3339)]++
					continue
				}
				if cost.Nanos == 0 {
					continue
				}
				v = cost.Nanos
				if l.Reserve && r.Replica != "" {
					// The companion counter of the row's replica.
					out[in.ID+syncwire.ReplicaSuffix+r.Replica+"@"+start.Format(time.RFC3339)] += v
				}
			case govern.QuotaTokens:
				v = r.Usage.Input + r.Usage.Output
				if v == 0 {
					continue
				}
			case govern.QuotaRequests:
				v = 1
			}
			out[in.ID+"@"+start.Format(time.RFC3339)] += v
		}
	}
	return out
}

func sorted(m map[string]int64) []string {
	var s []string
	for k, v := range m {
		s = append(s, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(s)
	return s
}

func b32(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var b []byte
	for n > 0 {
		b = append([]byte{alphabet[n%32]}, b...)
		n /= 32
	}
	return string(b)
}
