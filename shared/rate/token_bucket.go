package rate

// token_bucket holds up to burst tokens and refills amount tokens per
// period, continuously; a fresh cell is full, and a cost is admitted when
// the bucket holds at least that many tokens. The cell keeps the tokens
// taken rather than the tokens left: burst − tokens is the level of the
// leaky bucket in level.go, so a burst edit keeps the units in use instead
// of the tokens left, and token_bucket decides exactly as gcra does.
//
// The two differ only for a reader whose clock is behind the cell's
// instant t (another VM's clock ahead of its own): token_bucket refills
// nothing until its clock passes t again, and counts that lag into every
// wait.

// bucketAt reads a token_bucket cell at now.
func bucketAt(s State, now int64, l limits) level {
	if s.alg != TokenBucket {
		return level{at: now}
	}
	lv := level{at: s.t}
	if s.isFormat1() {
		lv.used = tokensLevel(s, l)
	} else {
		lv.used = storedLevel(s, l.period)
	}
	if now > s.t {
		lv.used = drain(lv.used, uint64(now)-uint64(s.t), l.amount)
		lv.at = now
	} else {
		lv.lag = uint64(s.t) - uint64(now)
	}
	return lv
}

// tokensLevel reads a format-1 token_bucket cell: its tokens left x (below
// zero after a debit) and the refill carry ^y in 1/period tokens, at t. The
// units in use are burst − tokens, exact when l has the burst the cell was
// written under.
func tokensLevel(s State, l limits) u128 {
	if s.x >= int64(l.capacity) {
		return u128{}
	}
	short := uint64(int64(l.capacity)) - uint64(s.x) // in [1, 2^64−1]
	carry := uint64(^s.y)
	if carry >= l.period {
		carry = 0
	}
	return mul(short, l.period).sub(u64(carry))
}
