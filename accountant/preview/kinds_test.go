package preview

import (
	"bytes"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestReplayReadsEveryRowKind: a summary counts as its requests and their
// usage, a start counts nothing, and a late end counts its own figures in
// place of the estimate its close counted: observed tokens and requests
// are what was served, once.
func TestReplayReadsEveryRowKind(t *testing.T) {
	base := ledger.Row{Start: at.Add(-time.Hour), End: at.Add(-time.Hour), KID: "vk_FEKZdMs2UQRi", Node: "org:acme/team:ml/user:dev1",
		Endpoint: "/v1/chat/completions", Provider: "openai", Model: "gpt-4o-mini", Status: 200, Decision: ledger.Admitted}
	served := base
	served.RequestID, served.Usage = "tt_i3f2naenug5aanctu6pcjrofcy", ledger.Usage{Input: 40, Output: 20, Total: 60}
	summary := base
	summary.RequestID, summary.Kind, summary.Count, summary.Usage = "tt_aaaaaaaaaaaaaaaaaaaaaaaaaa", ledger.KindSummary, 100, ledger.Usage{Input: 1000, Total: 1000}
	start := base
	start.RequestID, start.Kind, start.Status, start.Usage = "tt_e6gbpncee32dbu7y5jpsfr4ax4", ledger.KindStart, 0, ledger.Usage{Input: 7, Output: 16384}
	closed := start
	closed.Kind, closed.End = ledger.KindClose, at.Add(-50*time.Minute)
	closed.Cost = &ledger.Cost{Nanos: 9831000, Estimated: true}
	late := base
	late.RequestID, late.End, late.Usage = start.RequestID, at.Add(-40*time.Minute), ledger.Usage{Input: 7, Output: 23, Total: 30}
	late.Replaced = &ledger.Replaced{End: closed.End, Usage: closed.Usage, Cost: closed.Cost}
	path := testkit.WriteFile(t, t.TempDir(), "decisions.jsonl", ledger.AppendJSONL(nil, []ledger.Row{served, summary, start, closed, late}))
	var out bytes.Buffer
	if err := Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: path, At: at}); err != nil {
		t.Fatal(err)
	}
	reportHas(t, out.String(),
		"  [quota_tokens] team_monthly_tokens @ org:acme/team:ml  observed 1090 / ceiling 50000000",
		"  [quota_requests] team_daily_requests @ org:acme/team:ml  observed 102 / ceiling 20000")
}
