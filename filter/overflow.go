package filter

import (
	"math"
	"time"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// When a VM's queue to the accountant is full (the accountant away, or
// slower than the traffic), a finished request's row is not dropped: it is
// folded into a total of its group (same key, node, endpoint, provider,
// models, decision, status, flags and lists, ending in the same quarter
// of an hour), and the totals reach the accountant as summary rows
// (ledger.KindSummary) once the queue has room again. A summary counts as
// its requests everywhere (spend, quotas, reports, preview), so spend
// equals what was served however long the accountant was away; a group
// of one is sent as the request's own row. A total is a few hundred
// bytes, so a VM keeps maxTotals of them; only past that (a flood of
// distinct models while the accountant is away) is a row dropped and
// counted in dropped_rows.
//
// The same totals sum a VM's unauthenticated refusals (401) past
// unauthPerSecond a second: the first few each second are written as rows
// (with the key id and path the caller sent), the rest summed per error
// type, status and endpoint, and queued once a second.
const (
	maxTotals = 1024
	// totalSlot is the span of end times one total covers: a quarter of an
	// hour, so a summary never straddles the boundary of a calendar period
	// in any time zone.
	totalSlot = 15 * 60
	// unauthPerSecond is how many unauthenticated refusals a VM writes as
	// rows of their own each second; maxUnauthGroups bounds their totals
	// (past it, the endpoint is left out of the group too).
	unauthPerSecond = 10
	maxUnauthGroups = 16
)

// total is the sum of the rows of one group.
type total struct {
	key   string
	row   ledger.Row // the group's members; usage summed, start the first, end the last
	count int64      // requests
	at    int64      // when the first was folded (unix ns)
}

// totals are the groups a VM folded rows into, in the order they began.
type totals struct {
	m     map[string]*total
	order []*total
	reqs  int64  // requests in all groups
	key   []byte // scratch
}

func (t *totals) len() int { return len(t.order) }

// oldest is when the first request of the oldest group was folded (unix
// ns), 0 when there are none.
func (t *totals) oldest() int64 {
	if len(t.order) == 0 {
		return 0
	}
	return t.order[0].at
}

// add folds r into its group, creating it when fewer than limit groups
// exist; false when the group does not exist and cannot be made.
func (t *totals) add(r *ledger.Row, now time.Time, limit int) bool {
	k := t.groupKey(r)
	g := t.m[string(k)]
	if g == nil {
		if len(t.order) >= limit {
			return false
		}
		if t.m == nil {
			t.m = map[string]*total{}
		}
		g = &total{key: string(k), row: cloneRow(r), at: now.UnixNano()}
		g.row.Usage = ledger.Usage{}
		t.m[g.key] = g
		t.order = append(t.order, g)
	} else {
		g.row.Start = minTime(g.row.Start, r.Start)
		if r.End.After(g.row.End) {
			g.row.End = r.End
		}
	}
	n := r.Requests()
	g.count = addCount(g.count, n)
	t.reqs = addCount(t.reqs, n)
	u, v := &g.row.Usage, r.Usage
	u.Input, u.Output = addCount(u.Input, v.Input), addCount(u.Output, v.Output)
	u.CachedInput, u.Reasoning = addCount(u.CachedInput, v.CachedInput), addCount(u.Reasoning, v.Reasoning)
	u.Total = addCount(u.Total, v.Total)
	return true
}

// pop takes the oldest group out.
func (t *totals) pop() *total {
	g := t.order[0]
	t.order[0] = nil
	t.order = t.order[1:]
	if len(t.order) == 0 {
		t.order = t.order[:0:0]
	}
	delete(t.m, g.key)
	t.reqs -= g.count
	return g
}

// groupKey is what rows of one group share: the row as encoded without
// its request id, times, usage and cost, and the quarter of an hour it
// ended in.
func (t *totals) groupKey(r *ledger.Row) []byte {
	k := *r
	k.RequestID, k.Start, k.End, k.Usage, k.Cost, k.Count = "", time.Time{}, time.Time{}, ledger.Usage{}, nil, 0
	if k.Kind == ledger.KindSummary {
		k.Kind = ledger.KindEnd // a summary merges with the rows of its group
	}
	t.key = k.AppendJSON(t.key[:0])
	return appendInt(t.key, r.End.Unix()/totalSlot)
}

// summary is the group as a row: the request's own row when the group is
// one request, else a summary row under a request id of its own.
func (g *total) summary(newID func() string) ledger.Row {
	r := g.row
	if g.count == 1 && r.Kind != ledger.KindSummary {
		return r
	}
	r.RequestID, r.Kind, r.Count = newID(), ledger.KindSummary, g.count
	return r
}

// queueTotal queues a group taken out of the totals as its row.
func (e *Engine) queueTotal(g *total, now time.Time) {
	r := g.summary(e.newRequestID)
	q := &e.rows
	q.data = append(r.AppendJSON(q.data), '\n')
	q.push(now, r.Requests())
}

// cloneRow copies r, with the lists and refs it shares with the stream
// that filled it.
func cloneRow(r *ledger.Row) ledger.Row {
	c := *r
	c.Shadow = append([]ledger.Ref(nil), r.Shadow...)
	c.Breached = append([]ledger.Ref(nil), r.Breached...)
	c.Suspended = append([]string(nil), r.Suspended...)
	c.Cut = append([]string(nil), r.Cut...)
	if r.RefusedBy != nil {
		f := *r.RefusedBy
		c.RefusedBy = &f
	}
	return c
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// addCount adds two counts, saturating.
func addCount(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func appendInt(dst []byte, v int64) []byte { return append(dst, itoa(v)...) }

// unauthSampler lets unauthPerSecond unauthenticated refusals a second be
// written as rows of their own, and sums the rest.
type unauthSampler struct {
	totals
	second int64 // the unix second the budget counts
	used   int
	due    int64 // when the totals are queued (unix ns)
}

// sample reports whether a refusal at now may be written as a row of its
// own.
func (u *unauthSampler) sample(now time.Time) bool {
	if s := now.Unix(); s != u.second {
		u.second, u.used = s, 0
	}
	if u.used < unauthPerSecond {
		u.used++
		return true
	}
	return false
}

// sum folds an unauthenticated refusal into the totals, by error type,
// status and endpoint: the key id, models and provider a caller without a
// key sends are left out (its sampled rows keep them), and past
// maxUnauthGroups the endpoint too.
func (u *unauthSampler) sum(r *ledger.Row, now time.Time) {
	if len(u.order) == 0 {
		u.due = now.Add(time.Second).UnixNano()
	}
	g := *r
	g.KID, g.Model, g.Served, g.Provider, g.Cut = "", "", "", "", nil
	if !u.add(&g, now, maxUnauthGroups) {
		g.Endpoint = ""
		u.add(&g, now, math.MaxInt)
	}
}

// queueUnauth queues the summed refusals once a second (force: now).
func (e *Engine) queueUnauth(now time.Time, force bool) {
	u := &e.unauth
	if len(u.order) == 0 || (!force && now.UnixNano() < u.due) {
		return
	}
	for len(u.order) > 0 {
		g := u.pop()
		r := g.summary(e.newRequestID)
		e.enqueue(&r, now)
	}
}

// unauthSummed sums the row of an unauthenticated refusal past the
// sampling rate (when the accountant reads summaries) and reports whether
// it did; the caller queues the rows it did not sum.
func (e *Engine) unauthSummed(s *Stream, r *ledger.Row, now time.Time) bool {
	if s.refusal.errorType != wire.TypeUnauthorized || !e.kinds.summary || e.unauth.sample(now) {
		return false
	}
	e.unauth.sum(r, now)
	e.host.Metrics.Add(MetricRefusalsSummed, 1)
	e.summedRows++
	return true
}

// rowKinds is what the accountant said it reads, from its answers to
// ingest (syncwire.IngestAck.Kinds): an accountant from before the row
// kinds says nothing, and gets neither start rows nor summaries. Until an
// answer came (known), a VM sends neither; one with a call in flight
// whose start is due asks (askKinds).
type rowKinds struct {
	start, summary bool
	known          bool // an answer to a batch (or an ask) came
	asking         bool // an ask is in flight
	nextAsk        time.Time
	backoff        time.Duration
}

func (k *rowKinds) learn(resp []byte) {
	k.start, k.summary, k.known = false, false, true
	jv.GetBytes(resp, "kinds").ForEach(func(_, v jv.Value) bool {
		switch ledger.Kind(v.String()) {
		case ledger.KindStart:
			k.start = true
		case ledger.KindSummary:
			k.summary = true
		}
		return true
	})
}
