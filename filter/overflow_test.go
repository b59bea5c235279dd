package filter_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// requestsIn sums the requests the recorded rows stand for (a summary
// counts as its count; a start row as none).
func requestsIn(rows []ledger.Row) (requests int64) {
	for i := range rows {
		requests += rows[i].Requests()
	}
	return requests
}

// recover brings the accountant back and runs steps ticks of 500 ms; it
// returns the rows recorded.
func (r *rig) recover(steps int) []ledger.Row {
	r.acct.set(func(a *fakeAccountant) { a.down = false })
	for i := 0; i < steps; i++ {
		r.step(500 * time.Millisecond)
	}
	return r.acct.ledger()
}

// logged returns the host's log lines that contain s.
func (r *rig) logged(s string) []string {
	var out []string
	for _, l := range r.h.Logs() {
		if strings.Contains(l.Message, s) {
			out = append(out, l.Message)
		}
	}
	return out
}

// newSpentSearchRig is a rig with an accountant whose snapshot has
// team:search far past its month's budget (refused at once, settled by the
// ledger), and a team tpm limit out of reach.
func newSpentSearchRig(t *testing.T) *rig {
	lims := `{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":100000000,"burst":100000000,"period":"1m"},
		{"id":"search_month","attach":{"node":"org:acme/team:search"},"type":"budget_usd","amount_usd":0.000001,"period":"month"}`
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key, searchKey}, accountant: true,
		acct: func(a *fakeAccountant) {
			a.setSnapshot("s1", syncwire.Entry{ID: "search_month|budget_usd|org:acme/team:search||month|", PeriodStart: monthStart(), Value: 5000})
		}})
	r.sync()
	return r
}

// overfill takes the accountant down, then serves 4,096+extra cheap calls
// on VM 1, past the most its queue keeps, and 5 on VM 2.
func (r *rig) overfill(extra int) {
	r.acct.set(func(a *fakeAccountant) { a.down = true })
	for i := 0; i < 4096+extra; i++ {
		r.cheap(1)
	}
	for i := 0; i < 5; i++ {
		r.cheap(2)
	}
}

// holdingUpstream answers a chat completion at once, but holds a request
// with an X-Hold header: it signals entered (buffered for that many held
// calls) and waits for release to be closed.
func holdingUpstream(held int) (up http.Handler, release, entered chan struct{}) {
	release, entered = make(chan struct{}), make(chan struct{}, held)
	up = http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		if q.Header.Get("X-Hold") != "" {
			entered <- struct{}{}
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}`)
	})
	return up, release, entered
}

// TestFullQueueFoldsRowsNotDrops: with the accountant away (it answered
// once, so the VM knows it reads summaries), a VM's queue fills at 4,096
// rows; the rows past it are folded into totals, never dropped: the 429
// bound counts them as not yet acknowledged with dropped_rows 0, the log
// says what happened in words that mean it, and once the accountant is
// back every request served reaches it, the totals as summary rows, each
// counting its requests, and the usage adds up to what was served. Before,
// the 37 rows past the bound were dropped for good.
func TestFullQueueFoldsRowsNotDrops(t *testing.T) {
	r := newSpentSearchRig(t)
	for vm := 1; vm <= 3; vm++ {
		r.cheap(vm)
	}
	r.step(500 * time.Millisecond) // every VM has an answer: it knows the accountant reads summaries
	served := int64(3)
	const extra = 37
	r.overfill(extra)
	served += 4096 + extra + 5
	if got := r.metric("tokentriage.ledger.rows_queued"); got != 4096+extra+5 {
		t.Errorf("tokentriage.ledger.rows_queued = %d before any tick, want the %d requests held", got, 4096+extra+5)
	}
	r.step(500 * time.Millisecond) // each VM publishes its figures, and logs
	resp := r.do(req{path: "/v1/chat/completions", key: searchKey, body: chatGermany, vm: 3})
	mustStatus(t, resp, 429)
	served++ // a refused call is a row too
	want := fmt.Sprintf(`"bound":{"tee_lag_rows":%d,"dropped_rows":0}`, 4096+extra+5)
	if !strings.Contains(string(resp.Body), want) {
		t.Errorf("429 body %s\nwant %s", resp.Body, want)
	}
	if got := r.metric("tokentriage.ledger.rows_dropped"); got != 0 {
		t.Errorf("tokentriage.ledger.rows_dropped = %d, want 0", got)
	}
	if got := r.metric("tokentriage.ledger.rows_folded"); got != extra {
		t.Errorf("tokentriage.ledger.rows_folded = %d, want %d", got, extra)
	}
	lines := r.logged("the queue to the accountant was full")
	if len(lines) != 1 || !strings.Contains(lines[0], "37 rows were folded into overflow totals") ||
		!strings.Contains(lines[0], "now 4133 requests wait for the accountant (4096 queued rows, 37 in totals)") || strings.Contains(lines[0], "the most it keeps") {
		t.Errorf("log lines %q", lines)
	}

	rows := r.recover(20)
	var summaries int
	for _, row := range rows {
		if row.Kind == ledger.KindSummary {
			summaries++
		}
	}
	requests := requestsIn(rows)
	if requests != served || summaries != 1 {
		t.Errorf("the accountant holds %d requests in %d rows (%d summaries), want all %d served (one summary)", requests, len(rows), summaries, served)
	}
	// Each embeddings call of the stub uses 1 input token: the admitted
	// requests' input adds up to their number, summaries included.
	var admitted, admittedIn int64
	for _, row := range rows {
		if row.Decision == ledger.Admitted {
			admitted += row.Requests()
			admittedIn += row.Usage.Input
		}
	}
	if admitted != served-1 || admittedIn != admitted {
		t.Errorf("%d admitted requests with %d input tokens, want %d and as many tokens", admitted, admittedIn, served-1)
	}
	resp = r.do(req{path: "/v1/chat/completions", key: searchKey, body: chatGermany, vm: 2})
	if !strings.Contains(string(resp.Body), `"bound":{"tee_lag_rows":0,"dropped_rows":0}`) {
		t.Errorf("429 body after recovery %s", resp.Body)
	}
}

// TestDropsOnlyPastTheTotalsAndLoud: rows are dropped only when the queue
// and the totals are both full (1,024 groups: here a flood of distinct
// models while the accountant is away); a drop is counted, logged, and for
// thirty seconds after it the host's spend limits are uncheckable: a fail:
// closed + hard one answers 503 naming the drops, a fail: open one admits
// and is listed as suspended.
func TestDropsOnlyPastTheTotalsAndLoud(t *testing.T) {
	closed := `{"id":"org_budget","attach":{"node":"org:acme/team:ml"},"type":"budget_usd","amount_usd":1000,"period":"month","posture":{"mode":"on","enforce":"hard","fail":"closed"}}`
	open := `{"id":"team_budget","attach":{"level":"user"},"type":"budget_usd","amount_usd":1000,"period":"month"}`
	r := newRig(t, rigOptions{governance: gov(closed+","+open, `,"require_key":true`), keys: []testKey{dev1Key, searchKey}, accountant: true, workers: 1})
	r.acct.setSnapshot("s1")
	r.sync()
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	r.step(500 * time.Millisecond) // acknowledged: the VM knows the accountant reads summaries
	r.acct.set(func(a *fakeAccountant) { a.down = true; a.heartbeat = false })
	for i := 0; i < 4096+1024+3; i++ {
		resp := r.do(req{path: "/v1/embeddings", key: searchKey, body: fmt.Sprintf(`{"model":"m-%d","input":"hi"}`, i)})
		if resp.Status != 200 {
			t.Fatalf("request %d: %d %s", i, resp.Status, resp.Body)
		}
	}
	if n := r.metric("tokentriage.ledger.rows_dropped"); n != 3 {
		t.Fatalf("rows_dropped = %d with the queue and 1,024 totals full, want 3", n)
	}
	r.acct.set(func(a *fakeAccountant) { a.down = false; a.heartbeat = true })
	r.step(time.Second) // the tick logs the drop; the snapshot is fresh again
	r.step(0)
	if got := r.logged("rows were dropped"); len(got) != 1 || !strings.Contains(got[0], "3 rows were dropped (3 in all)") {
		t.Fatalf("drop log lines %q", got)
	}
	resp := r.chat(dev1Key, chatGermany)
	if resp.Status != 503 || !strings.Contains(string(resp.Body), "dropped ledger rows") || resp.Headers.Get("X-Tt-Refused-By") != "org_budget" {
		t.Fatalf("a fail-closed budget while rows were dropped: %d %v %s", resp.Status, resp.Headers, resp.Body)
	}
	if lim := r.meLimit(dev1Key, "team_budget"); lim["suspended"] != true {
		t.Errorf("/tt/v1/me shows team_budget %v, want suspended", lim)
	}
	// Thirty seconds after the last drop the counters are trusted again.
	for i := 0; i < 4; i++ {
		r.sync()
		r.step(7 * time.Second)
	}
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
}

// TestStuckQueueDistrustsSpend: an accountant that answers its syncs but
// refuses every batch (its disk full, say) leaves the VM's rows
// unacknowledged; once the oldest has waited thirty seconds the spend
// counters cannot vouch for what the gateway served: a fail: open budget
// is suspended (on /tt/v1/me and the rows), a fail: closed + hard one
// answers 503 saying why, and a counter already over its cap is refused
// with a bound that says for how long rows have waited. Before, the
// limits kept answering from counters that missed every row since.
func TestStuckQueueDistrustsSpend(t *testing.T) {
	closed := `{"id":"org_budget","attach":{"level":"org"},"type":"budget_usd","amount_usd":1000,"period":"month","posture":{"mode":"on","enforce":"hard","fail":"closed"}}`
	open := `{"id":"team_budget","attach":{"level":"team"},"type":"budget_usd","amount_usd":1000,"period":"month"}`
	over := `{"id":"search_month","attach":{"node":"org:acme/team:search"},"type":"budget_usd","amount_usd":0.000001,"period":"month"}`
	r := newRig(t, rigOptions{governance: gov(closed+","+open+","+over, `,"require_key":true`), keys: []testKey{dev1Key, searchKey}, accountant: true, workers: 1,
		acct: func(a *fakeAccountant) {
			a.setSnapshot("s1", syncwire.Entry{ID: "search_month|budget_usd|org:acme/team:search||month|", PeriodStart: monthStart(), Value: 5000})
		}})
	r.sync()
	r.acct.set(func(a *fakeAccountant) { a.failIngest = 1 << 30 })
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	for i := 0; i < 3; i++ {
		r.sync()
		r.step(8 * time.Second)
	}
	if lim := r.meLimit(dev1Key, "team_budget"); lim["suspended"] == true {
		t.Fatalf("suspended after 27 s: %v", lim)
	}
	r.sync()
	r.step(4 * time.Second) // the row has waited 32 s
	resp := r.chat(dev1Key, chatGermany)
	if resp.Status != 503 || !strings.Contains(string(resp.Body), "holds ledger rows the accountant has not taken for") {
		t.Fatalf("a fail-closed budget with a stuck queue: %d %s", resp.Status, resp.Body)
	}
	if lim := r.meLimit(dev1Key, "team_budget"); lim["suspended"] != true {
		t.Errorf("/tt/v1/me shows team_budget %v, want suspended", lim)
	}
	resp = r.do(req{path: "/v1/chat/completions", key: searchKey, body: chatGermany})
	mustStatus(t, resp, 429)
	if !strings.Contains(string(resp.Body), `"dropped_rows":0,"unacked_for_s":32`) {
		t.Errorf("the 429 bound does not say the queue is stuck: %s", resp.Body)
	}
	// The accountant takes rows again: trusted at once.
	r.acct.set(func(a *fakeAccountant) { a.failIngest = 0 })
	for i := 0; i < 12; i++ { // the longest backoff is 10 s
		r.step(time.Second)
	}
	r.sync()
	if lim := r.meLimit(dev1Key, "team_budget"); lim["suspended"] == true {
		t.Errorf("still suspended once every row was taken: %v; %d rows recorded, %d failed, %s", lim, len(r.acct.ledger()), r.acct.failed,
			r.do(req{path: "/v1/chat/completions", key: searchKey, body: chatGermany}).Body)
	}
}

// TestHugeModelNameNeverJams: 24 requests naming a model of 512 KiB are
// refused 400 at gate 2 naming the bound of a model name, and their rows
// carry the name cut to that bound, so the rows of those 24 requests and
// of the 34 after them are all recorded. Before, the rows carried the
// whole name, a batch was refused whole with 413 and sent again forever:
// 0 of the next 34 rows were recorded.
func TestHugeModelNameNeverJams(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 1,
		acct: func(a *fakeAccountant) { a.maxBody = 4 << 20 }})
	r.sync()
	huge := strings.Repeat("m", 512<<10)
	for i := 0; i < 24; i++ {
		resp := r.do(req{path: "/v1/embeddings", key: dev1Key, body: `{"model":"` + huge + `","input":"hi"}`})
		if resp.Status != 400 || !strings.Contains(string(resp.Body), "over the 256-byte bound of a model") {
			t.Fatalf("a huge model: %d %.200s", resp.Status, resp.Body)
		}
	}
	var later []string
	for i := 0; i < 34; i++ {
		later = append(later, r.cheap(1))
	}
	for i := 0; i < 4; i++ {
		r.step(500 * time.Millisecond)
	}
	rows := r.acct.ledger()
	if len(rows) != 24+34 {
		t.Fatalf("%d rows recorded, want %d (%d batches refused whole)", len(rows), 24+34, r.acct.tooLarge)
	}
	for _, id := range later {
		if _, ok := r.acct.row(id); !ok {
			t.Errorf("row %s after the huge ones is missing", id)
		}
	}
	for _, row := range rows[:24] {
		if len(row.Model) != 256 || row.Status != 400 {
			t.Fatalf("a huge model's row: model of %d bytes, status %d", len(row.Model), row.Status)
		}
	}
}

// TestBatchRefusedWholeIsSplit: a batch refused whole as too large (a
// proxy between the gateway and the accountant with a small body limit)
// is sent again in halves at once until each fits, so every row is
// recorded; a lone row refused whole twice is quarantined (logged with its
// request id and counted) and the rows behind it go on.
func TestBatchRefusedWholeIsSplit(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 1,
		acct: func(a *fakeAccountant) { a.maxBody = 8 << 10 }})
	r.sync()
	var ids []string
	for i := 0; i < 100; i++ {
		ids = append(ids, r.cheap(1))
	}
	r.step(500 * time.Millisecond)
	if got := len(r.acct.ledger()); got != 100 {
		t.Fatalf("%d of 100 rows recorded after splitting (%d refused whole, batches %v)", got, r.acct.tooLarge, r.acct.batchSizes())
	}
	// A row larger than the proxy takes alone: quarantined after two
	// refusals; the rows behind it are recorded.
	// (Its customer and tags, at their bounds, make it over 1,000 bytes.)
	tags := make([]string, 16)
	for i := range tags {
		tags[i] = strings.Repeat("t", 60) + strconv.Itoa(i)
	}
	big := r.do(req{path: "/v1/embeddings", key: dev1Key, body: `{"model":"` + strings.Repeat("x", 250) + `","input":"hi"}`,
		headers: map[string]string{"X-Tt-Customer": strings.Repeat("c", 256), "X-Tt-Tags": strings.Join(tags, ",")}})
	bigID := big.Headers.Get("X-Tt-Request-Id")
	r.acct.set(func(a *fakeAccountant) { a.maxBody = 1000 })
	after := r.cheap(1)
	for i := 0; i < 6; i++ {
		r.step(500 * time.Millisecond)
	}
	if _, ok := r.acct.row(after); !ok {
		t.Fatalf("the row behind a row refused alone is not recorded (refused whole %d times)", r.acct.tooLarge)
	}
	if _, ok := r.acct.row(bigID); ok {
		t.Fatal("the oversized row was recorded")
	}
	if got := r.metric("tokentriage.ledger.rows_quarantined"); got != 1 {
		t.Errorf("tokentriage.ledger.rows_quarantined = %d, want 1", got)
	}
	if lines := r.logged("ledger: quarantined row " + bigID); len(lines) != 1 {
		t.Errorf("no log line quarantines %s: %q", bigID, r.logged("quarantined"))
	}
}

// TestUnauthenticatedRefusalsSampled: a flood of requests without a valid
// key writes ten rows a second per VM; the rest are summed into summary
// rows, so the accountant still counts every refusal, by error type and
// endpoint. Before, each wrote a ~515-byte row (154,105 in 25 s).
func TestUnauthenticatedRefusalsSampled(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 1})
	r.sync()
	r.cheap(1)
	r.step(500 * time.Millisecond) // acknowledged: the VM knows the accountant reads summaries
	stranger := newTestKey("vk_strangerstra", "org:acme")
	const flood = 2000
	for i := 0; i < flood; i++ {
		path := "/v1/embeddings"
		if i%2 == 0 {
			path = "/v1/chat/completions"
		}
		if resp := r.do(req{path: path, key: stranger, body: chatGermany}); resp.Status != 401 {
			t.Fatalf("request %d: %d", i, resp.Status)
		}
	}
	r.step(time.Second)
	r.step(time.Second)
	var rows, summaries int
	var refused int64
	for _, row := range r.acct.ledger() {
		if row.Decision != ledger.Refused {
			continue
		}
		rows++
		refused += row.Requests()
		if row.Kind == ledger.KindSummary {
			summaries++
			if row.KID != "" || row.ErrorType != "unauthorized" || row.Status != 401 {
				t.Errorf("summary %+v", row)
			}
		}
	}
	if refused != flood || rows > 10+2 || summaries != 2 {
		t.Errorf("%d refusals in %d rows (%d summaries), want all %d in at most 12 rows (2 summaries, one per endpoint)", refused, rows, summaries, flood)
	}
	if got := r.metric("tokentriage.ledger.refusals_summed"); got != flood-10 {
		t.Errorf("tokentriage.ledger.refusals_summed = %d, want %d", got, flood-10)
	}
}

// TestStartRowsForCallsInFlight: a call still in flight when its VM sends
// a batch has a start row in it (its reserved estimate and the lease_ttl),
// so a proxy that dies before the end leaves the call on record; a call
// that ends before the next batch leaves needs none. An accountant from
// before start rows (its answers name no kinds) gets none.
func TestStartRowsForCallsInFlight(t *testing.T) {
	up, release, entered := holdingUpstream(1)
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 1, upstream: up,
		extra: []string{`"lease_ttl":"5s"`}})
	r.sync()
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	r.step(500 * time.Millisecond) // acknowledged: the accountant reads start rows
	done := make(chan string)
	go func() {
		resp := r.chat(dev1Key, chatBody("gpt-4o-mini", germany, `,"max_tokens":50`), "X-Hold", "1")
		done <- resp.Headers.Get("X-Tt-Request-Id")
	}()
	<-entered
	short := r.chat(dev1Key, chatGermany) // ends before the next batch: no start row
	r.step(500 * time.Millisecond)
	var starts []ledger.Row
	r.acct.set(func(a *fakeAccountant) {
		for _, s := range a.starts {
			starts = append(starts, s)
		}
	})
	if len(starts) != 1 {
		t.Fatalf("%d start rows, want the one call in flight's", len(starts))
	}
	s := starts[0]
	if s.RequestID == short.Headers.Get("X-Tt-Request-Id") || s.LeaseTTLMS != 5000 || s.Usage.Output != 50 || s.Usage.Input != 8 ||
		!s.Estimated.Input || !s.Estimated.Output || s.Decision != ledger.Admitted || s.Model != "gpt-4o-mini" {
		t.Errorf("start row %+v", s)
	}
	close(release)
	id := <-done
	r.step(500 * time.Millisecond)
	if id != s.RequestID {
		t.Errorf("the start row is %s, the held call %s", s.RequestID, id)
	}
	if row, ok := r.acct.row(id); !ok || row.Kind != ledger.KindEnd || row.Usage.Input != 8 {
		t.Errorf("the end of the held call: %+v %v", row, ok)
	}
	if n := r.metric("tokentriage.ledger.starts_sent"); n != 1 {
		t.Errorf("tokentriage.ledger.starts_sent = %d", n)
	}
}

// TestNoStartRowsForAnOlderAccountant: an accountant whose answers name
// no row kinds is sent neither start rows nor summaries: it would count a
// start as a request.
func TestNoStartRowsForAnOlderAccountant(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 1,
		acct: func(a *fakeAccountant) { a.kinds = nil }})
	r.sync()
	stranger := newTestKey("vk_strangerstra", "org:acme")
	for i := 0; i < 50; i++ {
		r.do(req{path: "/v1/embeddings", key: stranger, body: chatGermany})
	}
	r.step(500 * time.Millisecond)
	for i := 0; i < 50; i++ {
		r.do(req{path: "/v1/embeddings", key: stranger, body: chatGermany})
	}
	r.step(500 * time.Millisecond)
	rows := r.acct.ledger()
	if len(rows) != 100 {
		t.Errorf("%d rows, want 100 (one per refusal: this accountant reads no summaries)", len(rows))
	}
}

// TestStartRowsOfAVMWithNoAnswerYet: the start of a call in flight on a
// VM that has had no answer to a batch yet (its other calls, if any, all
// still running) reaches the accountant within a flush: the VM asks which
// row kinds the accountant reads with an empty batch, then sends the
// start. Before, a VM learnt the kinds only from the answer to a batch of
// rows, so with nothing ended on it, its calls' starts never left: the
// other VM of a replica had served a call and sent the starts of its
// calls, this one's two long streams had none, and a kill lost them.
func TestStartRowsOfAVMWithNoAnswerYet(t *testing.T) {
	up, release, entered := holdingUpstream(4)
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 2, upstream: up,
		extra: []string{`"lease_ttl":"6s"`}})
	r.sync()
	// VM 1 serves a call: its batch's answer tells it the kinds. VM 2 has
	// served nothing.
	mustStatus(t, r.do(req{path: "/v1/chat/completions", key: dev1Key, body: chatGermany, vm: 1}), 200)
	r.step(500 * time.Millisecond)
	held := func(vm int) {
		go r.do(req{path: "/v1/chat/completions", key: dev1Key, body: chatBody("gpt-4o-mini", germany, `,"max_tokens":50`),
			headers: map[string]string{"X-Hold": "1"}, vm: vm})
		<-entered
	}
	held(1)
	held(2)
	held(2)
	r.step(500 * time.Millisecond) // VM 2 asks, and sends the starts with the answer
	var n int
	r.acct.set(func(a *fakeAccountant) { n = len(a.starts) })
	if n != 3 {
		t.Fatalf("%d start rows, want the 3 calls in flight's (tokentriage.ledger.starts_sent %d)", n, r.metric("tokentriage.ledger.starts_sent"))
	}
	var empty int
	r.acct.set(func(a *fakeAccountant) {
		for _, b := range a.batches {
			if len(b) == 0 {
				empty++
			}
		}
	})
	if empty != 1 {
		t.Errorf("%d empty batches, want the one ask of VM 2", empty)
	}
	// Renewed a third of lease_ttl later, with no more asks.
	r.step(2 * time.Second)
	if n := r.metric("tokentriage.ledger.starts_sent"); n != 6 {
		t.Errorf("tokentriage.ledger.starts_sent = %d, want 6 (3 starts, sent again after lease_ttl/3)", n)
	}
	close(release)
	r.step(500 * time.Millisecond)
	r.acct.set(func(a *fakeAccountant) {
		empty = 0
		for _, b := range a.batches {
			if len(b) == 0 {
				empty++
			}
		}
	})
	if empty != 1 {
		t.Errorf("%d empty batches, want the one ask of VM 2", empty)
	}
}

// TestAnOlderAccountantIsAskedOnce: a VM with a call in flight and no
// answer yet asks the accountant once; one from before start rows (its
// answer names no kinds) is sent no start, and not asked again.
func TestAnOlderAccountantIsAskedOnce(t *testing.T) {
	up, release, entered := holdingUpstream(1)
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 1, upstream: up,
		extra: []string{`"lease_ttl":"3s"`}, acct: func(a *fakeAccountant) { a.kinds = nil; a.failIngest = 1 }})
	r.sync()
	done := make(chan struct{})
	go func() {
		r.chat(dev1Key, chatGermany, "X-Hold", "1")
		close(done)
	}()
	<-entered
	// The first ask fails (503): asked again after a backoff.
	for i := 0; i < 10; i++ {
		r.step(500 * time.Millisecond)
	}
	var batches, failed, starts int
	r.acct.set(func(a *fakeAccountant) { batches, failed, starts = len(a.batches), a.failed, len(a.starts) })
	if failed != 1 || batches != 1 || starts != 0 {
		t.Errorf("%d asks failed, %d answered, %d start rows; want 1 failed, 1 answered (no kinds: no start, no more asks), 0 start rows", failed, batches, starts)
	}
	if l := r.logged("asking the accountant which ledger row kinds it reads"); len(l) != 1 {
		t.Errorf("the failed ask is logged %d times: %q", len(l), l)
	}
	close(release)
	<-done
	r.step(500 * time.Millisecond)
	r.acct.set(func(a *fakeAccountant) { batches, starts = len(a.batches), len(a.starts) })
	if batches != 2 || starts != 0 || len(r.acct.ledger()) != 1 {
		t.Errorf("%d batches, %d start rows, %d rows; want the ask, the end's batch, no start", batches, starts, len(r.acct.ledger()))
	}
}

// TestTotalsOutliveAnAccountantThatStopsReadingThem: totals wait while an
// accountant that read summaries is away, and it comes back as one that
// does not (a rollback): the totals leave at its first answer, the rows
// that end after it are queued as rows, and none is dropped.
func TestTotalsOutliveAnAccountantThatStopsReadingThem(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, workers: 1})
	r.sync()
	r.cheap(1)
	r.step(500 * time.Millisecond) // the VM knows the accountant reads summaries
	r.acct.set(func(a *fakeAccountant) { a.down = true })
	for i := 0; i < 4096+10; i++ {
		r.cheap(1)
	}
	if got := r.metric("tokentriage.ledger.rows_folded"); got != 10 {
		t.Fatalf("%d rows folded, want 10", got)
	}
	// Back, older: its first answer names no kinds. Rows keep coming.
	r.acct.set(func(a *fakeAccountant) { a.down, a.kinds = false, nil })
	var after []string
	for i := 0; i < 20; i++ {
		r.step(500 * time.Millisecond)
		after = append(after, r.cheap(1))
	}
	for i := 0; i < 20; i++ {
		r.step(500 * time.Millisecond)
	}
	if n := r.metric("tokentriage.ledger.rows_dropped"); n != 0 {
		t.Errorf("%d rows dropped", n)
	}
	for _, id := range after {
		if _, ok := r.acct.row(id); !ok {
			t.Errorf("row %s, which ended after the accountant came back, is missing", id)
		}
	}
	if got := requestsIn(r.acct.ledger()); got != 1+4096+10+20 {
		t.Errorf("%d requests recorded, want %d", got, 1+4096+10+20)
	}
}
