package rate

import (
	"flag"
	"fmt"
	"math/big"
	"math/rand"
	"reflect"
	"testing"
	"testing/quick"
	"time"
)

// The references below are the textbook definitions in exact rational
// arithmetic (math/big), with RetryAfter and ResetAfter found by binary
// search over the reference's own predicates rather than by formula. They
// are slow and obvious; the property check runs the fast code beside them.

type model interface {
	fits(now, cost int64) bool
	drained(now int64) bool
	remaining(now int64) int64
	commit(now, cost int64)
	adjust(now, delta int64)
	capacity() int64
}

func rat(a, b int64) *big.Rat { return new(big.Rat).SetFrac64(a, b) }

func floorRat(r *big.Rat) int64 {
	q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: floor for a positive denominator
	return q.Int64()
}

func ratMax0(r *big.Rat) *big.Rat {
	if r.Sign() < 0 {
		return new(big.Rat)
	}
	return r
}

// gcraRef: TAT advances by cost·T from max(TAT, now); admitted while the
// debt TAT−now stays within burst·T.
type gcraRef struct {
	tat              *big.Rat // nil: fresh
	amount, period   int64
	burst            int64
	emission, tolTAU *big.Rat
}

func newGCRARef(p Params) *gcraRef {
	g := &gcraRef{amount: p.Amount, period: int64(p.Period), burst: p.Burst}
	if g.burst <= 0 {
		g.burst = p.Amount
	}
	g.emission = rat(g.period, g.amount)
	g.tolTAU = new(big.Rat).Mul(g.emission, rat(g.burst, 1))
	return g
}

func (g *gcraRef) debt(now int64) *big.Rat {
	if g.tat == nil {
		return new(big.Rat)
	}
	return ratMax0(new(big.Rat).Sub(g.tat, rat(now, 1)))
}
func (g *gcraRef) capacity() int64 { return g.burst }
func (g *gcraRef) fits(now, cost int64) bool {
	d := new(big.Rat).Add(g.debt(now), new(big.Rat).Mul(g.emission, rat(cost, 1)))
	return cost <= g.burst && d.Cmp(g.tolTAU) <= 0
}
func (g *gcraRef) drained(now int64) bool { return g.debt(now).Sign() == 0 }
func (g *gcraRef) remaining(now int64) int64 {
	left := new(big.Rat).Sub(g.tolTAU, g.debt(now))
	if left.Sign() <= 0 {
		return 0
	}
	return floorRat(left.Quo(left, g.emission))
}
func (g *gcraRef) commit(now, cost int64) { g.adjust(now, cost) }
func (g *gcraRef) adjust(now, delta int64) {
	d := ratMax0(new(big.Rat).Add(g.debt(now), new(big.Rat).Mul(g.emission, rat(delta, 1))))
	g.tat = d.Add(d, rat(now, 1))
}

// bucketRef: a bucket of burst tokens, refilled continuously at
// amount/period, full when fresh.
type bucketRef struct {
	tokens         *big.Rat // nil: fresh
	last           int64
	amount, period int64
	burst          int64
}

func newBucketRef(p Params) *bucketRef {
	b := &bucketRef{amount: p.Amount, period: int64(p.Period), burst: p.Burst}
	if b.burst <= 0 {
		b.burst = p.Amount
	}
	return b
}

func (b *bucketRef) level(now int64) *big.Rat {
	full := rat(b.burst, 1)
	if b.tokens == nil {
		return full
	}
	l := new(big.Rat).Set(b.tokens)
	if now > b.last {
		l.Add(l, new(big.Rat).Mul(rat(now-b.last, 1), rat(b.amount, b.period)))
	}
	if l.Cmp(full) > 0 {
		return full
	}
	return l
}
func (b *bucketRef) capacity() int64 { return b.burst }
func (b *bucketRef) fits(now, cost int64) bool {
	return cost <= b.burst && b.level(now).Cmp(rat(cost, 1)) >= 0
}
func (b *bucketRef) drained(now int64) bool    { return b.level(now).Cmp(rat(b.burst, 1)) == 0 }
func (b *bucketRef) remaining(now int64) int64 { return max(0, floorRat(b.level(now))) }
func (b *bucketRef) commit(now, cost int64)    { b.adjust(now, cost) }
func (b *bucketRef) adjust(now, delta int64) {
	l := b.level(now)
	l.Sub(l, rat(delta, 1))
	if full := rat(b.burst, 1); l.Cmp(full) > 0 {
		l = full
	}
	if b.tokens == nil || now > b.last {
		b.last = now
	}
	b.tokens = l
}

// leakyRef is what an edit must keep, for gcra and token_bucket: the units
// in use at an instant, draining at the amount per period of whatever Params
// the cell is read with. With fixed Params it is the same bucket as gcraRef
// and bucketRef. Before its instant (a clock behind the one that wrote it)
// gcra runs the drain backwards, as its TAT does, and token_bucket holds.
type leakyRef struct {
	used *big.Rat // nil: fresh
	at   int64
	p    Params
	gcra bool
}

func (r *leakyRef) edit(p Params) { r.p = p }
func (r *leakyRef) capacity() int64 {
	if r.p.Burst > 0 {
		return r.p.Burst
	}
	return r.p.Amount
}
func (r *leakyRef) level(now int64) *big.Rat {
	if r.used == nil {
		return new(big.Rat)
	}
	drained := func(d int64) *big.Rat { return new(big.Rat).Mul(rat(d, 1), rat(r.p.Amount, int64(r.p.Period))) }
	switch {
	case now >= r.at:
		return ratMax0(new(big.Rat).Sub(r.used, drained(now-r.at)))
	case r.gcra:
		return new(big.Rat).Add(r.used, drained(r.at-now))
	}
	return new(big.Rat).Set(r.used)
}
func (r *leakyRef) fits(now, cost int64) bool {
	in := new(big.Rat).Add(r.level(now), rat(cost, 1))
	return cost <= r.capacity() && in.Cmp(rat(r.capacity(), 1)) <= 0
}
func (r *leakyRef) drained(now int64) bool { return r.level(now).Sign() == 0 }
func (r *leakyRef) remaining(now int64) int64 {
	return max(0, floorRat(new(big.Rat).Sub(rat(r.capacity(), 1), r.level(now))))
}
func (r *leakyRef) commit(now, cost int64) { r.adjust(now, cost) }
func (r *leakyRef) adjust(now, delta int64) {
	l := r.level(now)
	l = ratMax0(l.Add(l, rat(delta, 1)))
	if r.used == nil || r.gcra || now > r.at {
		r.at = now
	}
	r.used = l
}

// windowRef keeps every window's count by index; sliding adds the previous
// window weighted by the share of the current window still to run.
type windowRef struct {
	counts  map[int64]int64
	period  int64
	cap     int64
	sliding bool
}

func newWindowRef(p Params, sliding bool) *windowRef {
	return &windowRef{counts: map[int64]int64{}, period: int64(p.Period), cap: min(p.Amount, 65535), sliding: sliding}
}

func (w *windowRef) index(now int64) int64 {
	i := now / w.period
	if now%w.period < 0 {
		i--
	}
	return i
}
func (w *windowRef) counted(now int64) int64 {
	i := w.index(now)
	c := w.counts[i]
	if w.sliding {
		share := rat(w.counts[i-1]*((i+1)*w.period-now), w.period)
		c += -floorRat(new(big.Rat).Neg(share)) // ceil
	}
	return c
}
func (w *windowRef) edit(p Params)             { w.cap = min(p.Amount, 65535) }
func (w *windowRef) capacity() int64           { return w.cap }
func (w *windowRef) fits(now, cost int64) bool { return cost <= w.cap && w.counted(now)+cost <= w.cap }
func (w *windowRef) drained(now int64) bool    { return w.counted(now) == 0 }
func (w *windowRef) remaining(now int64) int64 { return max(0, w.cap-w.counted(now)) }
func (w *windowRef) commit(now, cost int64)    { w.counts[w.index(now)] += cost }
func (w *windowRef) adjust(now, delta int64) {
	i := w.index(now)
	if delta > 0 {
		w.counts[i] = min(65535, w.counts[i]+delta)
		return
	}
	take := min(-delta, w.counts[i])
	w.counts[i] -= take
	if w.sliding {
		w.counts[i-1] -= min(-delta-take, w.counts[i-1])
	}
}

func newRef(a Algorithm, p Params) model {
	switch a {
	case GCRA:
		return newGCRARef(p)
	case TokenBucket:
		return newBucketRef(p)
	case FixedWindow:
		return newWindowRef(p, false)
	default:
		return newWindowRef(p, true)
	}
}

// editable is a model whose Params can change between steps.
type editable interface {
	model
	edit(Params)
}

// newEditRef returns the model of a cell whose amount and burst are edited
// between steps.
func newEditRef(a Algorithm, p Params) model {
	switch a {
	case GCRA, TokenBucket:
		return &leakyRef{p: p, gcra: a == GCRA}
	case FixedWindow:
		return newWindowRef(p, false)
	default:
		return newWindowRef(p, true)
	}
}

// farOff is the longest wait the references search for, 2^60 ns (36
// years); a longer one compares as farOff (see clipWaits).
const farOff = 1 << 60

// search returns the least w in [0, farOff] with ok(w), ok being monotone,
// and farOff when there is none.
func search(ok func(w int64) bool) int64 {
	lo, hi := int64(0), int64(farOff)
	if !ok(hi) {
		return farOff
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// clipWaits returns r with RetryAfter and ResetAfter at most farOff, for
// comparing with a reference. Only an edit reaches such waits: an amount
// cut to 1 a day under a cell holding tens of thousands.
func clipWaits(r Result) Result {
	r.RetryAfter, r.ResetAfter = min(r.RetryAfter, farOff), min(r.ResetAfter, farOff)
	return r
}

func refResult(m model, now int64) Result {
	r := Result{Allowed: true, Limit: m.capacity(), Remaining: min(m.remaining(now), m.capacity())}
	r.ResetAfter = time.Duration(search(func(w int64) bool { return m.drained(now + w) }))
	return r
}

func refTake(m model, now, cost int64) Result {
	cost = max(cost, 0)
	r := refResult(m, now)
	switch {
	case cost == 0:
	case cost > m.capacity():
		r.Allowed, r.Unfittable = false, true
	case !m.fits(now, cost):
		r.Allowed = false
		r.RetryAfter = time.Duration(search(func(w int64) bool { return m.fits(now+w, cost) }))
	default:
		m.commit(now, cost)
		r = refResult(m, now)
	}
	return r
}

// script is a random sequence of operations against one limit. When
// params is set, params[i] are the Params of ops[i]: the amount and the
// burst are edited between steps, never the period.
type script struct {
	alg    Algorithm
	p      Params
	ops    []step
	params []Params
}

func (s script) String() string {
	edits := 0
	for i := 1; i < len(s.params); i++ {
		if s.params[i] != s.params[i-1] {
			edits++
		}
	}
	return fmt.Sprintf("%s %+v, %d ops, %d edits", s.alg, s.p, len(s.ops), edits)
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.Intn(len(xs))] }

func (script) Generate(r *rand.Rand, size int) reflect.Value {
	return reflect.ValueOf(generate(r, size, false))
}

// editScript is a script whose amount and burst change between steps.
type editScript struct{ script }

func (editScript) Generate(r *rand.Rand, size int) reflect.Value {
	return reflect.ValueOf(editScript{generate(r, size, true)})
}

func randomAmount(r *rand.Rand) int64 {
	return pick[int64](r, 1, 2, 3, 7, 10, 60, 300, 1000, 20000, 65535, 70000, 1+r.Int63n(5000))
}

func randomBurst(r *rand.Rand, amount int64) int64 {
	return pick(r, 0, 1, amount, 2*amount, 1+r.Int63n(3*amount))
}

func generate(r *rand.Rand, size int, edits bool) script {
	s := script{alg: Algorithm(1 + r.Intn(4))}
	s.p.Amount = randomAmount(r)
	s.p.Period = pick(r, time.Millisecond, 333*time.Millisecond, time.Second, 7*time.Second, time.Minute, time.Hour, 24*time.Hour, 1+time.Duration(r.Int63n(int64(time.Hour))))
	s.p.Burst = randomBurst(r, s.p.Amount)
	p := s.p
	at := t0.Add(time.Duration(r.Int63n(int64(24 * time.Hour))))
	for i := r.Intn(2 * size); i >= 0; i-- {
		if edits && r.Intn(6) == 0 {
			switch r.Intn(3) {
			case 0:
				p.Amount = randomAmount(r)
			case 1:
				p.Burst = randomBurst(r, p.Amount)
			default:
				p.Amount = randomAmount(r)
				p.Burst = randomBurst(r, p.Amount)
			}
		}
		capacity := p.Burst
		if capacity <= 0 || s.alg == FixedWindow || s.alg == SlidingWindow {
			capacity = p.Amount
		}
		period := int64(p.Period)
		switch r.Intn(6) {
		case 0: // same instant
		case 1:
			at = at.Add(time.Duration(r.Int63n(max(period/capacity, 1) * 3)))
		case 2:
			at = at.Add(time.Duration(r.Int63n(2 * period)))
		case 3:
			at = at.Add(time.Duration(r.Int63n(10)))
		case 4:
			if s.alg == GCRA || s.alg == TokenBucket { // a clock a little behind another VM's
				at = at.Add(-time.Duration(r.Int63n(period)))
			}
		case 5:
			at = at.Add(time.Duration(r.Int63n(5 * period)))
		}
		st := step{at: at}
		switch r.Intn(10) {
		case 0:
			st.op = opPeek
		case 1, 2:
			st.op, st.n = opAdjust, r.Int63n(4*capacity+1)-2*capacity
		default:
			st.op = opTake
			st.n = pick(r, 0, 1, 1, 1, capacity, capacity+1, 1+r.Int63n(capacity), r.Int63n(max(capacity/10, 1)+1))
		}
		s.ops = append(s.ops, st)
		if edits {
			s.params = append(s.params, p)
		}
	}
	return s
}

// check runs the script against the fast code and against the model ref
// returns, step by step.
func (s script) check(ref func(Algorithm, Params) model) error {
	m := ref(s.alg, s.p)
	p := s.p
	var st State
	for i, o := range s.ops {
		if s.params != nil && s.params[i] != p {
			p = s.params[i]
			e, ok := m.(editable)
			if !ok {
				return fmt.Errorf("step %d: the reference cannot change its Params", i)
			}
			e.edit(p)
		}
		now := o.at.UnixNano()
		var got, want Result
		switch o.op {
		case opTake:
			before := st
			got, st = Take(s.alg, st, o.at, o.n, p)
			want = refTake(m, now, o.n)
			if !got.Allowed && st != before {
				return fmt.Errorf("step %d: refusal changed the state", i)
			}
		case opPeek:
			got, want = Peek(s.alg, st, o.at, p), refTake(m, now, 0)
		case opAdjust:
			st = Adjust(s.alg, st, o.at, o.n, p)
			if o.n != 0 {
				m.adjust(now, o.n)
			}
			got, want = Peek(s.alg, st, o.at, p), refTake(m, now, 0)
		}
		if clipWaits(got) != want {
			return fmt.Errorf("step %d: %v at +%v n=%d under %+v: got %+v, reference %+v", i, o.op, o.at.Sub(t0), o.n, p, got, want)
		}
	}
	return nil
}

var propertySeed = flag.Int64("seed", 1, "seed of the property check's random scripts")

func propertyCount() int {
	if testing.Short() {
		return 50
	}
	return 400
}

// TestAgainstReference holds every algorithm to its textbook definition,
// with the Params fixed.
func TestAgainstReference(t *testing.T) {
	f := func(s script) bool {
		if err := s.check(newRef); err != nil {
			t.Logf("%s: %v", s, err)
			return false
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: propertyCount(), Rand: rand.New(rand.NewSource(*propertySeed))}); err != nil {
		t.Error("the fast code and the reference disagree (the failing script is logged above)")
	}
}

// TestEditsAgainstReference edits the amount and the burst between steps:
// the fast code must keep the units in use (the window counts) exactly as
// the models that hold them do.
func TestEditsAgainstReference(t *testing.T) {
	f := func(s editScript) bool {
		if err := s.check(newEditRef); err != nil {
			t.Logf("%s: %v", s, err)
			return false
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: propertyCount(), Rand: rand.New(rand.NewSource(*propertySeed))}); err != nil {
		t.Error("the fast code and the reference disagree across edits (the failing script is logged above)")
	}
}
