package preview

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant"
	"github.com/tokentriage/tokentriage/accountant/accountanttest"
	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

const liveToken = "preview-test-admin-token"

// startAccountant runs an accountant at instant at over a data directory
// whose ledger is the sandbox's rows followed by extra.
func startAccountant(t *testing.T, extra []ledger.Row) string {
	t.Helper()
	b, err := os.ReadFile("testdata/sandbox.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for i := range extra {
		b = ledgerlog.AppendRow(b, &extra[i])
	}
	return accountanttest.Serve(t, accountant.Options{
		ConfigPath:    "testdata/sixlimits.yaml",
		DataDir:       accountanttest.LedgerDir(t, b),
		AdminToken:    liveToken,
		InternalToken: "internal-" + liveToken,
		Now:           func() time.Time { return at },
	})
}

func liveFrom(url string) func() Live {
	return func() Live {
		c := &api.Client{BaseURL: url, Token: liveToken}
		lc, err := c.Counters(context.Background())
		if err != nil {
			return Live{URL: "ACCOUNTANT", Err: err}
		}
		return Live{URL: "ACCOUNTANT", Counters: &lc}
	}
}

// TestLiveStanzaSame: the accountant folded the very ledger the preview
// replays, so every EXACT figure meets an equal live counter, and the
// stanza discloses the snapshot's age and the rows it cannot hold.
func TestLiveStanzaSame(t *testing.T) {
	url := startAccountant(t, nil)
	var out bytes.Buffer
	err := Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: "testdata/sandbox.jsonl", At: at, Live: liveFrom(url)})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "sandbox_live.golden", out.Bytes())
	got := out.String()
	for _, want := range []string{
		"\n" + LiveHeader + "\n",
		"  [quota_requests] team_daily_requests @ org:acme/team:ml  recomputed 1 / live 1  (same)\n",
		"  [quota_tokens] team_monthly_tokens @ org:acme/team:ml  recomputed 60 / live 60  (same)\n",
		"  lag: snapshot published 2026-08-10T12:30:00Z, 0s old when read; 0 rows acknowledged and not folded; 0 rows reported dropped",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The three blocks are the ones a report without --accountant prints.
	var plain bytes.Buffer
	if err := Run(&plain, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: "testdata/sandbox.jsonl", At: at}); err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(plain.String(), "\nLIVE — ")
	if !strings.HasPrefix(got, head+"\nLIVE — ") {
		t.Errorf("the blocks before the closing stanza differ from a report without --accountant")
	}
}

// TestLiveStanzaDifferences: the accountant's ledger holds two rows the
// replayed one does not. The instance both saw shows the live excess; the
// instance only the accountant saw is listed with nothing recomputed.
func TestLiveStanzaDifferences(t *testing.T) {
	row := func(id, node string, in, out int64) ledger.Row {
		s := time.Date(2026, 8, 10, 12, 10, 0, 0, time.UTC)
		return ledger.Row{RequestID: id, Start: s, End: s.Add(time.Second), Node: node, KID: "vk_FEKZdMs2UQRi",
			Endpoint: "/v1/chat/completions", Provider: "openai", Model: "gpt-4o-mini",
			Usage: ledger.Usage{Input: in, Output: out, Total: in + out}, Status: 200, Decision: ledger.Admitted}
	}
	url := startAccountant(t, []ledger.Row{
		row("tt_bbbbbbbbbbbbbbbbbbbbbbbbba", "org:acme/team:ml/user:dev2", 100, 20),
		row("tt_bbbbbbbbbbbbbbbbbbbbbbbbbe", "org:acme/team:search", 8, 2),
	})
	var out bytes.Buffer
	err := Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: "testdata/sandbox.jsonl", At: at, Live: liveFrom(url)})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "sandbox_live_differs.golden", out.Bytes())
	for _, want := range []string{
		"  [quota_requests] team_daily_requests @ org:acme/team:ml  recomputed 1 / live 2  (live +1)\n",
		"  [quota_requests] team_daily_requests @ org:acme/team:search  recomputed 0 / live 1  (live +1)\n",
		"  [quota_tokens] team_monthly_tokens @ org:acme/team:ml  recomputed 60 / live 180  (live +120)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestLiveStanzaUnreadable: counters that cannot be read leave the report
// whole, say so in the stanza, and make the run an error.
func TestLiveStanzaUnreadable(t *testing.T) {
	var out bytes.Buffer
	err := Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: "testdata/sandbox.jsonl", At: at,
		Live: func() Live { return Live{URL: "http://127.0.0.1:1", Err: errors.New("connection refused")} }})
	var le *LiveError
	if !errors.As(err, &le) {
		t.Fatalf("error %v, want a *LiveError", err)
	}
	want := "\nLIVE — not compared: the counters of http://127.0.0.1:1 could not be read: connection refused\n"
	if !strings.HasSuffix(out.String(), want) || !strings.Contains(out.String(), ExactHeader) {
		t.Errorf("report:\n%s\nwant it whole, ending %q", out.String(), want)
	}
}

// TestNoLiveLine: without an accountant the report closes with one line
// saying how to compare with the live counters.
func TestNoLiveLine(t *testing.T) {
	var out bytes.Buffer
	if err := Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: "testdata/sandbox.jsonl", At: at}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "\n\n"+NoLiveLine+"\n") {
		t.Errorf("report does not close with the line saying how to compare:\n%s", out.String())
	}
}
