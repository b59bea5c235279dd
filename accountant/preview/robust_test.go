package preview

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestAbsurdUsageSaturates: rows reporting usage near the int64 ceiling pin
// the figures at the ceiling (OVER) instead of wrapping them negative.
func TestAbsurdUsageSaturates(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 8, 10, 12, 0, 0, 0, time.UTC)
	var b []byte
	for i, id := range []string{"tt_aaaaaaaaaaaaaaaaaaaaaaaaae", "tt_aaaaaaaaaaaaaaaaaaaaaaaaai", "tt_aaaaaaaaaaaaaaaaaaaaaaaaam"} {
		s := t0.Add(time.Duration(i) * time.Second)
		r := ledger.Row{RequestID: id, Start: s, End: s.Add(time.Second), Node: "org:acme/team:ml/user:dev1", KID: "vk_FEKZdMs2UQRi",
			Endpoint: "/v1/chat/completions", Provider: "openai", Model: "gpt-4o-mini",
			Usage:  ledger.Usage{Input: math.MaxInt64, Output: math.MaxInt64, Total: math.MaxInt64},
			Status: 200, Decision: ledger.Admitted}
		b = ledgerlog.AppendRow(b, &r)
	}
	log := testkit.WriteFile(t, dir, "decisions.jsonl", b)
	var out bytes.Buffer
	if err := Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: log, At: at}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "observed -") || strings.Contains(out.String(), "peak -") {
		t.Errorf("a figure wrapped negative:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "team_monthly_tokens @ org:acme/team:ml  observed 9223372036854775807 ") {
		t.Errorf("the token quota is not pinned at the ceiling:\n%s", out.String())
	}
}

// TestUnreadableLinesNamed: every line that is not a row is passed to
// Options.Unreadable with its file and line number; a ledger with no row
// at all is an error, as is a directory with no ledger.
func TestUnreadableLinesNamed(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/sandbox.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(src)), "\n")
	log := testkit.WriteFile(t, dir, "decisions.jsonl", []byte(lines[0]+"{garbage\n\n"+lines[1]+lines[2][:30]))
	var got []string
	err = Run(&bytes.Buffer{}, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: log, At: at,
		Unreadable: func(file string, line int, torn bool, err error) {
			if file != log || err == nil {
				t.Errorf("Unreadable(%q, %d, %v, %v)", file, line, torn, err)
			}
			got = append(got, strings.Join([]string{string(rune('0' + line)), map[bool]string{true: "torn", false: "whole"}[torn]}, " "))
		}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ", ") != "2 whole, 5 torn" {
		t.Errorf("unreadable lines %v, want line 2 and the torn line 5", got)
	}

	testkit.WriteFile(t, dir, "decisions.jsonl", []byte("hello\n"))
	if err := Run(&bytes.Buffer{}, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: log, At: at}); err == nil || !strings.Contains(err.Error(), "none of the 1 lines") {
		t.Errorf("a file with no row: %v", err)
	}
	empty := t.TempDir()
	if err := Run(&bytes.Buffer{}, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: empty, At: at}); err == nil || !strings.Contains(err.Error(), "holds no ledger") {
		t.Errorf("a directory with no ledger: %v", err)
	}
}
