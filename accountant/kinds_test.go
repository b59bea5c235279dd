package accountant

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// quarantineLines reads the accountant's dead-letter file.
func (f *fixture) quarantineLines(t *testing.T) []quarantineEntry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "data", QuarantineName))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []quarantineEntry
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e quarantineEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("quarantine line %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

// ledgerRows reads back the accountant's decisions.jsonl.
func (f *fixture) ledgerRows(t *testing.T) []ledger.Row {
	t.Helper()
	var out []ledger.Row
	err := ledgerlog.ScanFile(filepath.Join(f.dir, "data", ledgerlog.ActiveName), func(line []byte) error {
		if len(line) > ledger.MaxRowBytes {
			t.Errorf("a ledger line of %d bytes, over %d", len(line), ledger.MaxRowBytes)
		}
		r, err := ledger.ParseRow(line)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestIngestQuarantinesWhatItCannotAccept: a batch with rows the
// accountant can never accept (not JSON, a malformed request id, a close
// only the accountant writes, a row past the deduplication horizon) is
// acknowledged with its good rows recorded; the bad ones are written to
// quarantine.jsonl with why, counted, logged, and never counted. A row
// from a writer that does not bound its members (a 7.8 MB model name) is
// cut to its bounds before it reaches the ledger, which replay reads back.
// Before, the bad rows left no trace but the ack, and the huge row made a
// ledger line no replay could read.
func TestIngestQuarantinesWhatItCannotAccept(t *testing.T) {
	f := newFixture(t, testConfig)
	good := row(reqID(1), t0, "org:acme/team:ml", "gpt-4o-mini", 1, 1)
	huge := row(reqID(2), t0, "org:acme/team:ml", strings.Repeat("m", 7_800_000), 1, 1)
	closed := row(reqID(3), t0, "org:acme/team:ml", "gpt-4o-mini", 1, 1)
	closed.Kind = ledger.KindClose
	old := row(reqID(4), t0.AddDate(0, -3, 0), "org:acme/team:ml", "gpt-4o-mini", 1, 1)
	body := append([]byte("{not json\n"), batch(good, huge, closed, old)...)
	body = append(body, batch(row("tt_BAD", t0, "", "x", 1, 1))...)
	code, resp := f.do(t, http.MethodPost, syncwire.IngestPath+"?replica=r-7", body)
	if code != http.StatusOK {
		t.Fatalf("ingest: %d %s", code, resp)
	}
	var ack syncwire.IngestAck
	json.Unmarshal(resp, &ack)
	if ack.Accepted != 2 || ack.Rejected != 4 || strings.Join(ack.Kinds, ",") != "start,summary,close" {
		t.Fatalf("ack %+v", ack)
	}
	q := f.quarantineLines(t)
	if len(q) != 4 {
		t.Fatalf("%d quarantined rows, want 4: %+v", len(q), q)
	}
	for i, want := range []string{"not valid JSON", "kind close", "before the deduplication horizon", "is not a request id"} {
		if !strings.Contains(q[i].Reason, want) || q[i].Replica != "r-7" || q[i].Row == "" {
			t.Errorf("quarantined row %d: %+v, want a reason with %q", i, q[i], want)
		}
	}
	_, metrics := f.do(t, http.MethodGet, "/metrics", nil)
	if !strings.Contains(string(metrics), "tt_accountant_rows_quarantined_total 4") {
		t.Error("tt_accountant_rows_quarantined_total is not 4")
	}
	if !strings.Contains(f.logs.String(), "quarantined rows the accountant can never accept") {
		t.Error("no log line says rows were quarantined")
	}
	rows := f.ledgerRows(t)
	if len(rows) != 2 || len(rows[1].Model) != ledger.MaxFieldBytes || strings.Join(rows[1].Cut, ",") != "model,model_served" {
		t.Fatalf("ledger rows: %d, the huge one's model %d bytes, cut %v", len(rows), len(rows[1].Model), rows[1].Cut)
	}
	f.restart(t) // replay reads every line back
	if !strings.Contains(f.logs.String(), "skipped_bad=0") {
		t.Errorf("replay skipped lines:\n%s", f.logs)
	}
}

// TestCallsWhoseEndNeverCame: a call's start is recorded and counts
// nothing; with no end within its lease_ttl the heartbeat closes it at its
// estimate, marked estimated, which the counters and the spend report
// hold; a late end replaces the estimate (written with what it replaces),
// so the call counts once with its own figures, also after a restart.
// Start rows sent again are duplicates. Summaries count as their
// requests.
func TestCallsWhoseEndNeverCame(t *testing.T) {
	f := newFixture(t, testConfig)
	start := row(reqID(1), t0, "org:acme/team:ml/user:dev1", "gpt-4o-mini", 100, 16384)
	start.Kind, start.LeaseTTLMS, start.Status = ledger.KindStart, 2000, 0
	start.Estimated = ledger.Estimated{Input: true, Output: true}
	f.clock.Set(t0)
	if ack := f.ingest(t, batch(start)); ack.Accepted != 1 {
		t.Fatalf("ack %+v", ack)
	}
	tokens := func() int64 {
		for _, e := range f.sync(t, "").Snapshot.Entries {
			if strings.HasPrefix(e.ID, "team_monthly_tokens|") {
				return e.Value
			}
		}
		return 0
	}
	if n := tokens(); n != 0 {
		t.Fatalf("a start counted %d tokens", n)
	}
	f.clock.Set(t0.Add(time.Second))
	if ack := f.ingest(t, batch(start)); ack.Duplicates != 1 {
		t.Fatalf("a start sent again: %+v", ack)
	}
	f.clock.Set(t0.Add(2500 * time.Millisecond))
	f.s.tick()
	if n := tokens(); n != 0 {
		t.Fatalf("closed 2.5 s after the start, 1.5 s after it was sent again: %d tokens", n)
	}
	f.clock.Set(t0.Add(3 * time.Second))
	f.s.tick()
	if n := tokens(); n != 100+16384 {
		t.Fatalf("after lease_ttl the call counts %d tokens, want its estimate %d", n, 100+16384)
	}
	rep := f.report(t, "admin-secret", "from=2026-08-01&to=2026-09-01&bucket=month")
	if got := spendLine(&rep.Total); !strings.HasPrefix(got, "1 req, 0 refused, 100/16384 tokens") || !strings.Contains(got, "$0 priced") {
		t.Errorf("spend after the close: %s", got)
	}
	if !strings.Contains(f.logs.String(), "closed calls whose end never came") {
		t.Error("the close is not logged")
	}

	// The end comes late: it replaces the estimate.
	end := row(reqID(1), t0.Add(5*time.Second), "org:acme/team:ml/user:dev1", "gpt-4o-mini", 100, 20)
	f.clock.Set(t0.Add(6 * time.Second))
	if ack := f.ingest(t, batch(end)); ack.Accepted != 1 {
		t.Fatalf("the late end: %+v", ack)
	}
	f.ingest(t, batch(end)) // again: a duplicate
	check := func(when string) {
		t.Helper()
		if n := tokens(); n != 120 {
			t.Errorf("%s: %d tokens, want the end's 120", when, n)
		}
		rep := f.report(t, "admin-secret", "from=2026-08-01&to=2026-09-01&bucket=month")
		if got := spendLine(&rep.Total); !strings.HasPrefix(got, "1 req, 0 refused, 100/20 tokens") || !strings.Contains(got, "$0 estimated") {
			t.Errorf("%s: spend %s, want the end's figures alone", when, got)
		}
	}
	check("after the late end")
	rows := f.ledgerRows(t)
	if len(rows) != 3 || rows[1].Kind != ledger.KindClose || rows[2].Replaced == nil || rows[2].Replaced.Usage.Output != 16384 {
		t.Fatalf("ledger: %+v", rows)
	}
	f.clock.Set(t0.Add(time.Minute))
	f.restart(t)
	<-f.s.spendState.readyCh
	check("after a restart")

	// A summary counts as its requests.
	sum := row(reqID(9), t0.Add(time.Minute), "org:acme/team:ml/user:dev1", "gpt-4o-mini", 500, 0)
	sum.Kind, sum.Count = ledger.KindSummary, 500
	f.ingest(t, batch(sum))
	rep = f.report(t, "admin-secret", "from=2026-08-01&to=2026-09-01&bucket=month")
	if got := spendLine(&rep.Total); !strings.HasPrefix(got, "501 req, 0 refused, 600/20 tokens") {
		t.Errorf("spend with a summary of 500: %s", got)
	}
	// Since the restart: the summary's 500 requests (the metric counts what
	// this process recorded).
	_, metrics := f.do(t, http.MethodGet, "/metrics", nil)
	if !strings.Contains(string(metrics), "tt_accountant_requests_recorded_total 500\n") {
		t.Error("tt_accountant_requests_recorded_total is not 500")
	}
}

// TestStartsOfADeadReplicaCloseAfterARestart: the accountant that held a
// call open is restarted (its replica was one process with it, killed);
// the replay holds the call open again, lease_ttl from the restart, and
// the heartbeat closes it then.
func TestStartsOfADeadReplicaCloseAfterARestart(t *testing.T) {
	f := newFixture(t, testConfig)
	f.clock.Set(t0)
	var starts []ledger.Row
	for i := 1; i <= 3; i++ {
		s := row(reqID(i), t0, "org:acme/team:ml/user:dev1", "gpt-4o-mini", 10, 100)
		s.Kind, s.LeaseTTLMS, s.Status, s.Estimated = ledger.KindStart, 2000, 0, ledger.Estimated{Input: true, Output: true}
		starts = append(starts, s)
	}
	f.ingest(t, batch(starts...))
	f.clock.Set(t0.Add(time.Hour))
	f.restart(t)
	f.s.tick()
	if rep := f.report(t, "admin-secret", "from=2026-08-01&to=2026-09-01&bucket=month"); rep.Total.Requests != 0 {
		t.Fatalf("closed at the restart itself: %d requests", rep.Total.Requests)
	}
	f.clock.Set(t0.Add(time.Hour + 2*time.Second))
	f.s.tick()
	rep := f.report(t, "admin-secret", "from=2026-08-01&to=2026-09-01&bucket=month")
	if got := spendLine(&rep.Total); !strings.HasPrefix(got, "3 req, 0 refused, 30/300 tokens") || rep.Total.EstimatedRequests != 3 {
		t.Errorf("after lease_ttl: %s (%d estimated)", got, rep.Total.EstimatedRequests)
	}
}

// TestAnEmptyBatchAnswersTheKinds: an empty ingest batch, a filter's ask
// for the row kinds before it has rows to send (a VM whose calls are all
// still running), is answered with the kinds and records nothing; the
// rows after it are recorded as usual.
func TestAnEmptyBatchAnswersTheKinds(t *testing.T) {
	f := newFixture(t, testConfig)
	code, resp := f.do(t, http.MethodPost, syncwire.IngestPath, nil)
	if code != http.StatusOK {
		t.Fatalf("an empty batch: %d %s", code, resp)
	}
	var ack syncwire.IngestAck
	json.Unmarshal(resp, &ack)
	if ack.Accepted != 0 || ack.Rejected != 0 || ack.Duplicates != 0 || strings.Join(ack.Kinds, ",") != "start,summary,close" {
		t.Fatalf("ack %+v", ack)
	}
	code, resp = f.do(t, http.MethodPost, syncwire.IngestPath, batch(row(reqID(1), t0, "org:acme/team:ml", "gpt-4o-mini", 1, 1)))
	json.Unmarshal(resp, &ack)
	if code != http.StatusOK || ack.Accepted != 1 {
		t.Fatalf("the batch after the empty one: %d %s", code, resp)
	}
	if rows := f.ledgerRows(t); len(rows) != 1 || rows[0].RequestID != reqID(1) {
		t.Errorf("the ledger holds %d rows, want the one batch's: %+v", len(rows), rows)
	}
}
