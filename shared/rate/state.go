package rate

import (
	"encoding/binary"
	"fmt"
)

// State is one rate cell: what an algorithm remembers between steps. The
// zero State is a fresh cell (nothing taken yet). A State belongs to the
// algorithm that produced it; handed to another algorithm it reads as a fresh
// cell, since a counter's identity includes its algorithm.
//
// Its binary form (AppendBinary, DecodeState) is a few bytes: one tag byte
// holding a format version and the algorithm, then big-endian fields. A
// shared-data cell holds exactly this.
type State struct {
	alg Algorithm
	// t is the gcra theoretical arrival time (unix ns), the token_bucket
	// last refill (unix ns), or the window index (unix ns ÷ period, floored)
	// of the window algorithms.
	t int64
	// x is the gcra sub-nanosecond remainder of t (in 1/amount ns), the
	// token_bucket token count, or the current window's count.
	x int64
	// y is the token_bucket refill carry (in 1/period tokens), or the
	// previous window's count.
	y int64
}

// Algorithm returns the algorithm the state belongs to, or 0 for a fresh
// cell.
func (s State) Algorithm() Algorithm { return s.alg }

// IsZero reports whether s is a fresh cell.
func (s State) IsZero() bool { return s == State{} }

// stateVersion is the high nibble of the tag byte. A cell written in another
// format fails DecodeState and is treated as fresh by the caller.
const stateVersion = 0x10

// Encoded sizes per algorithm, tag byte included.
const (
	sizeGCRA        = 1 + 8 + 8
	sizeFixedWindow = 1 + 8 + 2
	sizeSliding     = 1 + 8 + 2 + 2
	sizeTokenBucket = 1 + 8 + 8 + 8
	// MaxStateSize is the longest encoding AppendBinary produces.
	MaxStateSize = sizeTokenBucket
)

// AppendBinary appends the state's binary form to dst: one zero byte for a
// fresh cell, at most MaxStateSize bytes otherwise. It does not allocate when
// dst has room.
func (s State) AppendBinary(dst []byte) []byte {
	if s.alg < GCRA || s.alg > TokenBucket {
		return append(dst, 0)
	}
	dst = append(dst, stateVersion|byte(s.alg))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.t))
	switch s.alg {
	case GCRA:
		dst = binary.BigEndian.AppendUint64(dst, uint64(s.x))
	case FixedWindow:
		dst = binary.BigEndian.AppendUint16(dst, uint16(s.x))
	case SlidingWindow:
		dst = binary.BigEndian.AppendUint16(dst, uint16(s.x))
		dst = binary.BigEndian.AppendUint16(dst, uint16(s.y))
	case TokenBucket:
		dst = binary.BigEndian.AppendUint64(dst, uint64(s.x))
		dst = binary.BigEndian.AppendUint64(dst, uint64(s.y))
	}
	return dst
}

// DecodeState decodes a cell written by AppendBinary. An empty cell and the
// single zero byte decode to a fresh State. Anything else that is not exactly
// one of the encodings (unknown tag or version, wrong length, a negative
// field that must not be) is an error, and the caller treats the cell as
// fresh.
func DecodeState(b []byte) (State, error) {
	if len(b) == 0 || (len(b) == 1 && b[0] == 0) {
		return State{}, nil
	}
	if b[0]&0xf0 != stateVersion {
		return State{}, fmt.Errorf("rate: decoding state: tag byte %#02x: unknown format version", b[0])
	}
	alg := Algorithm(b[0] & 0x0f)
	want := 0
	switch alg {
	case GCRA:
		want = sizeGCRA
	case FixedWindow:
		want = sizeFixedWindow
	case SlidingWindow:
		want = sizeSliding
	case TokenBucket:
		want = sizeTokenBucket
	default:
		return State{}, fmt.Errorf("rate: decoding state: tag byte %#02x: unknown algorithm", b[0])
	}
	if len(b) != want {
		return State{}, fmt.Errorf("rate: decoding %s state: %d bytes: want %d", alg, len(b), want)
	}
	s := State{alg: alg, t: int64(binary.BigEndian.Uint64(b[1:]))}
	switch alg {
	case GCRA:
		s.x = int64(binary.BigEndian.Uint64(b[9:]))
		if s.x < 0 {
			return State{}, fmt.Errorf("rate: decoding gcra state: negative remainder %d", s.x)
		}
	case FixedWindow:
		s.x = int64(binary.BigEndian.Uint16(b[9:]))
	case SlidingWindow:
		s.x = int64(binary.BigEndian.Uint16(b[9:]))
		s.y = int64(binary.BigEndian.Uint16(b[11:]))
	case TokenBucket:
		s.x = int64(binary.BigEndian.Uint64(b[9:]))
		s.y = int64(binary.BigEndian.Uint64(b[17:]))
		if s.y < 0 {
			return State{}, fmt.Errorf("rate: decoding token_bucket state: negative carry %d", s.y)
		}
	}
	return s, nil
}
