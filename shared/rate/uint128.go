package rate

import "math/bits"

// u128 is an unsigned 128-bit integer. The algorithms keep amounts scaled by
// the period or the amount so that no step rounds; products of two int64
// values need 128 bits, and every operation here saturates instead of
// wrapping so that no input, however absurd, can panic or wrap around.
type u128 struct{ hi, lo uint64 }

var maxU128 = u128{^uint64(0), ^uint64(0)}

func u64(v uint64) u128 { return u128{0, v} }

// mul returns a×b exactly. Operands whose bit lengths add up to 64 or
// less (most amounts, counts and periods) multiply in one machine word: in
// wasm bits.Mul64 and bits.Div64 are software routines, several times the
// cost of a native multiply or divide.
func mul(a, b uint64) u128 {
	if bits.Len64(a)+bits.Len64(b) <= 64 {
		return u128{0, a * b}
	}
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, c := bits.Add64(x.hi, y.hi, c)
	if c != 0 {
		return maxU128
	}
	return u128{hi, lo}
}

// sub returns x−y, or 0 when y > x.
func (x u128) sub(y u128) u128 {
	if x.less(y) {
		return u128{}
	}
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, b)
	return u128{hi, lo}
}

func (x u128) less(y u128) bool {
	return x.hi < y.hi || (x.hi == y.hi && x.lo < y.lo)
}

func (x u128) isZero() bool { return x.hi == 0 && x.lo == 0 }

// divmod returns ⌊x/d⌋ and x mod d for d > 0. A quotient wider than 64 bits
// saturates to the largest uint64 (the remainder is then meaningless and
// reported as 0).
func (x u128) divmod(d uint64) (q, r uint64) {
	if d == 0 {
		return ^uint64(0), 0
	}
	if x.hi >= d {
		return ^uint64(0), 0
	}
	if x.hi == 0 {
		return x.lo / d, x.lo % d
	}
	return bits.Div64(x.hi, x.lo, d)
}

// divCeil returns ⌈x/d⌉, saturating like divmod.
func (x u128) divCeil(d uint64) uint64 {
	q, r := x.divmod(d)
	if r != 0 && q != ^uint64(0) {
		q++
	}
	return q
}

// clampInt64 converts a uint64 to a non-negative int64, saturating.
func clampInt64(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}
