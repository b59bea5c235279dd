// Package preview owns `tokentriage govern preview`: it replays a recorded
// ledger against a proposed plan and reports, per limit instance, what the
// plan would have counted, under three labels (seed 000):
//
//   - EXACT, for LedgerSettled limits (budget_usd, quota_tokens,
//     quota_requests): the fold the accountant runs, recomputed from the
//     rows of the calendar periods containing the --at instant, so every
//     figure can be checked by hand against the ledger.
//   - APPROXIMATE, for rpm and tpm (label rate_windows_approximated): the
//     rows' arrivals (start times) replayed through the limit's rate
//     algorithm (shared/rate), reporting the peak use of any window and how
//     many arrivals the limit would have refused. tpm is charged the row's
//     reported total at arrival, where the live gate reserves an estimate
//     and settles it later, hence approximate.
//   - ESTIMATED, for concurrency (label concurrency_from_flights): ledger
//     rows carry start and end times, so flights are reconstructed and
//     overlapped: the peak number in flight, and how many would have been
//     refused at the cap.
//
// Everything here is pure over its inputs: the rows, the plan and the
// instant come in; the report comes out.
package preview

import (
	"sort"
	"time"

	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/rate"
	"github.com/tokentriage/tokentriage/shared/sat"
)

// Replay accumulates rows against an armed plan. Feed it with Add, then
// call Report.
type Replay struct {
	armed   *govern.Armed
	at      time.Time
	pricing *pricing.Catalog
	starts  [calendar.Month + 1]int64

	settled map[string]*settled
	rates   map[string]*rated
	flights map[string]*inflight
	stats   Stats
	buf     []govern.Instance
	chain   []string
}

// Stats describe the rows replayed.
type Stats struct {
	Rows, Forwarded, Refused, Unpriced, Unreadable int
	// Passthrough counts rows forwarded ungoverned: replayed for rpm,
	// concurrency and quota_requests as the filter counts them, unless
	// free.
	Passthrough int
	First, Last time.Time // earliest start, latest end
}

type instance struct {
	limit  *govern.Limit
	node   string
	id     string
	amount int64
	dims   govern.Dims // the row's values of the dims the limit constrains
}

type settled struct {
	instance
	value int64
	rows  int
	// slide is, for a rolling window, the oldest day bucket's count: the
	// share of it still in the window counts (finishSettled adds it).
	slide int64
}

type arrival struct {
	at   int64 // Unix nanoseconds
	cost int64
}

type rated struct {
	instance
	arrivals []arrival
}

type flight struct{ start, end int64 }

type inflight struct {
	instance
	flights []flight
}

// New returns a replay of armed at instant at (the calendar periods that
// contain it are the ones EXACT recomputes). Rows without a cost are priced
// with catalog (nil: the built-in catalog); a row that carries its cost
// keeps it, as the accountant does.
func New(armed *govern.Armed, at time.Time, catalog *pricing.Catalog) *Replay {
	if catalog == nil {
		catalog = pricing.Default()
	}
	r := &Replay{armed: armed, at: at, pricing: catalog,
		settled: map[string]*settled{}, rates: map[string]*rated{}, flights: map[string]*inflight{}}
	for _, u := range []calendar.Unit{calendar.Day, calendar.Week, calendar.Month} {
		r.starts[u] = calendar.Start(u, at).Unix()
	}
	return r
}

// Unreadable counts a line that is not a ledger row.
func (r *Replay) Unreadable() { r.stats.Unreadable++ }

// Add replays one row: a summary as its requests, a start not at all (its
// end or its close counts the call), and a late end as its own figures in
// place of the estimate it replaces.
func (r *Replay) Add(row *ledger.Row) {
	if row.Kind == ledger.KindStart {
		return
	}
	if p := row.Replaced; p != nil && row.Kind == ledger.KindEnd {
		e := *row
		e.End, e.Usage, e.Cost, e.Kind, e.Replaced = p.End, p.Usage, p.Cost, ledger.KindClose, nil
		r.add(&e, -1)
	}
	r.add(row, 1)
}

// add replays a row's requests, counted sign times (-1 takes a replaced
// estimate out).
func (r *Replay) add(row *ledger.Row, sign int64) {
	n := int(row.Requests() * sign)
	st := &r.stats
	st.Rows += n
	if !row.Start.IsZero() && (st.First.IsZero() || row.Start.Before(st.First)) {
		st.First = row.Start
	}
	if row.End.After(st.Last) {
		st.Last = row.End
	}
	passthrough := row.Decision == ledger.Passthrough
	if passthrough {
		// Forwarded ungoverned: gate 1 and quota_requests count it, as in
		// the filter, unless it was a free call.
		st.Passthrough += n
		if row.Free {
			return
		}
	}
	forwarded := row.Decision != ledger.Refused
	switch {
	case passthrough:
	case forwarded:
		st.Forwarded += n
	default:
		st.Refused += n
	}
	cost := row.Cost
	if passthrough {
		cost = &ledger.Cost{} // never priced
	}
	if cost == nil && forwarded {
		p := r.pricing.PriceRow(row)
		cost = &ledger.Cost{Nanos: p.Nanos, Unpriced: p.Unpriced}
	}
	if cost == nil {
		cost = &ledger.Cost{} // refused: never forwarded, costs nothing
	}
	if cost.Unpriced {
		st.Unpriced += n
	}
	if r.armed == nil {
		return
	}
	r.chain = govern.AppendChain(r.chain[:0], row.Node, row.KID)
	start := row.Start
	if start.IsZero() {
		start = row.End
	}

	// Gate 1: rpm arrivals (every row reached the gate) and concurrency
	// flights (forwarded rows held a lease from start to end).
	d1 := govern.Dims{Endpoint: row.Endpoint}
	r.buf = r.armed.Resolve(r.chain, d1, govern.Gate1, r.buf[:0])
	for _, in := range r.buf {
		if sign < 0 {
			continue // the close's arrival is the end's own
		}
		switch in.Limit.Type {
		case govern.RPM:
			x := r.rate(in, d1)
			x.arrivals = append(x.arrivals, arrival{at: start.UnixNano(), cost: int64(n)})
		case govern.Concurrency:
			if forwarded && row.Kind != ledger.KindSummary {
				x := r.flight(in, d1)
				x.flights = append(x.flights, flight{start: start.UnixNano(), end: row.End.UnixNano()})
			}
		}
	}

	// Gate 2: LedgerSettled folds and tpm usage, forwarded rows only; the
	// arrivals and flights of rate limits narrowed by what the body names,
	// of rows that reached it (forwarded, or refused by a limit judged
	// there).
	reached := forwarded
	if b := row.RefusedBy; b != nil && !forwarded {
		l := r.armed.Plan.Limit(b.LimitID)
		reached = l != nil && l.Gate() == govern.Gate2
	}
	if !reached {
		return
	}
	d2 := govern.Dims{Model: row.Sent(), Provider: row.Provider, Endpoint: row.Endpoint,
		Customer: row.Customer, Tags: govern.JoinTags(row.Tags)}
	r.buf = r.armed.Resolve(r.chain, d2, govern.Gate2, r.buf[:0])
	for _, in := range r.buf {
		l := in.Limit
		switch {
		case l.Type == govern.RPM:
			x := r.rate(in, d2)
			x.arrivals = append(x.arrivals, arrival{at: start.UnixNano(), cost: 1})
		case l.Type == govern.Concurrency:
			if forwarded {
				x := r.flight(in, d2)
				x.flights = append(x.flights, flight{start: start.UnixNano(), end: row.End.UnixNano()})
			}
		case !forwarded:
		case passthrough && l.Type != govern.QuotaRequests:
			// The filter checks only quota_requests on a passthrough call.
		case l.Type == govern.TPM && sign < 0:
		case l.Type == govern.TPM:
			total := row.Usage.Total
			if total <= 0 {
				total = sat.Add(max(row.Usage.Input, 0), max(row.Usage.Output, 0))
			}
			if l.Metric != govern.MetricTotal {
				total = metricTokens(l.Metric, max(row.Usage.Input, 0), max(row.Usage.Output, 0))
			}
			x := r.rate(in, d2)
			x.arrivals = append(x.arrivals, arrival{at: start.UnixNano(), cost: total})
		case l.Type.Class() == govern.LedgerSettled && l.Period.Counted():
			oldest, ok := r.inPeriod(l.Period, row.End)
			if !ok {
				continue
			}
			x := held(r.settled, in, d2, newSettled)
			x.rows += n
			var v int64
			switch l.Type {
			case govern.BudgetUSD:
				if !cost.Unpriced {
					v = sign * cost.Nanos
				}
			case govern.QuotaTokens:
				v = sign * metricTokens(l.Metric, max(row.Usage.Input, 0), max(row.Usage.Output, 0))
			case govern.QuotaRequests:
				v = int64(n)
			}
			if oldest {
				x.slide = sat.Add(x.slide, v)
			} else {
				x.value = sat.Add(x.value, v)
			}
		}
	}
}

func newInstance(in govern.Instance, d govern.Dims) instance {
	l := in.Limit
	var dims govern.Dims
	if l.Match.Model != "" {
		dims.Model = d.Model
	}
	if l.Match.Provider != "" {
		dims.Provider = d.Provider
	}
	if l.Match.Endpoint != "" {
		dims.Endpoint = d.Endpoint
	}
	if l.Match.Customer != "" {
		dims.Customer = d.Customer
	}
	if l.Match.Tag != "" {
		dims.Tags = l.InstanceDims(d, in.Tag).Tags
	}
	return instance{limit: l, node: in.Node, id: in.ID, amount: in.Amount, dims: dims}
}

func (r *Replay) rate(in govern.Instance, d govern.Dims) *rated {
	return held(r.rates, in, d, newRated)
}

func (r *Replay) flight(in govern.Instance, d govern.Dims) *inflight {
	return held(r.flights, in, d, newInflight)
}

// held is m's counter of in, made by mk for the row's dims d the first
// time the replay meets the instance.
func held[X any](m map[string]*X, in govern.Instance, d govern.Dims, mk func(instance) *X) *X {
	x := m[in.ID]
	if x == nil {
		x = mk(newInstance(in, d))
		m[in.ID] = x
	}
	return x
}

func newSettled(in instance) *settled   { return &settled{instance: in} }
func newRated(in instance) *rated       { return &rated{instance: in} }
func newInflight(in instance) *inflight { return &inflight{instance: in} }

// rateResult is the replay of one rate instance.
type rateResult struct {
	peak     int64 // most units inside any window
	refused  int   // arrivals the algorithm would refuse
	arrivals int
}

// replayRate sorts the arrivals and runs them through the algorithm and a
// sliding window count.
func replayRate(x *rated) rateResult {
	a := x.arrivals
	sort.Slice(a, func(i, j int) bool { return a[i].at < a[j].at })
	l := x.limit
	p := rate.Params{Amount: x.amount, Period: l.Period.Window, Burst: l.Burst}
	alg := l.Algorithm
	if alg == 0 {
		alg = rate.GCRA
	}
	var st rate.State
	res := rateResult{arrivals: len(a)}
	var inWindow int64
	lo := 0
	for _, ar := range a {
		r, next := rate.Take(alg, st, time.Unix(0, ar.at), ar.cost, p)
		if r.Allowed {
			st = next
		} else {
			res.refused++
		}
		inWindow = sat.Add(inWindow, ar.cost)
		for a[lo].at <= ar.at-int64(l.Period.Window) {
			inWindow -= a[lo].cost
			lo++
		}
		res.peak = max(res.peak, inWindow)
	}
	return res
}

// flightResult is the replay of one concurrency instance.
type flightResult struct {
	peak    int // most flights overlapping at one instant
	refused int // flights that would have found the cap full
	flights int
}

// replayFlights overlaps the flights: peak is the most in flight at once
// (a flight ending at the instant another starts does not overlap it), and
// refused counts the flights that would have met amount admitted flights
// already in flight (a refused flight holds no slot).
func replayFlights(x *inflight) flightResult {
	f := x.flights
	sort.Slice(f, func(i, j int) bool {
		if f[i].start != f[j].start {
			return f[i].start < f[j].start
		}
		return f[i].end < f[j].end
	})
	res := flightResult{flights: len(f)}
	var all, admitted endHeap
	for _, fl := range f {
		all.popUntil(fl.start)
		admitted.popUntil(fl.start)
		all.push(fl.end)
		res.peak = max(res.peak, len(all))
		if int64(len(admitted)) >= x.amount {
			res.refused++
			continue
		}
		admitted.push(fl.end)
	}
	return res
}

// endHeap is a min-heap of flight end times.
type endHeap []int64

func (h *endHeap) push(v int64) {
	*h = append(*h, v)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

// popUntil removes every end at or before t.
func (h *endHeap) popUntil(t int64) {
	for len(*h) > 0 && (*h)[0] <= t {
		s := *h
		n := len(s) - 1
		s[0] = s[n]
		s = s[:n]
		for i := 0; ; {
			c := 2*i + 1
			if c >= len(s) {
				break
			}
			if c+1 < len(s) && s[c+1] < s[c] {
				c++
			}
			if s[i] <= s[c] {
				break
			}
			s[i], s[c] = s[c], s[i]
			i = c
		}
		*h = s
	}
}

// metricTokens is what a token limit of metric m counts of a row's usage.
func metricTokens(m govern.Metric, input, output int64) int64 {
	switch m {
	case govern.MetricInput:
		return input
	case govern.MetricOutput:
		return output
	}
	return sat.Add(input, output)
}

// inPeriod reports whether a row that ended at end counts in the period
// of p holding the replay's instant, and, for a rolling window, whether it
// is in its oldest day bucket (of which a share counts).
func (r *Replay) inPeriod(p govern.Period, end time.Time) (oldest, ok bool) {
	if p.Rolling == 0 {
		return false, p.Start(end).Equal(p.Start(r.at))
	}
	starts := p.Sliding().BucketStarts(r.at)
	b := p.Start(end)
	if b.Before(starts[0]) || b.After(starts[len(starts)-1]) || end.After(r.at) {
		return false, false
	}
	return b.Equal(starts[0]), true
}

// finish gives every rolling window's instance its count at the replay's
// instant (settledValue); the rows are all in.
func (r *Replay) finish() {
	for _, x := range r.settled {
		x.value, x.slide = r.settledValue(x), 0
	}
}

// settledValue is an instance's recomputed counter at the replay's
// instant: for a rolling window, its full buckets and the share of the
// oldest still inside it.
func (r *Replay) settledValue(x *settled) int64 {
	p := x.limit.Period
	if p.Rolling == 0 || x.slide == 0 {
		return x.value
	}
	cur, end := p.Start(r.at), p.End(r.at)
	return sat.Add(x.value, calendar.Share(x.slide, end.Sub(r.at), end.Sub(cur)))
}
