package rate

import (
	"math"
	"testing"
	"time"
)

// fuzzAlgorithm feeds one algorithm arbitrary cells, instants, costs and
// params, then edits the amount and the burst (amount2, burst2; the period
// stays, as it does for one counter) and steps the cell again. Nothing may
// panic, the invariants every caller relies on must hold for any input, and
// an edit must keep what the cell has in use.
func fuzzAlgorithm(f *testing.F, a Algorithm) {
	seedNow := t0.UnixNano()
	minute := int64(time.Minute)
	_, cell := Take(a, State{}, t0, 5, Params{Amount: 10, Period: time.Minute})
	f.Add(cell.AppendBinary(nil), seedNow, int64(1), int64(10), minute, int64(0), int64(3), int64(10), int64(0))
	_, full := Take(a, State{}, t0, 3, Params{Amount: 3, Period: time.Minute})
	f.Add(full.AppendBinary(nil), seedNow, int64(1), int64(3), minute, int64(0), int64(0), int64(10), int64(0))
	f.Add(full.AppendBinary(nil), seedNow+int64(time.Second), int64(2), int64(3), minute, int64(3), int64(-1), int64(1), int64(60))
	f.Add([]byte{}, seedNow, int64(16391), int64(20000), minute, int64(20000), int64(-16000), int64(200000), int64(16384))
	f.Add([]byte{0x11, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}, int64(math.MinInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(1), int64(math.MaxInt64), int64(math.MinInt64), int64(1), int64(math.MaxInt64))
	f.Add([]byte{0x14, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9}, int64(math.MaxInt64), int64(2), int64(math.MaxInt64), int64(math.MaxInt64), int64(-1), int64(math.MaxInt64), int64(2), int64(-1))
	f.Add([]byte{0x21, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}, int64(math.MinInt64), int64(1), int64(math.MaxInt64), int64(1), int64(0), int64(math.MaxInt64), int64(1), int64(1))
	f.Add([]byte{0x13, 0, 0, 0, 0, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff}, int64(8), int64(65535), int64(70000), int64(1), int64(0), int64(-70000), int64(3), int64(0))
	f.Fuzz(func(t *testing.T, cell []byte, nowNs, cost, amount, period, burst, delta, amount2, burst2 int64) {
		s, err := DecodeState(cell)
		if err != nil {
			s = State{}
		}
		now := time.Unix(0, nowNs)
		p := Params{Amount: amount, Period: time.Duration(period), Burst: burst}
		edited := Params{Amount: amount2, Period: time.Duration(period), Burst: burst2}
		next := fuzzStep(t, a, s, now, cost, delta, p)
		checkEdit(t, a, next, now, p, edited)
		fuzzStep(t, a, next, now, cost, delta, edited)
	})
}

// fuzzStep peeks, takes cost and adjusts by delta at now, checking every
// result, and returns the cell after the take (after the adjust when the
// take was refused).
func fuzzStep(t *testing.T, a Algorithm, s State, now time.Time, cost, delta int64, p Params) State {
	t.Helper()
	peek := Peek(a, s, now, p)
	checkResult(t, "peek", peek)
	if !peek.Allowed || peek.RetryAfter != 0 || peek.Unfittable {
		t.Fatalf("peek must be an admitted probe: %+v", peek)
	}

	r, next := Take(a, s, now, cost, p)
	checkResult(t, "take", r)
	checkEncoding(t, next)
	switch {
	case r.Allowed:
		if r.RetryAfter != 0 || r.Unfittable {
			t.Fatalf("admitted take with a retry hint or unfittable: %+v", r)
		}
		if cost > 0 && r.Remaining > peek.Remaining-min(cost, peek.Remaining) {
			t.Fatalf("take %d admitted but remaining went from %d to %d", cost, peek.Remaining, r.Remaining)
		}
	default:
		if next != s {
			t.Fatalf("refused take changed the cell: %+v → %+v", s, next)
		}
		if r.Unfittable != (cost > r.Limit) {
			t.Fatalf("unfittable %v for cost %d against limit %d", r.Unfittable, cost, r.Limit)
		}
		if r.Unfittable && r.RetryAfter != 0 {
			t.Fatalf("unfittable with a retry hint: %+v", r)
		}
		if !r.Unfittable && r.RetryAfter <= 0 {
			t.Fatalf("refused without a retry hint: %+v", r)
		}
		nowNs := now.UnixNano()
		if !r.Unfittable && nowNs > 0 && nowNs < math.MaxInt64/2 && r.RetryAfter < math.MaxInt64/4 {
			later, _ := Take(a, s, now.Add(r.RetryAfter), cost, p)
			if !later.Allowed {
				t.Fatalf("refused with retry after %v, but still refused then: %+v", r.RetryAfter, later)
			}
			early, _ := Take(a, s, now.Add(r.RetryAfter-1), cost, p)
			if early.Allowed {
				t.Fatalf("refused with retry after %v, but admitted 1ns earlier", r.RetryAfter)
			}
		}
	}

	adj := Adjust(a, s, now, delta, p)
	checkEncoding(t, adj)
	after := Peek(a, adj, now, p)
	checkResult(t, "peek after adjust", after)
	if delta > 0 && after.Remaining > peek.Remaining {
		t.Fatalf("debit %d raised remaining from %d to %d", delta, peek.Remaining, after.Remaining)
	}
	if delta < 0 && after.Remaining < peek.Remaining {
		t.Fatalf("credit %d lowered remaining from %d to %d", delta, peek.Remaining, after.Remaining)
	}
	if r.Allowed {
		return next
	}
	return adj
}

// checkEdit reads the cell s under p and under edited at the instant a gcra
// or token_bucket cell was written (at now, for the windows): both must see
// the same units in use, each capped at its own Limit. A format-1 cell is exempt: it is read
// under the Params it was written under.
func checkEdit(t *testing.T, a Algorithm, s State, now time.Time, p, edited Params) {
	t.Helper()
	if s.isFormat1() {
		return
	}
	at := now
	if s.alg == GCRA || s.alg == TokenBucket {
		at = time.Unix(0, s.t)
	}
	// Read with the widest burst, the units in use are not capped at all.
	wide, wideEdited := p, edited
	wide.Burst, wideEdited.Burst = math.MaxInt64, math.MaxInt64
	for _, c := range [][2]Params{{p, edited}, {wide, wideEdited}} {
		before, after := Peek(a, s, at, c[0]), Peek(a, s, at, c[1])
		inUse, inUseAfter := before.Limit-before.Remaining, after.Limit-after.Remaining
		if inUse < before.Limit && inUseAfter != min(inUse, after.Limit) {
			t.Fatalf("%d of %d in use under %+v, but %d of %d under %+v", inUse, before.Limit, c[0], inUseAfter, after.Limit, c[1])
		}
		if inUseAfter < after.Limit && inUse != min(inUseAfter, before.Limit) {
			t.Fatalf("%d of %d in use under %+v, but %d of %d under %+v", inUseAfter, after.Limit, c[1], inUse, before.Limit, c[0])
		}
	}
}

func checkResult(t *testing.T, what string, r Result) {
	t.Helper()
	if r.Limit < 0 || r.Remaining < 0 || r.Remaining > r.Limit {
		t.Fatalf("%s: remaining %d outside [0, %d]", what, r.Remaining, r.Limit)
	}
	if r.RetryAfter < 0 || r.ResetAfter < 0 {
		t.Fatalf("%s: negative duration: %+v", what, r)
	}
}

func checkEncoding(t *testing.T, s State) {
	t.Helper()
	b := s.AppendBinary(nil)
	if len(b) > MaxStateSize {
		t.Fatalf("state encodes to %d bytes, more than MaxStateSize", len(b))
	}
	back, err := DecodeState(b)
	if err != nil || back != s {
		t.Fatalf("state %+v does not survive its encoding %x: %+v, %v", s, b, back, err)
	}
}

func FuzzGCRA(f *testing.F)          { fuzzAlgorithm(f, GCRA) }
func FuzzFixedWindow(f *testing.F)   { fuzzAlgorithm(f, FixedWindow) }
func FuzzSlidingWindow(f *testing.F) { fuzzAlgorithm(f, SlidingWindow) }
func FuzzTokenBucket(f *testing.F)   { fuzzAlgorithm(f, TokenBucket) }

// FuzzDecodeState: any bytes either decode to a State that re-encodes to the
// same bytes (a format-1 window cell, to the same bytes in format 2), or
// fail.
func FuzzDecodeState(f *testing.F) {
	for _, a := range []Algorithm{GCRA, FixedWindow, SlidingWindow, TokenBucket} {
		_, s := Take(a, State{}, t0, 1, Params{Amount: 3, Period: time.Second})
		f.Add(s.AppendBinary(nil))
	}
	f.Add([]byte{0})
	f.Add([]byte{0x25, 1, 2})
	f.Add([]byte{0x11, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0x12, 0, 0, 0, 0, 0, 0, 0, 9, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeState(b)
		if err != nil {
			return
		}
		out := s.AppendBinary(nil)
		want := append([]byte(nil), b...)
		if len(b) == 0 {
			want = []byte{0}
		}
		if a := s.Algorithm(); (a == FixedWindow || a == SlidingWindow) && b[0]&0xf0 == 0x10 {
			want[0] = 0x20 | byte(a) // a format-1 window cell is format 2 once decoded
		}
		if string(out) != string(want) {
			t.Fatalf("decoded %x to %+v, which encodes to %x", b, s, out)
		}
	})
}
