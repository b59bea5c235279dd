package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant"
	"github.com/tokentriage/tokentriage/accountant/accountanttest"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// TestCountersResetCredit: counters credit and counters reset against a
// running accountant that has folded a row into ml_daily.
func TestCountersResetCredit(t *testing.T) {
	now := time.Now().UTC()
	base := accountanttest.Serve(t, accountant.Options{ConfigPath: "testdata/seed004.yaml", DataDir: t.TempDir(), AdminToken: keysTestToken,
		InternalToken: "internal"})
	r := ledger.Row{RequestID: wire.NewRequestID([16]byte{1, 15: 0x40}), Start: now.Add(-time.Second), End: now, Node: "org:acme/team:ml/user:dev1",
		Endpoint: "/v1/chat/completions", Provider: "openai", Model: "gpt-4o", Served: "gpt-4o",
		Usage: ledger.Usage{Input: 1_000_000, Total: 1_000_000}, Status: 200, Decision: ledger.Admitted, Replica: "r1"}
	req, _ := http.NewRequest(http.MethodPost, base+syncwire.IngestPath, bytes.NewReader(ledgerlog.AppendRow(nil, &r)))
	req.Header.Set("Authorization", "Bearer internal")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("ingest: %v %v", err, resp)
	}
	t.Setenv("TT_ADMIN_TOKEN", keysTestToken)
	code, stdout, stderr := runKeys("counters", "credit", "--limit", "ml_daily", "--node", "org:acme/team:ml", "--amount", "0.5", "--accountant", base)
	if code != 0 || !strings.HasPrefix(stdout, "credited ml_daily at org:acme/team:ml (day from ") || !strings.Contains(stdout, "): $2.5 before, $0.5 taken off, $2 now\n") ||
		!strings.Contains(stderr, "audited") {
		t.Fatalf("counters credit: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = runKeys("counters", "reset", "--limit", "ml_daily", "--node", "org:acme/team:ml", "--accountant", base)
	if code != 0 || !strings.Contains(stdout, "): $2 before, $2 taken off, $0 now\n") {
		t.Fatalf("counters reset: exit %d\n%s", code, stdout)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"counters", "reset", "--limit", "ml_daily"}, 2, "tokentriage counters reset: --limit ID and --node NODE are required\n"},
		{[]string{"counters", "credit", "--limit", "ml_daily", "--node", "org:acme/team:ml", "--accountant", base}, 2,
			"tokentriage counters credit: --amount is required: the dollars (budget_usd) or the count (quota) to give back\n"},
		{[]string{"counters", "reset", "--limit", "user_rpm", "--node", "org:acme/team:ml/user:dev1", "--accountant", base}, 1,
			`tokentriage counters reset: limit "user_rpm" is rpm: only the counters of budget_usd, quota_tokens and quota_requests limits are reset or credited (a rate window refills on its own) (HTTP 400 invalid_request)` + "\n"},
	} {
		code, _, stderr := runKeys(c.args...)
		if code != c.code || stderr != c.msg {
			t.Errorf("%v: exit %d %q\nwant %d %q", c.args, code, stderr, c.code, c.msg)
		}
	}
}
