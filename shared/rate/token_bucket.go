package rate

// token_bucket holds up to burst tokens and refills amount tokens per
// period, continuously; a fresh cell is full. A cost is admitted when the
// bucket holds at least that many tokens. Refill is exact: the cell keeps
// whole tokens and a carry in 1/period tokens.

// bucket is a token_bucket cell refilled up to now.
type bucket struct {
	tokens int64  // may be negative after an Adjust debit
	carry  uint64 // fraction of the next token, in 1/period tokens
	last   int64  // unix ns of the last refill
	// lag is how far now is behind last (a clock behind the one that wrote
	// the cell): refill resumes only once it has passed.
	lag uint64
}

func bucketAt(s State, now int64, l limits) bucket {
	if s.alg != TokenBucket {
		return bucket{tokens: int64(l.capacity), last: now}
	}
	b := bucket{tokens: s.x, carry: uint64(s.y), last: s.t}
	if b.carry >= l.period { // the period was edited; drop the fraction
		b.carry = 0
	}
	if now > b.last {
		if b.tokens < int64(l.capacity) {
			q, r := mul(uint64(now)-uint64(b.last), l.amount).add(u64(b.carry)).divmod(l.period)
			b.tokens, b.carry = b.fill(q, r, l)
		}
		b.last = now
	} else {
		b.lag = uint64(b.last) - uint64(now)
	}
	if b.tokens >= int64(l.capacity) {
		b.tokens, b.carry = int64(l.capacity), 0
	}
	return b
}

// fill adds q whole tokens with a new carry r, stopping at capacity.
func (b bucket) fill(q, r uint64, l limits) (int64, uint64) {
	need := uint64(int64(l.capacity)) - uint64(b.tokens) // > 0, fits: capacity > tokens
	if q >= need {
		return int64(l.capacity), 0
	}
	return int64(uint64(b.tokens) + q), r
}

// until is the time until the bucket holds want tokens.
func (b bucket) until(want int64, l limits) uint64 {
	if b.tokens >= want {
		return 0
	}
	short := mul(uint64(want)-uint64(b.tokens), l.period).sub(u64(b.carry))
	w := short.divCeil(l.amount)
	if w+b.lag < w {
		return ^uint64(0)
	}
	return w + b.lag
}

func (b bucket) state() State {
	return State{alg: TokenBucket, t: b.last, x: b.tokens, y: int64(b.carry)}
}

func bucketResult(b bucket, l limits) Result {
	r := Result{Allowed: true, Limit: int64(l.capacity)}
	if b.tokens > 0 {
		r.Remaining = b.tokens
	}
	r.ResetAfter = nanos(b.until(int64(l.capacity), l))
	return r
}

func bucketTake(s State, now int64, cost uint64, l limits) (Result, State) {
	if !l.ok {
		return Result{Allowed: cost == 0, Unfittable: cost > 0}, s
	}
	b := bucketAt(s, now, l)
	switch {
	case cost == 0: // a probe always fits
		return bucketResult(b, l), s
	case cost > l.capacity:
		r := bucketResult(b, l)
		r.Allowed, r.Unfittable = false, true
		return r, s
	case b.tokens < int64(cost):
		r := bucketResult(b, l)
		r.Allowed = false
		r.RetryAfter = nanos(b.until(int64(cost), l))
		return r, s
	}
	b.tokens -= int64(cost)
	return bucketResult(b, l), b.state()
}

func bucketAdjust(s State, now int64, debit bool, mag uint64, l limits) State {
	b := bucketAt(s, now, l)
	switch {
	case debit:
		if room := uint64(b.tokens) - 1<<63; mag > room { // room = tokens − MinInt64; saturate there
			b.tokens = -1 << 63
		} else {
			b.tokens = int64(uint64(b.tokens) - mag)
		}
	default:
		b.tokens, b.carry = b.fill(mag, b.carry, l)
	}
	return b.state()
}
