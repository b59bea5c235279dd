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

// search returns the least w in [0, 1<<60] with ok(w), ok being monotone.
func search(ok func(w int64) bool) (int64, bool) {
	lo, hi := int64(0), int64(1)<<60
	if !ok(hi) {
		return 0, false
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, true
}

func refResult(m model, now int64) Result {
	r := Result{Allowed: true, Limit: m.capacity(), Remaining: min(m.remaining(now), m.capacity())}
	w, _ := search(func(w int64) bool { return m.drained(now + w) })
	r.ResetAfter = time.Duration(w)
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
		w, _ := search(func(w int64) bool { return m.fits(now+w, cost) })
		r.RetryAfter = time.Duration(w)
	default:
		m.commit(now, cost)
		r = refResult(m, now)
	}
	return r
}

// script is a random sequence of operations against one limit.
type script struct {
	alg Algorithm
	p   Params
	ops []step
}

func (s script) String() string { return fmt.Sprintf("%s %+v, %d ops", s.alg, s.p, len(s.ops)) }

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.Intn(len(xs))] }

func (script) Generate(r *rand.Rand, size int) reflect.Value {
	s := script{alg: Algorithm(1 + r.Intn(4))}
	s.p.Amount = pick[int64](r, 1, 2, 3, 7, 10, 60, 300, 1000, 20000, 65535, 70000, 1+r.Int63n(5000))
	s.p.Period = pick(r, time.Millisecond, 333*time.Millisecond, time.Second, 7*time.Second, time.Minute, time.Hour, 24*time.Hour, 1+time.Duration(r.Int63n(int64(time.Hour))))
	s.p.Burst = pick(r, 0, 1, s.p.Amount, 2*s.p.Amount, 1+r.Int63n(3*s.p.Amount))
	capacity := s.p.Burst
	if capacity <= 0 || s.alg == FixedWindow || s.alg == SlidingWindow {
		capacity = s.p.Amount
	}
	at := t0.Add(time.Duration(r.Int63n(int64(24 * time.Hour))))
	for i := r.Intn(2 * size); i >= 0; i-- {
		period := int64(s.p.Period)
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
	}
	return reflect.ValueOf(s)
}

func (s script) check() error {
	m := newRef(s.alg, s.p)
	var st State
	for i, o := range s.ops {
		now := o.at.UnixNano()
		var got, want Result
		switch o.op {
		case opTake:
			before := st
			got, st = Take(s.alg, st, o.at, o.n, s.p)
			want = refTake(m, now, o.n)
			if !got.Allowed && st != before {
				return fmt.Errorf("step %d: refusal changed the state", i)
			}
		case opPeek:
			got, want = Peek(s.alg, st, o.at, s.p), refTake(m, now, 0)
		case opAdjust:
			st = Adjust(s.alg, st, o.at, o.n, s.p)
			if o.n != 0 {
				m.adjust(now, o.n)
			}
			got, want = Peek(s.alg, st, o.at, s.p), refTake(m, now, 0)
		}
		if got != want {
			return fmt.Errorf("step %d: %v at +%v n=%d: got %+v, reference %+v", i, o.op, o.at.Sub(t0), o.n, got, want)
		}
	}
	return nil
}

var propertySeed = flag.Int64("seed", 1, "seed of the property check's random scripts")

func TestAgainstReference(t *testing.T) {
	count := 400
	if testing.Short() {
		count = 50
	}
	f := func(s script) bool {
		if err := s.check(); err != nil {
			t.Logf("%s: %v", s, err)
			return false
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: count, Rand: rand.New(rand.NewSource(*propertySeed))}); err != nil {
		t.Error("the fast code and the reference disagree (the failing script is logged above)")
	}
}
