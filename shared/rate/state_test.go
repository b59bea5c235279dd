package rate

import (
	"encoding/binary"
	"math/big"
	"math/bits"
	"math/rand"
	"testing"
	"time"
)

func TestStateEncoding(t *testing.T) {
	p := Params{Amount: 7, Period: time.Minute, Burst: 9}
	for _, a := range algorithms {
		_, s := Take(a, State{}, t0, 3, p)
		b := s.AppendBinary(nil)
		if b[0] != 0x20|byte(a) {
			t.Errorf("%s: tag byte %#x", a, b[0])
		}
		back, err := DecodeState(b)
		if err != nil || back != s {
			t.Errorf("%s: %x decodes to %+v, %v; want %+v", a, b, back, err, s)
		}
		if back.Algorithm() != a {
			t.Errorf("%s: decoded state belongs to %s", a, back.Algorithm())
		}
	}
	for _, b := range [][]byte{nil, {}, {0}} {
		if s, err := DecodeState(b); err != nil || !s.IsZero() {
			t.Errorf("%x: %+v, %v; want a fresh cell", b, s, err)
		}
	}
	if got := (State{}).AppendBinary(nil); string(got) != "\x00" {
		t.Errorf("fresh cell encodes to %x; want 00", got)
	}
}

func TestDecodeStateErrors(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{[]byte{0x31, 0, 0}, "rate: decoding state: tag byte 0x31: unknown format version"},
		{[]byte{0x01}, "rate: decoding state: tag byte 0x01: unknown format version"},
		{[]byte{0x25}, "rate: decoding state: tag byte 0x25: unknown algorithm"},
		{[]byte{0x20}, "rate: decoding state: tag byte 0x20: unknown algorithm"},
		{[]byte{0x15}, "rate: decoding state: tag byte 0x15: unknown algorithm"},
		{[]byte{0x21, 1, 2, 3}, "rate: decoding gcra state: 4 bytes: want 25"},
		{[]byte{0x11, 1, 2, 3}, "rate: decoding gcra state: 4 bytes: want 17"},
		{make25(0x21, 0, 0)[:17], "rate: decoding gcra state: 17 bytes: want 25"},
		{[]byte{0x23, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "rate: decoding sliding_window state: 11 bytes: want 13"},
		{make25(0x21, -5, 0), "rate: decoding gcra state: negative units in use -5"},
		{make25(0x24, 0, -1), "rate: decoding token_bucket state: negative remainder -1"},
		{append([]byte{0x11}, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0), "rate: decoding gcra state: negative remainder -9223372036854775808"},
		{make25(0x14, -3, -1), "rate: decoding token_bucket state: negative carry -1"},
	} {
		_, err := DecodeState(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("%x: error %v; want %q", c.in, err, c.want)
		}
	}
}

// make25 returns a 25-byte gcra or token_bucket cell with tag, t = 0, and
// the given x and y.
func make25(tag byte, x, y int64) []byte {
	b := binary.BigEndian.AppendUint64([]byte{tag}, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(x))
	return binary.BigEndian.AppendUint64(b, uint64(y))
}

func TestParseAlgorithm(t *testing.T) {
	for _, a := range algorithms {
		got, ok := ParseAlgorithm(a.String())
		if !ok || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a.String(), got, ok)
		}
	}
	for _, s := range []string{"", "GCRA", "leaky_bucket", "unknown"} {
		if _, ok := ParseAlgorithm(s); ok {
			t.Errorf("ParseAlgorithm(%q) accepted", s)
		}
	}
	if s := Algorithm(0).String(); s != "unknown" {
		t.Errorf("Algorithm(0).String() = %q", s)
	}
}

// format1Cell returns a format-1 cell: tag, t, then x and y as the
// algorithm's format-1 layout has them.
func format1Cell(a Algorithm, t, x, y int64) []byte {
	b := binary.BigEndian.AppendUint64([]byte{0x10 | byte(a)}, uint64(t))
	switch a {
	case GCRA:
		b = binary.BigEndian.AppendUint64(b, uint64(x))
	case FixedWindow:
		b = binary.BigEndian.AppendUint16(b, uint16(x))
	case SlidingWindow:
		b = binary.BigEndian.AppendUint16(b, uint16(x))
		b = binary.BigEndian.AppendUint16(b, uint16(y))
	case TokenBucket:
		b = binary.BigEndian.AppendUint64(b, uint64(x))
		b = binary.BigEndian.AppendUint64(b, uint64(y))
	}
	return b
}

// TestFormat1Cells: a cell written before the format changed reads as it
// did, under the Params it was written under. A gcra or token_bucket cell
// stays format 1 until a step writes it; a window cell, whose layout did not
// change, is format 2 once decoded.
func TestFormat1Cells(t *testing.T) {
	n0 := t0.UnixNano()
	tpm := Params{Amount: 20000, Period: time.Minute}
	bucket := Params{Amount: 2, Period: 3 * time.Second, Burst: 5}
	win := Params{Amount: 3, Period: 10 * time.Second}
	for _, c := range []struct {
		name string
		alg  Algorithm
		cell []byte
		p    Params
		at   time.Time
		n    int64
		want Result
	}{
		// Seed 002's tpm cell after one 16,391-token reserve: its TAT.
		{"tpm peek", GCRA, format1Cell(GCRA, n0+49173e6, 0, 0), tpm, t0, 0, ok(20000, 3609, 49173*time.Millisecond)},
		{"tpm refused", GCRA, format1Cell(GCRA, n0+49173e6, 0, 0), tpm, t0, 16391, no(20000, 3609, 38346*time.Millisecond, 49173*time.Millisecond)},
		{"tpm take", GCRA, format1Cell(GCRA, n0+49173e6, 0, 0), tpm, t0, 1, ok(20000, 3608, 49176*time.Millisecond)},
		// 7/min after one take: TAT t0 + 8,571,428,571 ns and 3/7 ns.
		{"sub-ns remainder", GCRA, format1Cell(GCRA, n0+8571428571, 3, 0), Params{Amount: 7, Period: time.Minute}, t0, 0, ok(7, 6, 8571428572)},
		{"drained", GCRA, format1Cell(GCRA, n0-1, 3, 0), Params{Amount: 7, Period: time.Minute}, t0, 7, ok(7, 0, time.Minute)},
		// 1⅓ tokens left of 5; 2 after one more second.
		{"tokens left", TokenBucket, format1Cell(TokenBucket, n0, 1, 1e9), bucket, t0, 0, ok(5, 1, 5500*time.Millisecond)},
		{"tokens refilled", TokenBucket, format1Cell(TokenBucket, n0, 1, 1e9), bucket, t0.Add(time.Second), 3, no(5, 2, 1500*time.Millisecond, 4500*time.Millisecond)},
		{"tokens below zero", TokenBucket, format1Cell(TokenBucket, n0, -3, 0), bucket, t0, 0, ok(5, 0, 12*time.Second)},
		{"tokens take", TokenBucket, format1Cell(TokenBucket, n0, 4, 0), bucket, t0, 4, ok(5, 0, 7500*time.Millisecond)},
		{"fixed window", FixedWindow, format1Cell(FixedWindow, n0/1e10, 2, 0), win, t0, 1, ok(3, 0, 10*time.Second)},
		{"sliding window", SlidingWindow, format1Cell(SlidingWindow, n0/1e10, 1, 2), win, t0.Add(5 * time.Second), 0, ok(3, 1, 15*time.Second)},
	} {
		s, err := DecodeState(c.cell)
		if err != nil || s.Algorithm() != c.alg {
			t.Errorf("%s: %x decodes to %+v, %v", c.name, c.cell, s, err)
			continue
		}
		if c.alg == FixedWindow || c.alg == SlidingWindow {
			c.cell[0] = 0x20 | byte(c.alg) // the same layout: format 2 once decoded
		}
		if got := s.AppendBinary(nil); string(got) != string(c.cell) {
			t.Errorf("%s: %x re-encodes to %x", c.name, c.cell, got)
		}
		got, next := Take(c.alg, s, c.at, c.n, c.p)
		if got != c.want {
			t.Errorf("%s: take %d at t0+%v:\n got %+v\nwant %+v", c.name, c.n, c.at.Sub(t0), got, c.want)
		}
		wrote := next.AppendBinary(nil)
		switch {
		case !got.Allowed || c.n == 0:
			if string(wrote) != string(c.cell) {
				t.Errorf("%s: a step that writes nothing turned %x into %x", c.name, c.cell, wrote)
			}
		case wrote[0] != 0x20|byte(c.alg):
			t.Errorf("%s: the first write is %x; want format 2", c.name, wrote)
		}
	}
}

// TestU128FastPaths holds mul and divmod, whose one-word shortcuts skip
// bits.Mul64 and bits.Div64, to math/big on operands of every width.
func TestU128FastPaths(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	for i := 0; i < 100000; i++ {
		a, b := rng.Uint64()>>rng.Intn(64), rng.Uint64()>>rng.Intn(64)
		p := mul(a, b)
		want := new(big.Int).Mul(new(big.Int).SetUint64(a), new(big.Int).SetUint64(b))
		got := new(big.Int).Or(new(big.Int).Lsh(new(big.Int).SetUint64(p.hi), 64), new(big.Int).SetUint64(p.lo))
		if got.Cmp(want) != 0 {
			t.Fatalf("mul(%d, %d) = %v, want %v", a, b, got, want)
		}
		d := rng.Uint64()>>rng.Intn(64) | 1
		x := u128{rng.Uint64() >> rng.Intn(64) >> rng.Intn(2) * 64, rng.Uint64()}
		if i%2 == 0 {
			x.hi = 0
		}
		q, r := x.divmod(d)
		if x.hi < d {
			wq, wr := bits.Div64(x.hi, x.lo, d)
			if q != wq || r != wr {
				t.Fatalf("(%d,%d).divmod(%d) = %d, %d, want %d, %d", x.hi, x.lo, d, q, r, wq, wr)
			}
		}
	}
}
