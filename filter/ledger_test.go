package filter_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// cheap is the request the ledger tests send many of: a passthrough-free
// governed call the stub answers at once.
func (r *rig) cheap(vm int) string {
	r.t.Helper()
	resp := r.do(req{path: "/v1/embeddings", key: dev1Key, vm: vm, body: `{"model":"text-embedding-3-small","input":"hi"}`})
	if resp.Status != 200 && resp.Status != 429 {
		r.t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	return resp.Headers.Get("X-Tt-Request-Id")
}

// TestRowsInBatches: rows go to the accountant in batches from the tick;
// a backlog larger than one batch drains within one tick, batch after
// batch, so a busy VM never falls behind its queue.
func TestRowsInBatches(t *testing.T) {
	r := accountantRig(t, limTeamTPM)
	const n = 700
	ids := map[string]bool{}
	for i := 0; i < n; i++ {
		ids[r.cheap(1)] = true
	}
	r.step(500 * time.Millisecond)
	rows := r.acct.ledger()
	if len(rows) != n {
		t.Fatalf("%d rows after one tick, want all %d (batch sizes %v)", len(rows), n, r.acct.batchSizes())
	}
	for _, row := range rows {
		if !ids[row.RequestID] {
			t.Errorf("row %s was not sent by the test", row.RequestID)
		}
	}
	sizes := r.acct.batchSizes()
	if len(sizes) < 2 || sizes[len(sizes)-1] > 256 {
		t.Errorf("batch sizes %v, want batches of at most 256", sizes)
	}
	if got := r.metric("tokentriage.ledger.rows_sent"); got != n {
		t.Errorf("tokentriage.ledger.rows_sent = %d, want %d", got, n)
	}
}

// TestRowsRetried: a batch the accountant fails is sent again after a
// backoff; a batch whose acknowledgement was lost is sent again and the
// accountant keeps each row once (rows are idempotent by request id).
func TestRowsRetried(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 1})
	r.acct.set(func(a *fakeAccountant) { a.failIngest = 2 })
	var want []string
	for i := 0; i < 20; i++ {
		want = append(want, r.cheap(1))
	}
	r.wait()                       // the first row left as it ended, and failed; backoff 500 ms
	r.step(500 * time.Millisecond) // fails; backoff 1 s
	if got := len(r.acct.ledger()); got != 0 {
		t.Fatalf("%d rows recorded while the accountant failed", got)
	}
	r.step(500 * time.Millisecond) // still backing off
	r.step(time.Second)
	rows := r.acct.ledger()
	if len(rows) != len(want) {
		t.Fatalf("%d rows after the accountant recovered, want %d", len(rows), len(want))
	}
	for i, row := range rows {
		if row.RequestID != want[i] {
			t.Errorf("row %d is %s, want %s (in order)", i, row.RequestID, want[i])
		}
	}

	// Lost acknowledgements: the accountant records the batch and then the
	// answer is lost; the retry is a duplicate the accountant drops. (The
	// two rows leave together at the tick, and lose their answer; the
	// retry carries both again.)
	r.acct.set(func(a *fakeAccountant) { a.loseAcks = 1 })
	more := []string{r.cheap(1), r.cheap(1)}
	r.step(500 * time.Millisecond)
	r.step(time.Second)
	rows = r.acct.ledger()
	if len(rows) != len(want)+2 || rows[len(rows)-2].RequestID != more[0] || rows[len(rows)-1].RequestID != more[1] {
		t.Errorf("after a lost acknowledgement: %d rows", len(rows))
	}
	var dups int
	r.acct.set(func(a *fakeAccountant) { dups = a.dups })
	if dups != 2 {
		t.Errorf("the accountant saw %d duplicates, want the 2 rows whose answer was lost", dups)
	}
}

// TestRowsDroppedBeyondBound: a VM that has not heard from its accountant
// that it reads summaries (it was down from the start) keeps at most 4,096
// unacknowledged rows; beyond that rows are dropped and counted, and a
// LedgerSettled 429 says so in its bound, summed over every VM of the
// host. (An accountant that answered once gets the rows past the bound as
// summaries: TestFullQueueFoldsRowsNotDrops.)
func TestRowsDroppedBeyondBound(t *testing.T) {
	r := newSpentSearchRig(t)
	const extra = 37
	r.overfill(extra)
	r.step(500 * time.Millisecond) // each VM publishes its figures
	resp := r.do(req{path: "/v1/chat/completions", key: searchKey, body: chatGermany, vm: 3})
	mustStatus(t, resp, 429)
	want := fmt.Sprintf(`"bound":{"tee_lag_rows":%d,"dropped_rows":%d}`, 4096+5, extra)
	if !strings.Contains(string(resp.Body), want) {
		t.Errorf("429 body %s\nwant %s", resp.Body, want)
	}
	if got := r.metric("tokentriage.ledger.rows_dropped"); got != extra {
		t.Errorf("tokentriage.ledger.rows_dropped = %d, want %d", got, extra)
	}
	// The accountant hears of the drops at the next poll that reaches it.
	// The accountant comes back: every kept row arrives, once.
	rows := r.recover(40)
	var refused int
	for _, row := range rows {
		if row.Decision == ledger.Refused {
			refused++
		}
	}
	if len(rows) != 4096+5+1 || refused != 1 {
		t.Errorf("%d rows (%d refused) after recovery, want %d (1 refused)", len(rows), refused, 4096+5+1)
	}
	polls := r.acct.pollQueries()
	if last := polls[len(polls)-1]; !strings.Contains(last, fmt.Sprintf("dropped=%d", extra)) {
		t.Errorf("the last poll %q does not report the %d dropped rows", last, extra)
	}
	// Drained: the bound is back to zero.
	resp = r.do(req{path: "/v1/chat/completions", key: searchKey, body: chatGermany, vm: 2})
	if !strings.Contains(string(resp.Body), fmt.Sprintf(`"bound":{"tee_lag_rows":0,"dropped_rows":%d}`, extra)) {
		t.Errorf("429 body after recovery %s", resp.Body)
	}
}

// TestNoRowsForLocalPaths: what the filter answers itself under /tt/ (the
// caller's own /tt/v1/me, refused or not, and the 404s beside it) never
// reaches a provider and writes no ledger row; a refused provider call
// does.
func TestNoRowsForLocalPaths(t *testing.T) {
	r := accountantRig(t, limTeamTPM)
	for _, q := range []req{
		{method: "GET", path: "/tt/v1/me", key: dev1Key},
		{method: "GET", path: "/tt/v1/me"},
		{method: "GET", path: "/tt/v1/me", headers: map[string]string{"Authorization": "Bearer tt-vk_unknownkid00-secret"}},
		{method: "POST", path: "/tt/v1/me", key: dev1Key, body: "{}"},
		{method: "GET", path: "/tt/v1/other", key: dev1Key},
	} {
		r.do(q)
	}
	refused := r.do(req{path: "/v1/embeddings", body: `{"model":"text-embedding-3-small","input":"hi"}`})
	if refused.Status != 401 {
		t.Fatalf("a keyless provider call: status %d, want 401", refused.Status)
	}
	r.step(500 * time.Millisecond)
	rows := r.acct.ledger()
	if len(rows) != 1 || rows[0].RequestID != refused.Headers.Get("X-Tt-Request-Id") {
		t.Fatalf("%d rows after five /tt/ calls and one refused provider call, want only the refused call's: %+v", len(rows), rows)
	}
}

// TestRowsSentAtShutdown: when the host ends the VMs (shutdown, or a new
// plugin configuration replacing this one) the rows still queued go to the
// accountant before the root contexts go, batch after batch, without
// waiting for a tick; an accountant that keeps failing lets the VM go after
// a few attempts, the rows counted as dropped.
func TestRowsSentAtShutdown(t *testing.T) {
	t.Run("delivered", func(t *testing.T) {
		r := accountantRig(t, limTeamTPM)
		ids := map[string]bool{}
		for i := 0; i < 600; i++ {
			ids[r.cheap(1+i%3)] = true
		}
		r.wait()
		// Each VM's first row left as it ended; the rest wait (the clock
		// stands still, and sends are 50 ms apart).
		if got := len(r.acct.ledger()); got > r.h.Workers() {
			t.Fatalf("%d rows sent before any tick", got)
		}
		r.checkHealthy()
		if err := r.h.Close(); err != nil {
			t.Fatal(err)
		}
		rows := r.acct.ledger()
		if len(rows) != len(ids) {
			t.Fatalf("%d rows reached the accountant at shutdown, want %d (batches %v)", len(rows), len(ids), r.acct.batchSizes())
		}
		for _, row := range rows {
			if !ids[row.RequestID] {
				t.Errorf("row %s was not sent by the test", row.RequestID)
			}
		}
	})
	t.Run("accountant down", func(t *testing.T) {
		r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 1})
		r.acct.set(func(a *fakeAccountant) { a.failIngest = 1000 })
		for i := 0; i < 5; i++ {
			r.cheap(1)
		}
		if err := r.h.Close(); err != nil {
			t.Fatal(err)
		}
		if got := len(r.acct.ledger()); got != 0 {
			t.Fatalf("%d rows recorded by a failing accountant", got)
		}
		lost := false
		for _, l := range r.h.Logs() {
			if strings.Contains(l.Message, "ending with 5 ledger rows the accountant did not take") {
				lost = true
			}
			if strings.Contains(l.Message, "did not call proxy_done") {
				t.Errorf("the host waited out its grace: %s", l.Message)
			}
		}
		if !lost {
			t.Errorf("no log line says 5 rows were lost")
		}
	})
}

// TestServedOutOfScope: a key's model scope is re-asserted on the model
// that answered: a request for a model in scope answered by one outside it
// (a route or provider that substituted another) is flagged on its row, in
// the log and in a metric; one answered by a model in scope is not.
func TestServedOutOfScope(t *testing.T) {
	scoped := dev2Key
	scoped.scopes = `{"models":["gpt-4o*"]}`
	served := "o1"
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":%q,"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}`, served)
	})
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{scoped}, accountant: true, upstream: up})
	out := r.do(req{path: "/v1/chat/completions", key: scoped, body: chatBody("gpt-4o", germany)})
	mustStatus(t, out, 200)
	served = "gpt-4o-2024-08-06"
	in := r.do(req{path: "/v1/chat/completions", key: scoped, body: chatBody("gpt-4o", germany)})
	mustStatus(t, in, 200)
	r.step(500 * time.Millisecond)
	rows := map[string]ledger.Row{}
	for _, row := range r.acct.ledger() {
		rows[row.RequestID] = row
	}
	if row := rows[out.Headers.Get("X-Tt-Request-Id")]; !row.ServedOutOfScope || row.Served != "o1" {
		t.Errorf("answered by o1: row %+v, want served_out_of_scope", row)
	}
	if row := rows[in.Headers.Get("X-Tt-Request-Id")]; row.ServedOutOfScope {
		t.Errorf("answered by a model in scope: row flagged: %+v", row)
	}
	if got := r.metric("tokentriage.served_out_of_scope"); got != 1 {
		t.Errorf("tokentriage.served_out_of_scope = %d, want 1", got)
	}
}

// TestRowsLeaveInBatchesByTimeAndCount: a finished request's row waits
// for others: once batchMin rows wait and the oldest has waited batchWait
// (a tenth of the flush interval: 50 ms here) they leave with the next
// request to end, without waiting for a tick; fewer wait for the tick; a
// whole batch leaves at once, however little time passed. So at a low
// rate a batch carries several rows, not one each (each batch is a
// callout, an ingest and an fsync), and a crash loses at most batchMin
// rows or the rows of one flush interval.
func TestRowsLeaveInBatchesByTimeAndCount(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov("", `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 1})
	r.sync()
	var ids []string
	chat := func() {
		resp := r.chat(dev1Key, chatGermany)
		mustStatus(t, resp, 200)
		ids = append(ids, resp.Headers.Get("X-Tt-Request-Id"))
		r.wait()
	}
	for i := 0; i < 3; i++ {
		chat()
	}
	// The clock stands still: none has waited 50 ms.
	if n := len(r.acct.ledger()); n != 0 {
		t.Fatalf("%d rows sent before any waited batchWait", n)
	}
	// 50 ms later a request ends: four rows are fewer than batchMin, so
	// they wait on.
	r.clock.Advance(50 * time.Millisecond)
	chat()
	if n := len(r.acct.ledger()); n != 0 {
		t.Fatalf("%d rows sent before batchMin (%d) waited", n, batchMinRows)
	}
	// The request that makes batchMin sends them all, in one batch,
	// before any tick.
	for len(ids) < batchMinRows {
		chat()
	}
	for _, id := range ids {
		if _, ok := r.acct.row(id); !ok {
			t.Errorf("row %s did not leave with the request that made %d", id, batchMinRows)
		}
	}
	if sizes := r.acct.batchSizes(); len(sizes) != 1 || sizes[0] != batchMinRows {
		t.Errorf("batches %v, want one of %d rows", sizes, batchMinRows)
	}
	// A whole batch leaves at once, the clock still standing.
	for i := 0; i < batchRows; i++ {
		r.cheap(1)
	}
	r.wait()
	if sizes := r.acct.batchSizes(); len(sizes) != 2 || sizes[1] != batchRows {
		t.Errorf("batches %v after %d more rows, want a second of %d", sizes, batchRows, batchRows)
	}
	// Fewer than batchMin more rows wait for the tick.
	var last []string
	for i := 0; i < 3; i++ {
		last = append(last, r.cheap(1))
	}
	r.wait()
	for _, id := range last {
		if _, ok := r.acct.row(id); ok {
			t.Errorf("row %s left before the tick with fewer than batchMin rows waiting", id)
		}
	}
	r.step(500 * time.Millisecond)
	for _, id := range last {
		if _, ok := r.acct.row(id); !ok {
			t.Errorf("the tick did not send row %s", id)
		}
	}
	if failed, why := r.h.Failed(1); failed {
		t.Fatal(why)
	}
}

// batchMinRows is the filter's batchMin (filter/ledgerq.go).
const batchMinRows = 8

// batchRows is the filter's rows per batch (filter/ledgerq.go).
const batchRows = 256
