package core

import (
	"bytes"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// FuzzIngest feeds whatever parses as ledger rows to an armed core, twice
// (the second time as a retried batch), and checks the outcomes add up and
// the retry counts nothing again.
//
//	go test ./accountant/core -run '^$' -fuzz FuzzIngest -fuzztime 30s
func FuzzIngest(f *testing.F) {
	g, err := parseGovernanceYAML(referenceConfig)
	if err != nil {
		f.Fatal(err)
	}
	plan, err := govern.Compile(g)
	if err != nil {
		f.Fatal(err)
	}
	armed, _ := plan.Arm(govern.Runtime{})
	seed := ledger.Row{RequestID: "tt_i3f2naenug5aanctu6pcjrofcy", Start: time.Date(2026, 8, 10, 12, 0, 0, 0, time.UTC),
		End: time.Date(2026, 8, 10, 12, 0, 1, 0, time.UTC), Node: "org:acme/team:ml/user:dev1", Model: "gpt-4o",
		Usage: ledger.Usage{Input: 10, Output: 5}, Status: 200, Decision: ledger.Admitted}
	f.Add(seed.AppendJSON(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rows []ledger.Row
		for _, line := range bytes.Split(data, []byte{'\n'}) {
			if r, err := ledger.ParseRow(line); err == nil {
				rows = append(rows, r)
			}
		}
		now := time.Date(2026, 8, 10, 13, 0, 0, 0, time.UTC)
		c := New(Options{})
		c.Arm(now, armed)
		first := c.Ingest(now, append([]ledger.Row(nil), rows...), 1)
		if first.Accepted+first.Duplicates+first.Rejected != len(rows) {
			t.Fatalf("outcomes %+v for %d rows", first, len(rows))
		}
		before, err := c.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		again := c.Ingest(now, append([]ledger.Row(nil), rows...), 2)
		if again.Accepted != 0 {
			t.Fatalf("a retried batch recorded %d rows again", again.Accepted)
		}
		after, _ := c.Snapshot()
		if len(before.Entries) != len(after.Entries) {
			t.Fatalf("a retried batch changed the snapshot")
		}
		for i := range before.Entries {
			if before.Entries[i] != after.Entries[i] {
				t.Fatalf("a retried batch changed %s", before.Entries[i].ID)
			}
		}
	})
}
