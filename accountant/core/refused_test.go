package core

import (
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// A refused row was never forwarded: it is recorded without a cost and is
// not reported as UNPRICED, while a forwarded row of an unknown model is.
func TestRefusedRowsAreNotPriced(t *testing.T) {
	c := New(Options{})
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	rows := []ledger.Row{
		{RequestID: "tt_aaaaaaaaaaaaaaaaaaaaaaaaaa", Start: now.Add(-time.Second), End: now, Status: 429,
			Decision: ledger.Refused, ErrorType: "rate_limited", Endpoint: "/v1/chat/completions"},
		{RequestID: "tt_aaaaaaaaaaaaaaaaaaaaaaaaab", Start: now.Add(-time.Second), End: now, Status: 200,
			Decision: ledger.Admitted, Endpoint: "/v1/chat/completions", Model: "no-such-model",
			Usage: ledger.Usage{Input: 10, Output: 5, Total: 15}},
	}
	res := c.Ingest(now, rows, 1)
	if res.Accepted != 2 || res.Unpriced != 1 {
		t.Fatalf("accepted %d, unpriced %d; want 2 and 1 (the forwarded unknown model only)", res.Accepted, res.Unpriced)
	}
	if rows[0].Cost != nil {
		t.Errorf("refused row priced: %+v", *rows[0].Cost)
	}
	if rows[1].Cost == nil || !rows[1].Cost.Unpriced {
		t.Errorf("forwarded unknown-model row: cost %+v, want UNPRICED", rows[1].Cost)
	}
}

// A free passthrough row (the model list, forwarded ungoverned) is
// recorded, left unpriced and folded into no counter; an admitted row
// beside it is. (A passthrough row that is not free counts for
// quota_requests: testdata/passthrough.txt.)
func TestFreeRowsAreRecordedNotFolded(t *testing.T) {
	c := New(Options{})
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	rows := []ledger.Row{
		{RequestID: "tt_aaaaaaaaaaaaaaaaaaaaaaaaaa", Start: now.Add(-time.Second), End: now, Status: 200,
			Decision: ledger.Passthrough, Endpoint: "/v1/models", Free: true},
		{RequestID: "tt_aaaaaaaaaaaaaaaaaaaaaaaaab", Start: now.Add(-time.Second), End: now, Status: 200,
			Decision: ledger.Admitted, Endpoint: "/v1/chat/completions", Model: "gpt-4o-mini",
			Usage: ledger.Usage{Input: 10, Output: 5, Total: 15}},
	}
	res := c.Ingest(now, rows, 1)
	if res.Accepted != 2 || res.Unpriced != 0 || res.Rejected != 0 {
		t.Fatalf("accepted %d, unpriced %d, rejected %d; want 2, 0, 0", res.Accepted, res.Unpriced, res.Rejected)
	}
	if rows[0].Cost != nil {
		t.Errorf("passthrough row priced: %+v", *rows[0].Cost)
	}
	if st := c.Stats(); st.Folded != 1 || st.Passthrough != 1 {
		t.Errorf("folded %d, passthrough %d; want 1 and 1", st.Folded, st.Passthrough)
	}
}
