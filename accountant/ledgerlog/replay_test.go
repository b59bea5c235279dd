package ledgerlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestScanRows: rows reach fn, other lines reach unreadable with their
// number and tornness, and every byte counts toward the progress, which
// Finish reports whole.
func TestScanRows(t *testing.T) {
	end := time.Date(2026, 8, 10, 12, 0, 0, 0, time.UTC)
	r := ledger.Row{RequestID: "tt_i3f2naenug5aanctu6pcjrofcy", Start: end, End: end, Node: "org:acme", Endpoint: "/v1/chat/completions",
		Provider: "openai", Model: "gpt-4o-mini", Status: 200, Decision: ledger.Admitted}
	b := AppendRow(nil, &r)
	b = append(b, "{garbage\n\n"...)
	b = AppendRow(b, &r)
	b = append(b, `{"request_id`...)
	path := filepath.Join(t.TempDir(), ActiveName)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var reports [][2]int64
	p := Progress{Report: func(done, total int64) { reports = append(reports, [2]int64{done, total}) }, Total: Size([]string{path})}
	var rows []int
	var bad []string
	err := ScanRows(path, &p, func(n int, torn bool, err error) {
		bad = append(bad, map[bool]string{true: "torn", false: "whole"}[torn])
		if err == nil {
			t.Errorf("line %d unreadable without a reason", n)
		}
	}, func(n int, row ledger.Row) error {
		if row.RequestID != r.RequestID {
			t.Errorf("line %d: %+v", n, row)
		}
		rows = append(rows, n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0] != 1 || rows[1] != 4 || len(bad) != 2 || bad[0] != "whole" || bad[1] != "torn" {
		t.Errorf("rows at %v, unreadable %v", rows, bad)
	}
	p.Finish()
	total := int64(len(b))
	if len(reports) < 2 || reports[0][1] != total || reports[len(reports)-1] != [2]int64{total, total} {
		t.Errorf("progress %v of %d bytes", reports, total)
	}
	stop := errors.New("stop")
	if err := ScanRows(path, &Progress{}, func(int, bool, error) {}, func(int, ledger.Row) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("fn's error: %v", err)
	}
}
