package core

import (
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// TestAdmittedRowsWaitForTheirCommit: rows admitted under a tag reach the
// fold only at Commit(tag); a concurrent duplicate waits for that tag; an
// Abort(tag) frees their request ids, so the sender's retry is recorded
// afresh, and folds nothing.
func TestAdmittedRowsWaitForTheirCommit(t *testing.T) {
	c := New(Options{})
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	mk := func() []ledger.Row {
		return []ledger.Row{
			{RequestID: "tt_aaaaaaaaaaaaaaaaaaaaaaaaaa", Start: now.Add(-time.Second), End: now, Status: 200,
				Decision: ledger.Admitted, Endpoint: "/v1/chat/completions", Model: "gpt-4o-mini", Usage: ledger.Usage{Input: 10, Output: 5, Total: 15}},
			{RequestID: "tt_aaaaaaaaaaaaaaaaaaaaaaaaab", Start: now.Add(-time.Second), End: now, Status: 200,
				Decision: ledger.Admitted, Endpoint: "/v1/chat/completions", Model: "gpt-4o-mini", Usage: ledger.Usage{Input: 10, Output: 5, Total: 15}},
		}
	}
	admit := func(tag uint64) Result {
		rows := mk()
		return c.Admit(now, rows, c.Prepare(rows, nil), tag)
	}
	steps := []struct {
		do                   func() Result
		accepted, duplicates int
		waitTag              uint64
		folded               int64
		pending              int
	}{
		{func() Result { return admit(1) }, 2, 0, 0, 0, 1},
		{func() Result { return admit(2) }, 0, 2, 1, 0, 1}, // a retry while 1 is in flight waits for 1
		{func() Result { c.Abort(1); return Result{} }, 0, 0, 0, 0, 0},
		{func() Result { return admit(3) }, 2, 0, 0, 0, 1}, // recorded afresh
		{func() Result { return c.Commit(now, 3) }, 2, 0, 0, 2, 0},
		{func() Result { return admit(4) }, 0, 2, 3, 2, 0},
		{func() Result { c.Abort(4); return admit(5) }, 0, 2, 3, 2, 0}, // aborting a tag that holds nothing frees nothing
	}
	for i, st := range steps {
		res := st.do()
		if res.Accepted != st.accepted || res.Duplicates != st.duplicates || res.WaitTag != st.waitTag {
			t.Errorf("step %d: accepted %d, duplicates %d, wait tag %d; want %d, %d, %d",
				i, res.Accepted, res.Duplicates, res.WaitTag, st.accepted, st.duplicates, st.waitTag)
		}
		if got := c.Stats().Folded; got != st.folded {
			t.Errorf("step %d: %d rows folded, want %d", i, got, st.folded)
		}
		if got := c.Pending(); got != st.pending {
			t.Errorf("step %d: %d batches pending, want %d", i, got, st.pending)
		}
	}
}
