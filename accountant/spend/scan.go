package spend

import (
	"sort"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/sat"
)

// The figures of Values as an array, so a cell adds into a running sum
// without a switch: a cell's kind names the slots its requests, dollars
// and UNPRICED tokens go to (fNone, a slot no report reads, for those
// that go nowhere).
const (
	fRequests = iota
	fAdmitted
	fRefused
	fShadow
	fSoft
	fInput
	fOutput
	fCached
	fReasoning
	fPricedNanos
	fPricedReq
	fEstNanos
	fEstReq
	fUnpricedReq
	fUnpricedTok
	fNone
	accN
)

// acc is a running sum of Values.
type acc [accN]int64

// kind is where a cell's sums go in an acc: its decision's slot, and the
// slots of its dollars, of its requests by cost and of its UNPRICED
// tokens. Every slot is below accN; masking with accN-1 lets the compiler
// drop the bounds checks.
type kind struct {
	dec, nanos, costReq, unTok uint8
}

func kindOf(d *Dims) kind {
	k := kind{dec: fNone, nanos: fNone, costReq: fNone, unTok: fNone}
	switch d.Decision {
	case ledger.Admitted:
		k.dec = fAdmitted
	case ledger.Refused:
		k.dec = fRefused
	case ledger.ShadowRefused:
		k.dec = fShadow
	case ledger.SoftBreach:
		k.dec = fSoft
	}
	switch d.Cost {
	case Priced:
		k.nanos, k.costReq = fPricedNanos, fPricedReq
	case Estimated:
		k.nanos, k.costReq = fEstNanos, fEstReq
	case Unpriced:
		k.costReq, k.unTok = fUnpricedReq, fUnpricedTok
	}
	return k
}

func (a *acc) add(k *kind, s *Sums) {
	a[fRequests] = sat.Add(a[fRequests], s.Requests)
	a[k.dec&(accN-1)] = sat.Add(a[k.dec&(accN-1)], s.Requests)
	a[fInput] = sat.Add(a[fInput], s.Input)
	a[fOutput] = sat.Add(a[fOutput], s.Output)
	a[fCached] = sat.Add(a[fCached], s.CachedInput)
	a[fReasoning] = sat.Add(a[fReasoning], s.Reasoning)
	a[k.nanos&(accN-1)] = sat.Add(a[k.nanos&(accN-1)], s.Nanos)
	a[k.costReq&(accN-1)] = sat.Add(a[k.costReq&(accN-1)], s.Requests)
	a[k.unTok&(accN-1)] = sat.Add(a[k.unTok&(accN-1)], sat.Add(s.Input, s.Output))
}

// merge adds o to a.
func (a *acc) merge(o *acc) {
	for i := range a {
		a[i] = sat.Add(a[i], o[i])
	}
}

func (a *acc) values() Values {
	return Values{
		Requests: a[fRequests], Admitted: a[fAdmitted], Refused: a[fRefused], ShadowRefused: a[fShadow], SoftBreach: a[fSoft],
		InputTokens: a[fInput], OutputTokens: a[fOutput], CachedInputTokens: a[fCached], ReasoningTokens: a[fReasoning],
		PricedUSD: config.USD{Nanos: a[fPricedNanos]}, PricedRequests: a[fPricedReq], EstimatedUSD: config.USD{Nanos: a[fEstNanos]}, EstimatedRequests: a[fEstReq],
		UnpricedRequests: a[fUnpricedReq], UnpricedTokens: a[fUnpricedTok],
	}
}

// empty: no request was summed into a (every cell counts at least one).
func (a *acc) empty() bool { return a[fRequests] == 0 }

// rank is what orders groups: dollars spent (priced and estimated),
// UNPRICED tokens, requests, most first, then by key.
type rank struct {
	spent, unTok, requests int64
}

func (a *acc) rank() rank {
	return rank{spent: sat.Add(a[fPricedNanos], a[fEstNanos]), unTok: a[fUnpricedTok], requests: a[fRequests]}
}

func rankBefore(x, y *rank, kx, ky []string) bool {
	if x.spent != y.spent {
		return x.spent > y.spent
	}
	if x.unTok != y.unTok {
		return x.unTok > y.unTok
	}
	if x.requests != y.requests {
		return x.requests > y.requests
	}
	for i := range kx {
		if kx[i] != ky[i] {
			return kx[i] < ky[i]
		}
	}
	return false
}

// table is a report's sums by row (a group, or the groups past top=
// summed) and bucket. Only the buckets a row has rows in hold an acc.
type table struct {
	nb     int     // buckets
	cellAt []int32 // row*nb + bucket → 1 + index in accs; 0 while empty
	accs   []acc
}

func (t *table) rows() int {
	if t.nb == 0 {
		return 0
	}
	return len(t.cellAt) / t.nb
}

// grow makes the table n rows long.
func (t *table) grow(n int) {
	if d := n*t.nb - len(t.cellAt); d > 0 {
		t.cellAt = append(t.cellAt, make([]int32, d)...)
	}
}

func (t *table) at(row, b int) *acc {
	p := &t.cellAt[row*t.nb+b]
	if *p == 0 {
		t.accs = append(t.accs, acc{})
		*p = int32(len(t.accs))
	}
	return &t.accs[*p-1]
}

// get is the acc of a row in a bucket, nil while empty.
func (t *table) get(row, b int) *acc {
	if p := t.cellAt[row*t.nb+b]; p != 0 {
		return &t.accs[p-1]
	}
	return nil
}

// rowTotal is a row's sum over every bucket.
func (t *table) rowTotal(row int) acc {
	var s acc
	for b := 0; b < t.nb; b++ {
		if a := t.get(row, b); a != nil {
			s.merge(a)
		}
	}
	return s
}

const (
	memoUnset = -2 // dims not looked at yet
	memoOut   = -1 // dims filtered out
)

// scanner reads the cells of a query's range: it finds the groups the
// query makes of the rollup's dims, and sums cells into group totals or
// into a table. The rollup's lock is held throughout.
type scanner struct {
	r       *Rollup
	q       *Query
	node    string
	buckets []time.Time
	// memo is, per dims id, where the pass sums its cells (a group or a
	// table row), memoOut or memoUnset; kinds the dims' kind once looked at.
	memo  []int32
	kinds []kind
	// groups is, per dims id, its group or memoOut, once a pass looked at
	// it (memoUnset before), so a second pass finds groups without
	// building keys again.
	groups  []int32
	groupOf map[string]int32
	keys    [][]string // values of each group's dims
	// place is where the pass sums group g's cells; memoOut leaves them
	// out.
	place func(g int32) int32
}

func (r *Rollup) scanner(q *Query, node string, buckets []time.Time) *scanner {
	sc := &scanner{r: r, q: q, node: node, buckets: buckets, memo: make([]int32, len(r.dims)),
		kinds: make([]kind, len(r.dims)), groups: make([]int32, len(r.dims)), groupOf: map[string]int32{}}
	for i := range sc.groups {
		sc.groups[i] = memoUnset
	}
	return sc
}

func (sc *scanner) reset(place func(g int32) int32) {
	for i := range sc.memo {
		sc.memo[i] = memoUnset
	}
	sc.place = place
}

// classify returns where the pass sums the cells of dims d, and memoizes
// it.
func (sc *scanner) classify(d uint32) int32 {
	g := sc.groups[d]
	if g == memoUnset {
		dims := &sc.r.dims[d]
		sc.kinds[d] = kindOf(dims)
		g = sc.group(dims)
		sc.groups[d] = g
	}
	if g != memoOut {
		g = sc.place(g)
	}
	sc.memo[d] = g
	return g
}

// group returns the group of a dims, or memoOut when the query leaves it
// out.
func (sc *scanner) group(d *Dims) int32 {
	if sc.node != "" && !runtime.InSubtree(sc.node, d.Node) {
		return memoOut
	}
	for dim, vals := range sc.q.Filters {
		ok := false
		for _, w := range vals {
			if dim.matches(d, w) {
				ok = true
				break
			}
		}
		if !ok {
			return memoOut
		}
	}
	key := make([]string, len(sc.q.GroupBy))
	for i, dim := range sc.q.GroupBy {
		key[i] = dim.value(d)
	}
	s := strings.Join(key, "\x00")
	g, ok := sc.groupOf[s]
	if !ok {
		g = int32(len(sc.keys))
		sc.groupOf[s] = g
		sc.keys = append(sc.keys, key)
	}
	return g
}

// each calls fn with every slot of the range and its bucket, in order:
// hourly slots for hourly buckets; otherwise whole days from the daily
// slots and the hours of a day the range cuts from the hourly ones.
func (sc *scanner) each(fn func(s *slot, b int)) {
	r, q := sc.r, sc.q
	visit := func(s *slot, t time.Time) {
		b := sort.Search(len(sc.buckets), func(i int) bool { return sc.buckets[i].After(t) }) - 1
		if b >= 0 {
			fn(s, b)
		}
	}
	fromH, toH := floorDiv(q.From.Unix(), 3600), floorDiv(q.To.Unix(), 3600)
	hours := func(from, to int64) {
		for h := from; h < to; h++ {
			if s := r.hours[h]; s != nil {
				visit(s, time.Unix(h*3600, 0).UTC())
			}
		}
	}
	if q.Bucket == Hour {
		hours(fromH, toH)
		return
	}
	firstDay, endDay := floorDiv(fromH+23, 24), floorDiv(toH, 24)
	if firstDay >= endDay {
		hours(fromH, toH)
		return
	}
	hours(fromH, firstDay*24)
	for d := firstDay; d < endDay; d++ {
		if s := r.days[d]; s != nil {
			visit(s, time.Unix(d*86400, 0).UTC())
		}
	}
	hours(endDay*24, toH)
}

// ranks sums what ranks every group over the whole range: the first
// pass of a top= report, which orders the groups before any series is
// summed. A cell's dollars are its priced or estimated ones (UNPRICED and
// refused cells hold none), its UNPRICED tokens its tokens when UNPRICED.
func (sc *scanner) ranks() []rank {
	var rk []rank
	sc.reset(func(g int32) int32 {
		if int(g) == len(rk) {
			rk = append(rk, rank{})
		}
		return g
	})
	memo, kinds := sc.memo, sc.kinds
	sc.each(func(s *slot, _ int) {
		for i := range s.cells {
			c := &s.cells[i]
			g := memo[c.dims]
			if g < 0 {
				if g == memoOut {
					continue
				}
				if g = sc.classify(c.dims); g < 0 {
					continue
				}
			}
			r := &rk[g]
			r.spent = sat.Add(r.spent, c.sums.Nanos)
			r.requests = sat.Add(r.requests, c.sums.Requests)
			if kinds[c.dims].unTok == fUnpricedTok {
				r.unTok = sat.Add(r.unTok, sat.Add(c.sums.Input, c.sums.Output))
			}
		}
	})
	return rk
}

// series sums the range's cells into t by row and bucket; place says
// which row a group's cells go to. It reports false when a row would
// pass MaxAnswer group-buckets.
func (sc *scanner) series(t *table, place func(g int32) int32) bool {
	ok := true
	sc.reset(func(g int32) int32 {
		row := place(g)
		if row < 0 {
			return row
		}
		if (int(row)+1)*t.nb > MaxAnswer {
			ok = false
			return memoOut
		}
		t.grow(int(row) + 1)
		return row
	})
	memo, kinds := sc.memo, sc.kinds
	sc.each(func(s *slot, b int) {
		for i := range s.cells {
			c := &s.cells[i]
			row := memo[c.dims]
			if row < 0 {
				if row == memoOut {
					continue
				}
				if row = sc.classify(c.dims); row < 0 {
					continue
				}
			}
			t.at(int(row), b).add(&kinds[c.dims], &c.sums)
		}
	})
	return ok
}
