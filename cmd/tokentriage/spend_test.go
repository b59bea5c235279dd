package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/tokentriage/tokentriage/accountant/preview"
	"github.com/tokentriage/tokentriage/accountant/spend"
)

const spendLedger = "../../accountant/spend/testdata/ledger.jsonl"

// spendAccountant runs an accountant whose ledger is spendLedger.
func spendAccountant(t *testing.T) string {
	return ledgerAccountant(t, spendLedger, time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC))
}

// TestSpendTable: the table a terminal shows, over the hand-counted
// ledger.
func TestSpendTable(t *testing.T) {
	code, out, errs := runKeys("spend", "--log", spendLedger, "--from", "2026-08-01", "--to", "2026-10-01", "--bucket", "month", "--group-by", "team")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	_, body, _ := strings.Cut(out, "\n\n") // after the heading and its as-of line
	want := `MONTH    TEAM                  REQUESTS  REFUSED  INPUT TOKENS  OUTPUT TOKENS  PRICED USD  ESTIMATED USD       UNPRICED
2026-09  org:beta/team:x              1        0         1,000            100      0.0035              0              -
2026-08  org:acme/team:ml             3        0           350             70    0.000081              0  1 req, 60 tok
2026-09  org:acme/team:ml             4        2           310             40   0.0000705              0              -
total    org:acme/team:ml             7        2           660            110   0.0001515              0  1 req, 60 tok
2026-09  org:acme/team:search         1        0            10              5           0      0.0000045              -
2026-09  (no key)                     1        1             0              0           0              0              -
TOTAL                                10        3         1,670            215   0.0036515      0.0000045  1 req, 60 tok

1 request(s) of models with no price (60 tokens) have no dollar figure: add the models to a --pricing file of the accountant
`
	if body != want {
		t.Errorf("table:\n%s\nwant:\n%s", body, want)
	}
	if !strings.HasPrefix(out, "spend by month, 2026-08-01T00:00:00Z to 2026-10-01T00:00:00Z, grouped by team\nas of ") {
		t.Errorf("heading:\n%s", out)
	}
}

// TestSpendFromAccountantEqualsLedger: the accountant's report (its
// rollup) and the one computed from its ledger here are the same, in
// every format.
func TestSpendFromAccountantEqualsLedger(t *testing.T) {
	url := spendAccountant(t)
	t.Setenv("TT_ADMIN_TOKEN", keysTestToken)
	args := []string{"spend", "--from", "2026-08-24", "--to", "2026-09-14", "--bucket", "week", "--group-by", "user,model", "--decision", "admitted,refused"}
	for _, format := range []string{"csv", "json"} {
		code, remote, errs := runKeys(append(args, "--accountant", url, "--format", format)...)
		if code != 0 {
			t.Fatalf("--accountant: exit %d\n%s%s", code, remote, errs)
		}
		code, local, errs := runKeys(append(args, "--log", spendLedger, "--format", format)...)
		if code != 0 {
			t.Fatalf("--log: exit %d\n%s%s", code, local, errs)
		}
		if format == "json" {
			var a, b spend.Report
			json.Unmarshal([]byte(remote), &a)
			json.Unmarshal([]byte(local), &b)
			a.GeneratedAt, b.GeneratedAt = time.Time{}, time.Time{}
			a.Source.HourlyFrom = nil // the accountant keeps old days daily; --log keeps every hour
			remote, local = mustJSON(t, a), mustJSON(t, b)
		}
		if remote != local || len(local) < 500 {
			t.Errorf("%s: accountant:\n%s\nledger:\n%s", format, remote, local)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSpendAcrossLedgers: two ledgers of a fleet, one repeating rows of
// the other, report each row once and say how many were repeated.
func TestSpendAcrossLedgers(t *testing.T) {
	b, err := os.ReadFile(spendLedger)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(b)), "\n")
	dir := t.TempDir()
	a, c := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.MkdirAll(a, 0o755)
	os.MkdirAll(c, 0o755)
	os.WriteFile(filepath.Join(a, "decisions.jsonl"), []byte(strings.Join(lines[:7], "")), 0o644)
	os.WriteFile(filepath.Join(c, "decisions.jsonl"), []byte(strings.Join(lines[4:], "")+"\n"), 0o644)
	code, out, errs := runKeys("spend", "--log", a, "--log", c, "--from", "2026-08-01", "--to", "2026-10-01", "--bucket", "month", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	var rep spend.Report
	json.Unmarshal([]byte(out), &rep)
	if rep.Total.Requests != 10 || rep.Source.Ledgers != 2 || rep.Source.Duplicates != 3 || rep.Total.PricedUSD.String() != "0.0036515" {
		t.Fatalf("total %+v, source %+v", rep.Total, rep.Source)
	}
	// The directory holding both data directories is the same fleet.
	for _, args := range [][]string{{"--log", a, "--log", c}, {"--log", dir}} {
		code, out, _ = runKeys(append([]string{"spend", "--from", "2026-08-01", "--to", "2026-10-01"}, args...)...)
		if code != 0 || !strings.Contains(out, "10 rows summed from 2 ledgers (3 rows held by more than one, counted once)") {
			t.Errorf("%v: table heading:\n%s", args, out)
		}
	}
}

func TestSpendUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--log", spendLedger, "--bucket", "fortnight"}, `tokentriage spend: --bucket "fortnight" is not one of hour, day, week, month`},
		{[]string{"--log", spendLedger, "--from", "2026-08-01T10:30:00Z"}, "tokentriage spend: --from: 2026-08-01T10:30:00Z is not on the hour"},
		{[]string{"--log", spendLedger, "--format", "xml"}, `tokentriage spend: --format "xml" is not one of table, csv, json`},
		{[]string{"--log", spendLedger, "--accountant", "http://x"}, "tokentriage spend: --log computes the report here"},
		{[]string{"--log", "/nonexistent/ledger"}, "tokentriage spend: --log /nonexistent/ledger: ledgerlog: stat /nonexistent/ledger: no such file or directory"},
		{[]string{"--log", previewConfig}, "tokentriage spend: none of the"},
	} {
		code, out, errs := runKeys(append([]string{"spend"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d\nstdout %s\nstderr %s\nwant %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestPreviewFormatJSON: govern preview --format json prints one JSON
// document and nothing else on stdout.
func TestPreviewFormatJSON(t *testing.T) {
	code, out, errs := runKeys("govern", "preview", "-c", previewConfig, "--log", previewLedger, "--at", previewAt, "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	var doc preview.Document
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil || dec.More() {
		t.Fatalf("not one JSON document (%v):\n%s", err, out)
	}
	if len(doc.Exact) == 0 || doc.Live != nil {
		t.Errorf("document: %+v", doc)
	}
	code, _, errs = runKeys("govern", "preview", "-c", previewConfig, "--log", previewLedger, "--format", "yaml")
	if code != 2 || !strings.Contains(errs, `--format "yaml" is not one of text, json`) {
		t.Errorf("--format yaml: exit %d %s", code, errs)
	}
}

// TestProgressBar: nothing for a read that ends within progressDelay; a
// bar redrawn at most ten times a second past it, ended by a newline.
func TestProgressBar(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	var b bytes.Buffer
	p := progressBar(&b, "reading ledger", func() time.Time { return now })
	now = t0.Add(100 * time.Millisecond)
	p(10<<20, 100<<20)
	now = t0.Add(400 * time.Millisecond)
	p(100<<20, 100<<20)
	if b.Len() != 0 {
		t.Fatalf("a read done in 400ms drew %q", b.String())
	}

	b.Reset()
	now = t0
	p = progressBar(&b, "reading ledger", func() time.Time { return now })
	for i, step := range []struct {
		at   time.Duration
		done int64
	}{{100 * time.Millisecond, 10}, {600 * time.Millisecond, 30}, {650 * time.Millisecond, 35}, {800 * time.Millisecond, 40}, {2 * time.Second, 100}} {
		now = t0.Add(step.at)
		p(step.done<<20, 100<<20)
		if i == 0 && b.Len() != 0 {
			t.Fatalf("step %d: drew before the delay: %q", i, b.String())
		}
	}
	got := b.String()
	if n := strings.Count(got, "\r"); n != 3 {
		t.Errorf("%d redraws; want 3 (600ms, 800ms, done):\n%q", n, got)
	}
	if !strings.Contains(got, "\rreading ledger [=========>                    ]  30%  30/100 MiB  50 MiB/s  1s left\x1b[K") ||
		!strings.HasSuffix(got, "\rreading ledger [==============================] 100%  100/100 MiB  50 MiB/s  done in 2s\x1b[K\n") {
		t.Errorf("bar:\n%q", got)
	}
}

// TestSpendTableEscapesControlCharacters: a model name is whatever the
// caller sent; the table a terminal shows writes its control and format
// characters as escapes, so none reaches the reader's terminal (an ESC
// sequence, a carriage return over the line) or splits the table (a tab
// or newline).
func TestSpendTableEscapesControlCharacters(t *testing.T) {
	row := `{"request_id":"tt_aaaaaaaaaaaaaaaaaaaaaaaaza","start":"2026-09-02T10:00:00Z","end":"2026-09-02T10:00:00Z","kid":"k1",` +
		`"node":"org:acme/team:ml/user:dev1","endpoint":"/v1/chat/completions","provider":"openai",` +
		`"model":"x\u001b]0;owned\u0007\u001b[2K\rfake\t9\n\u202etxt.exe\u00ad\ufeff\udb40\udc01","model_served":"","stream":false,` +
		`"usage":{"input":1,"output":1,"cached_input":0,"reasoning":0,"total":2},"status":200,"decision":"admitted","error_type":"",` +
		`"refused_by":null,"shadow":[],"breached":[],"suspended":[],"estimated":{"input":false,"output":false},"replica":"r1",` +
		`"cost":{"nanos":0,"unpriced":true,"estimated":false}}` + "\n"
	log := filepath.Join(t.TempDir(), "decisions.jsonl")
	if err := os.WriteFile(log, []byte(row), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runKeys("spend", "--log", log, "--from", "2026-09-01", "--to", "2026-10-01", "--bucket", "month", "--group-by", "model")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, r := range out {
		if r != '\n' && !unicode.IsPrint(r) {
			t.Fatalf("the table holds %U:\n%q", r, out)
		}
	}
	want := `2026-09  x\x1b]0;owned\x07\x1b[2K\x0dfake\x099\x0a\u202etxt.exe\u00ad\ufeff\U000e0001 `
	if !strings.Contains(out, want) {
		t.Errorf("table:\n%s\nwant a line starting %q", out, want)
	}
	if n := strings.Count(out, "\n"); n != 8 {
		t.Errorf("%d lines; want 8 (heading, as-of, blank, header, the row, TOTAL, blank, the unpriced note):\n%s", n, out)
	}
}
