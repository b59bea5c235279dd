package accountant

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestRowsFarFromTheClockAreRedated: rows a gateway dated yesterday, in
// 2027 and in 2099 count in today's period (today's limits see them), are
// written re-dated with the gateway's time kept, counted, logged, and read
// back the same after a restart; a row within the bounds keeps its time.
func TestRowsFarFromTheClockAreRedated(t *testing.T) {
	f := newFixture(t, testConfig)
	rows := []ledger.Row{
		row(reqID(1), t0.Add(-2*time.Minute), "org:acme/team:ml", "gpt-4o-mini", 10, 5),
		row(reqID(2), t0.Add(-12*time.Hour-time.Minute), "org:acme/team:ml", "gpt-4o-mini", 10, 5),
		row(reqID(3), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "org:acme/team:ml", "gpt-4o-mini", 10, 5),
		row(reqID(4), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), "org:acme/team:ml", "gpt-4o-mini", 10, 5),
	}
	if ack := f.ingest(t, batch(rows...)); ack.Accepted != 4 {
		t.Fatalf("ack %+v", ack)
	}
	id := "team_daily_requests|quota_requests|org:acme/team:ml||day|"
	today := func() int64 {
		for _, e := range f.sync(t, "").Snapshot.Entries {
			if e.ID == id && e.PeriodStart.Equal(time.Date(2026, 8, 10, 0, 0, 0, 0, time.UTC)) {
				return e.Value
			}
		}
		return 0
	}
	if n := today(); n != 4 {
		t.Errorf("today's request quota counts %d rows; want all 4", n)
	}
	if v := counterValue(t, f.s, "rows_redated_total"); v != 3 {
		t.Errorf("rows_redated_total %v; want 3", v)
	}
	if logs := f.logs.String(); !strings.Contains(logs, "were re-dated") || !strings.Contains(logs, "rows=3 replica=r1") {
		t.Errorf("no log line naming the rows and the replica:\n%s", logs)
	}
	b, err := os.ReadFile(filepath.Join(f.dir, "data", "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i, line := range lines {
		r, err := ledgerlog.ParseRow([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i == 0 && (!r.End.Equal(rows[0].End) || !r.GatewayEnd.IsZero()):
			t.Errorf("row 1 within the bounds: end %s gateway_end %s", r.End, r.GatewayEnd)
		case i > 0 && (!r.End.Equal(t0) || !r.GatewayEnd.Equal(rows[i].End) || r.End.Sub(r.Start) != time.Second):
			t.Errorf("row %d: end %s start %s gateway_end %s; want now, a second before, and %s", i+1, r.End, r.Start, r.GatewayEnd, rows[i].End)
		}
	}
	f.clock.Set(t0.Add(time.Minute))
	f.restart(t)
	if n := today(); n != 4 {
		t.Errorf("after a restart today's request quota counts %d rows; want 4", n)
	}
}
