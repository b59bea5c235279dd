package core

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/wire"
)

func armedPlan(t *testing.T, limits string) *govern.Armed {
	t.Helper()
	f, err := configfile.Parse("plan.yaml", []byte("governance:\n  enabled: true\n  tenants:\n    - org: acme\n      teams: [ml]\n  limits:\n"+limits))
	if err != nil {
		t.Fatal(err)
	}
	p, err := govern.Compile(f.Governance)
	if err != nil {
		t.Fatal(err)
	}
	a, probs := p.Arm(govern.Runtime{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return a
}

func snapshotText(t *testing.T, c *Core) string {
	t.Helper()
	s, err := c.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range s.Entries {
		fmt.Fprintf(&b, "%s %s %d\n", e.ID, e.PeriodStart.Format(time.RFC3339), e.Value)
	}
	return b.String()
}

// TestNewZoneAndLongerPeriodBackfilled: a reload that adds a period in a
// time zone the aggregates have not kept, one that reaches back further
// than they do (a year), and an hour (whose quarter-hour aggregates are
// kept only for a plan with one) is told so (NeedsHistory); once the
// ledger's rows are handed to Backfill, the re-derived counters are the
// ones a core armed with the plan from the start holds.
func TestNewZoneAndLongerPeriodBackfilled(t *testing.T) {
	now := time.Date(2026, 8, 10, 21, 30, 0, 0, time.UTC)
	var rows []ledger.Row
	for i := 0; i < 40; i++ {
		end := now.Add(-time.Duration(i) * 97 * time.Hour / 10) // every 9.7 hours, back into June
		var id [16]byte
		id[0], id[1] = byte(i), 7
		rows = append(rows, ledger.Row{RequestID: wire.NewRequestID(id), Start: end.Add(-time.Second), End: end, Status: 200,
			Decision: ledger.Admitted, Node: "org:acme/team:ml", Endpoint: "/v1/chat/completions", Model: "gpt-4o-mini",
			Usage: ledger.Usage{Input: int64(i + 1), Output: 1, Total: int64(i + 2)}})
	}
	utcOnly := armedPlan(t, "    - { id: monthly, attach: { level: team }, type: quota_requests, amount: 100, period: month }\n")
	wider := armedPlan(t, `    - { id: monthly, attach: { level: team }, type: quota_requests, amount: 100, period: month }
    - { id: berlin_day, attach: { level: team }, type: quota_tokens, amount: 100, period: day, timezone: Europe/Berlin }
    - { id: yearly, attach: { level: team }, type: quota_requests, amount: 100, period: year }
    - { id: week_ny, attach: { level: team }, type: quota_requests, amount: 100, period: week, timezone: America/New_York }
    - { id: hourly, attach: { level: team }, type: quota_requests, amount: 100, period: hour }
`)
	// The reference: armed with the wider plan before any row.
	ref := New(Options{})
	if _, err := ref.Arm(now, wider); err != nil {
		t.Fatal(err)
	}
	ref.Restore(now, append([]ledger.Row(nil), rows...))
	want := snapshotText(t, ref)

	c := New(Options{})
	if _, err := c.Arm(now, utcOnly); err != nil {
		t.Fatal(err)
	}
	c.Restore(now, append([]ledger.Row(nil), rows...))
	if c.NeedsHistory() {
		t.Fatal("a core that has every row of its plan says it needs history")
	}
	if _, err := c.Arm(now, wider); err != nil {
		t.Fatal(err)
	}
	if !c.NeedsHistory() {
		t.Fatal("a plan with a new zone, a year and an hour: NeedsHistory is false")
	}
	c.Backfill(rows[:20], false)
	c.Backfill(rows[20:], true)
	if c.NeedsHistory() {
		t.Fatal("NeedsHistory after Backfill")
	}
	if _, err := c.Arm(now, wider); err != nil {
		t.Fatal(err)
	}
	if got := snapshotText(t, c); got != want {
		t.Errorf("after the backfill:\n%s\nwant (armed from the start):\n%s", got, want)
	}
	if !strings.Contains(want, "yearly") || !strings.Contains(want, "berlin_day") || !strings.Contains(want, "week_ny") || !strings.Contains(want, "hourly") {
		t.Errorf("the reference lacks a limit:\n%s", want)
	}
}
