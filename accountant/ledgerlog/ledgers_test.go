package ledgerlog

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestLedgersIn: a file, a data directory and a directory of ledgers (one
// per replica: data directories and loose .jsonl files) resolve to the
// ledgers they hold.
func TestLedgersIn(t *testing.T) {
	dir := t.TempDir()
	touch := func(parts ...string) string {
		p := filepath.Join(append([]string{dir}, parts...)...)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rot := RotatedName(time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC))
	a0 := touch("fleet", "a", rot)
	a1 := touch("fleet", "a", ActiveName)
	b1 := touch("fleet", "b", ActiveName)
	loose := touch("fleet", "c.jsonl")
	touch("fleet", "notes.txt")
	os.MkdirAll(filepath.Join(dir, "fleet", "empty"), 0o755)
	for _, c := range []struct {
		path string
		want []Ledger
	}{
		{filepath.Join(dir, "fleet"), []Ledger{
			{filepath.Join(dir, "fleet", "a"), []string{a0, a1}},
			{filepath.Join(dir, "fleet", "b"), []string{b1}},
			{loose, []string{loose}},
		}},
		{filepath.Join(dir, "fleet", "a"), []Ledger{{filepath.Join(dir, "fleet", "a"), []string{a0, a1}}}},
		{a1, []Ledger{{a1, []string{a0, a1}}}},
		{loose, []Ledger{{loose, []string{loose}}}},
		{filepath.Join(dir, "fleet", "empty"), nil},
	} {
		got, err := LedgersIn(c.path)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("LedgersIn(%s) = %v, %v\nwant %v", c.path, got, err, c.want)
		}
	}
	if _, err := LedgersIn(filepath.Join(dir, "nope")); err == nil {
		t.Error("a missing path resolved")
	}
}
