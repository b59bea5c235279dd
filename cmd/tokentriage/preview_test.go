package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant"
	"github.com/tokentriage/tokentriage/accountant/accountanttest"
)

const (
	previewConfig = "../../accountant/preview/testdata/sixlimits.yaml"
	previewLedger = "../../accountant/preview/testdata/sandbox.jsonl"
	previewAt     = "2026-08-10T12:30:00Z"
)

// previewAccountant runs an accountant over the ledger the preview
// replays, at the preview's instant.
func previewAccountant(t *testing.T) string {
	return ledgerAccountant(t, previewLedger, time.Date(2026, 8, 10, 12, 30, 0, 0, time.UTC))
}

// ledgerAccountant runs an accountant of previewConfig whose ledger is a
// copy of ledger, with its clock stopped at now, and returns its URL.
func ledgerAccountant(t *testing.T, ledger string, now time.Time) string {
	t.Helper()
	b, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	return accountanttest.Serve(t, accountant.Options{
		ConfigPath:    previewConfig,
		DataDir:       accountanttest.LedgerDir(t, b),
		AdminToken:    keysTestToken,
		InternalToken: "internal-" + keysTestToken,
		Now:           func() time.Time { return now },
	})
}

// TestPreviewClosingStanza: with --accountant the report ends with each
// EXACT figure beside the live counter and the counters' lag; without it,
// with one line saying how to ask.
func TestPreviewClosingStanza(t *testing.T) {
	url := previewAccountant(t)
	t.Setenv("TT_ADMIN_TOKEN", keysTestToken)
	code, out, errs := runKeys("govern", "preview", "-c", previewConfig, "--log", previewLedger, "--at", previewAt, "--accountant", url)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"\nLIVE — LedgerSettled recomputation against the running accountant's counters (label: live_counters):\n",
		"  accountant: " + url + " (plan 1c0009de2c56), read 2026-08-10T12:30:00Z\n",
		"  lag: snapshot published 2026-08-10T12:30:00Z, 0s old when read; 0 rows acknowledged and not folded; 0 rows reported dropped by the filters",
		"  [quota_requests] team_daily_requests @ org:acme/team:ml  recomputed 1 / live 1  (same)\n",
		"  [budget_usd] org_monthly_budget @ org:acme  recomputed 0.000018 / live 0.000018  (same)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}

	// The token from a file works the same; a wrong one is refused.
	tf := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tf, []byte("not-the-token\n"), 0o600)
	code, out, errs = runKeys("govern", "preview", "-c", previewConfig, "--log", previewLedger, "--at", previewAt, "--accountant", url, "--admin-token-file", tf)
	if code != 1 || !strings.Contains(out, "\nLIVE — not compared: the counters of "+url+" could not be read: ") || !strings.Contains(errs, "could not be read") {
		t.Errorf("wrong token: exit %d\n%s%s", code, out, errs)
	}
}

func TestPreviewAccountantUsage(t *testing.T) {
	t.Setenv("TT_ADMIN_TOKEN", "")
	code, _, errs := runKeys("govern", "preview", "-c", previewConfig, "--log", previewLedger, "--accountant", "http://127.0.0.1:1")
	if code != 2 || !strings.Contains(errs, "no admin token: set TT_ADMIN_TOKEN, or pass --admin-token-file FILE") {
		t.Errorf("no token: exit %d, stderr %q", code, errs)
	}
	code, _, errs = runKeys("govern", "preview", "-c", previewConfig, "--log", previewLedger, "--admin-token-file", "x")
	if code != 2 || !strings.Contains(errs, "--admin-token-file is read only with --accountant URL") {
		t.Errorf("token file alone: exit %d, stderr %q", code, errs)
	}
	t.Setenv("TT_ADMIN_TOKEN", "t")
	code, out, errs := runKeys("govern", "preview", "-c", previewConfig, "--log", previewLedger, "--at", previewAt, "--accountant", "http://127.0.0.1:1")
	if code != 1 || !strings.Contains(out, "EXACT — ") || !strings.Contains(out, "\nLIVE — not compared: the counters of http://127.0.0.1:1 could not be read: cannot reach the accountant") {
		t.Errorf("unreachable: exit %d\n%s%s", code, out, errs)
	}
}
