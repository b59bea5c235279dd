package preview

import (
	"bytes"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestReplayPeriods: preview counts a day in Berlin from its midnight
// (22:00 UTC the day before, in August), a quarter in New York from 1 July
// there, and a rolling window of 3 days by its day buckets, the oldest by
// the share of today still to run (seed 003's sliding rule).
func TestReplayPeriods(t *testing.T) {
	dir := t.TempDir()
	cfg := testkit.WriteFile(t, dir, "periods.yaml", []byte(testkit.Dev1Tenants+`  limits:
    - { id: berlin_day, attach: { level: team }, type: quota_requests, amount: 100, period: day, timezone: Europe/Berlin }
    - { id: ny_quarter, attach: { level: team }, type: quota_requests, amount: 1000, period: quarter, timezone: America/New_York }
    - { id: rolling, attach: { level: team }, type: quota_requests, amount: 100, period: 3d }
`))
	row := func(id string, end time.Time) ledger.Row {
		return ledger.Row{RequestID: id, Start: end, End: end, KID: "vk_FEKZdMs2UQRi", Node: "org:acme/team:ml/user:dev1",
			Endpoint: "/v1/chat/completions", Provider: "openai", Model: "gpt-4o-mini", Status: 200, Decision: ledger.Admitted,
			Usage: ledger.Usage{Input: 10, Output: 10, Total: 20}}
	}
	// at is 12:30 UTC on 10 August: 11.5 of the day's 24 hours to run.
	before := row("tt_i3f2naenug5aanctu6pcjrofcy", time.Date(2026, 8, 9, 21, 30, 0, 0, time.UTC)) // 23:30 on 9 Aug in Berlin
	after := row("tt_aaaaaaaaaaaaaaaaaaaaaaaaaa", time.Date(2026, 8, 9, 22, 30, 0, 0, time.UTC))  // 00:30 on 10 Aug in Berlin
	oldest := row("tt_e6gbpncee32dbu7y5jpsfr4ax4", time.Date(2026, 8, 7, 6, 0, 0, 0, time.UTC))   // the window's oldest bucket
	oldest.Kind, oldest.Count = ledger.KindSummary, 48
	gone := row("tt_baaaaaaaaaaaaaaaaaaaaaaaaa", time.Date(2026, 8, 6, 12, 0, 0, 0, time.UTC)) // before the window
	path := testkit.WriteFile(t, dir, "decisions.jsonl", ledger.AppendJSONL(nil, []ledger.Row{before, after, oldest, gone}))
	var out bytes.Buffer
	if err := Run(&out, Options{ConfigPath: cfg, LogPath: path, At: at}); err != nil {
		t.Fatal(err)
	}
	reportHas(t, out.String(),
		"[quota_requests] berlin_day @ org:acme/team:ml  observed 1 / ceiling 100",
		"[quota_requests] ny_quarter @ org:acme/team:ml  observed 51 / ceiling 1000",
		// 1 + 1 in the full buckets, 48 × 11.5/24 = 23 of the oldest.
		"[quota_requests] rolling @ org:acme/team:ml  observed 25 / ceiling 100")
}
