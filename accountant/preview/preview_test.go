package preview

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

var update = flag.Bool("update", false, "rewrite golden files with the actual output")

func golden(t *testing.T, name string, got []byte) {
	testkit.Golden(t, filepath.Join("testdata", name), got, *update)
}

// reportHas checks that the report holds each of wants.
func reportHas(t *testing.T, report string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

var at = time.Date(2026, 8, 10, 12, 30, 0, 0, time.UTC)

// TestSandboxGolden replays a five-row ledger like seed 002's sandbox: one
// served request of 60 tokens and four refusals. Its EXACT lines are the
// seed's: observed 60 tokens and 1 request.
func TestSandboxGolden(t *testing.T) {
	var out bytes.Buffer
	err := Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: "testdata/sandbox.jsonl", At: at})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "sandbox.golden", out.Bytes())
	for _, want := range []string{
		"  [quota_tokens] team_monthly_tokens @ org:acme/team:ml  observed 60 / ceiling 50000000  (frac 0.0000, rows 1)\n",
		"  [quota_requests] team_daily_requests @ org:acme/team:ml  observed 1 / ceiling 20000  (frac 0.0001, rows 1)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks seed 002's line %q", want)
		}
	}
}

// TestBurstGolden replays a burst: twelve overlapping flights of one user
// against a concurrency cap of 8, 800 arrivals in twenty seconds against a
// shadow rpm of 300 (burst 300), and 400000 tokens against a tpm of 200000.
func TestBurstGolden(t *testing.T) {
	dir := t.TempDir()
	log := testkit.WriteFile(t, dir, "decisions.jsonl", burstLedger())
	var out bytes.Buffer
	var calls int
	err := Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: log, At: at, Progress: func(done, total int64) {
		calls++
		if done > total {
			t.Errorf("progress %d of %d", done, total)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 {
		t.Error("progress never reported")
	}
	got := strings.Replace(out.String(), dir, "DIR", 1)
	golden(t, "burst.golden", []byte(got))
}

func TestConfigErrorsListed(t *testing.T) {
	cfg := testkit.WriteFile(t, t.TempDir(), "bad.yaml", []byte("governance:\n  enabled: true\n  limits:\n    - id: team_tpm\n      attach: { level: team }\n      type: tpm\n      amount: 500\n      period: 1m\n    - id: r\n      attach: { level: team }\n      type: rpm\n      amount: 5\n"))
	err := Run(&bytes.Buffer{}, Options{ConfigPath: cfg, LogPath: "testdata/sandbox.jsonl", At: at})
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("err = %v (%+v)", err, ce)
	}
}

func TestFlightReplay(t *testing.T) {
	x := &inflight{instance: instance{amount: 2}, flights: []flight{{0, 10}, {1, 5}, {2, 3}, {3, 4}, {5, 6}, {10, 11}}}
	got := replayFlights(x)
	// At 2: 0-10, 1-5 admitted, 2-3 refused (2 in flight). At 3: 3-4 is
	// refused too (0-10 and 1-5 still hold). At 5: 1-5 ended, 5-6 admitted.
	// At 10: 0-10 ended, 10-11 admitted. Peak overlap: 0-10,1-5,2-3 → 3.
	if got.peak != 3 || got.refused != 2 || got.flights != 6 {
		t.Errorf("replayFlights = %+v, want peak 3, refused 2 of 6", got)
	}
}

func TestFrac(t *testing.T) {
	for _, tc := range []struct {
		v, c int64
		want string
	}{{1, 20000, "0.0001"}, {60, 50000000, "0.0000"}, {12600, 1000, "12.6000"}, {2, 3, "0.6667"}, {0, 0, "-"}} {
		if got := frac(tc.v, tc.c); got != tc.want {
			t.Errorf("frac(%d, %d) = %s, want %s", tc.v, tc.c, got, tc.want)
		}
	}
}

// TestRuntimePlane arms with a runtime node and an override: the node's
// rows count under the template, the override is the ceiling, and a
// dropped override is a note, as the accountant logs it.
func TestRuntimePlane(t *testing.T) {
	var out bytes.Buffer
	err := Run(&out, Options{ConfigPath: "testdata/sixlimits.yaml", LogPath: "testdata/sandbox.jsonl", At: at,
		Runtime: govern.Runtime{
			Nodes: []string{"org:acme/team:ml/user:dev3"},
			Overrides: []govern.Override{
				{LimitID: "org_monthly_budget", Node: "org:acme", Amount: 2_000_000_000_000},
				{LimitID: "team_rpm", Node: "org:acme/team:ml", Amount: 5},
			},
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  [budget_usd] org_monthly_budget @ org:acme  observed 0.000018 / ceiling 2000  (frac 0.0000, rows 1)\n",
		`note: runtime plane: runtime.overrides[1]: limit type "rpm" does not support per-node overrides`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// burstLedger is the ledger TestBurstGolden replays.
func burstLedger() []byte {
	var b []byte
	t0 := time.Date(2026, 8, 10, 12, 0, 0, 0, time.UTC)
	n := 0
	id := func() string {
		n++
		const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
		s := []byte("tt_aaaaaaaaaaaaaaaaaaaaaaaaaa")
		for i, k := len(s)-1, n<<2; k > 0; i-- { // the last character carries two zero bits
			s[i] = alphabet[k%32]
			k /= 32
		}
		return string(s)
	}
	add := func(start, end time.Time, node, model string, in, out int64) {
		r := ledger.Row{RequestID: id(), Start: start, End: end, Node: node, KID: "vk_FEKZdMs2UQRi", Endpoint: "/v1/chat/completions",
			Provider: "openai", Model: model, Usage: ledger.Usage{Input: in, Output: out, Total: in + out}, Status: 200, Decision: ledger.Admitted}
		b = ledgerlog.AppendRow(b, &r)
	}
	// 12 flights of dev1 starting 100ms apart, each 2s long: up to 12 overlap.
	for i := range 12 {
		s := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		add(s, s.Add(2*time.Second), "org:acme/team:ml/user:dev1", "gpt-4o", 1000, 500)
	}
	// 800 short requests of dev2 in twenty seconds.
	for i := range 800 {
		s := t0.Add(10*time.Second + time.Duration(i)*25*time.Millisecond)
		add(s, s.Add(50*time.Millisecond), "org:acme/team:ml/user:dev2", "gpt-4o-mini", 300, 200)
	}
	// Yesterday's row: outside the day period, inside the month.
	add(t0.Add(-20*time.Hour), t0.Add(-20*time.Hour+time.Second), "org:acme/team:search", "claude-3-5-haiku-latest", 1000, 1000)
	// An unknown model: a row and tokens, no dollars.
	add(t0.Add(time.Minute), t0.Add(time.Minute+time.Second), "org:acme/team:search", "llama-9000", 10, 10)
	return b
}

// TestFleetLedgersReplayAsOne splits the burst ledger between two
// replicas' ledgers that share some rows (as a retried batch that reached
// two accountants would): replayed as a fleet, by repeated paths or as a
// directory of ledgers, the report is the one ledger's, each shared row
// counted once and the count said in a note.
func TestFleetLedgersReplayAsOne(t *testing.T) {
	rows := bytes.SplitAfter(burstLedger(), []byte("\n"))
	rows = rows[:len(rows)-1] // the empty piece after the last newline
	half := len(rows) / 2
	dir := t.TempDir()
	fleet := filepath.Join(dir, "fleet")
	a := filepath.Join(fleet, "replica-a", "decisions.jsonl")
	b := filepath.Join(fleet, "replica-b.jsonl")
	os.MkdirAll(filepath.Dir(a), 0o755)
	if err := os.WriteFile(a, bytes.Join(rows[:half+7], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, bytes.Join(rows[half:], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	one := testkit.WriteFile(t, dir, "one.jsonl", burstLedger())

	report := func(o Options) string {
		t.Helper()
		o.ConfigPath, o.At = "testdata/sixlimits.yaml", at
		var out bytes.Buffer
		if err := Run(&out, o); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	want := report(Options{LogPath: one})
	body := func(s string) string { return s[strings.Index(s, "\n\n"):] }
	for name, o := range map[string]Options{
		"repeated --log":       {LogPath: filepath.Dir(a), LogPaths: []string{b}},
		"a directory of them":  {LogPath: fleet},
		"a ledger named twice": {LogPath: fleet, LogPaths: []string{a}},
	} {
		got := report(o)
		if body(got) != body(want) {
			t.Errorf("%s: the fleet's report differs from the one ledger's:\n%s\nwant\n%s", name, got, want)
		}
		note := "note: fleet: 2 ledgers replayed as one (" + filepath.Dir(a) + ", " + b + "); 7 rows found in more than one ledger counted once\n"
		if !strings.Contains(got, note) {
			t.Errorf("%s: no note %q in\n%s", name, note, got)
		}
		if !strings.Contains(got, "ledger: 2 file(s), 814 rows") {
			t.Errorf("%s: the ledger line does not count each row once:\n%s", name, got)
		}
	}
}
