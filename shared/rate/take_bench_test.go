package rate

import (
	"testing"
	"time"
)

var algorithms = []Algorithm{GCRA, FixedWindow, SlidingWindow, TokenBucket}

// BenchmarkTake is the filter's per-instance step: decode the cell, take 1,
// encode the cell.
func BenchmarkTake(b *testing.B) {
	p := Params{Amount: 1 << 20, Period: time.Minute, Burst: 1 << 20}
	for _, a := range algorithms {
		b.Run(a.String(), func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, MaxStateSize)
			now := t0
			for b.Loop() {
				s, _ := DecodeState(buf)
				now = now.Add(time.Microsecond)
				_, s = Take(a, s, now, 1, p)
				buf = s.AppendBinary(buf[:0])
			}
		})
	}
}

func BenchmarkAdjust(b *testing.B) {
	p := Params{Amount: 20000, Period: time.Minute}
	for _, a := range algorithms {
		b.Run(a.String(), func(b *testing.B) {
			b.ReportAllocs()
			var s State
			for b.Loop() {
				s = Adjust(a, s, t0, 3, p)
				s = Adjust(a, s, t0, -3, p)
			}
		})
	}
}

func TestTakeDoesNotAllocate(t *testing.T) {
	p := Params{Amount: 300, Period: time.Minute, Burst: 60}
	for _, a := range algorithms {
		buf := make([]byte, 0, MaxStateSize)
		allocs := testing.AllocsPerRun(100, func() {
			s, _ := DecodeState(buf)
			_, s = Take(a, s, t0, 1, p)
			_ = Peek(a, s, t0, p)
			s = Adjust(a, s, t0, -1, p)
			buf = s.AppendBinary(buf[:0])
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per decode, take, peek, adjust, encode; want 0", a, allocs)
		}
	}
}
