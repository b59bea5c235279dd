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
// A State holds no Params, only usage: the units in use at an instant (gcra,
// token_bucket) or the window counts (fixed_window, sliding_window). So the
// same cell can be stepped with an edited amount or burst and keeps what it
// has used; its period must not change (a counter's identity includes it).
//
// Its binary form (AppendBinary, DecodeState) is a few bytes: one tag byte
// holding a format version (high nibble) and the algorithm (low nibble),
// then big-endian fields. A shared-data cell holds exactly this. Format 2:
//
//	gcra, token_bucket  tag, instant t (unix ns), whole units in use, the
//	                    rest of a unit in 1/period units   (25 bytes)
//	fixed_window        tag, window index, count (uint16)  (11 bytes)
//	sliding_window      tag, window index, count, previous count (13 bytes)
//
// Format 1 kept a gcra theoretical arrival time and its remainder in
// 1/amount ns (17 bytes), and token_bucket tokens left rather than taken,
// so its cells changed meaning when the amount or burst was edited. A
// format-1 cell still decodes, and is converted rather than reset: a window
// cell's layout is unchanged, so it decodes as format 2; a gcra or
// token_bucket cell is read by the format-1 rules under the Params of each
// step, which is exact when they are the Params it was written under (the
// usual case: the cell outlived a module upgrade, not a limit edit). Until
// a Take or Adjust writes it in format 2, it re-encodes as it was read.
type State struct {
	alg Algorithm
	// t is the instant of the units in use (gcra, token_bucket; a format-1
	// gcra cell's theoretical arrival time), or the window index (unix ns ÷
	// period, floored) of the window algorithms.
	t int64
	// x is the gcra or token_bucket whole units in use (a format-1 gcra
	// cell's remainder in 1/amount ns, a format-1 token_bucket cell's tokens
	// left), or the current window's count.
	x int64
	// y is the rest of a gcra or token_bucket unit in use, in 1/period
	// units, or the previous window's count. It is never negative in format
	// 2, so a negative y marks a format-1 gcra or token_bucket cell: −1 for
	// gcra, ^carry for token_bucket (its refill carry in 1/period tokens).
	// The mark costs no field: a wider State makes every step measurably
	// slower.
	y int64
}

// Algorithm returns the algorithm the state belongs to, or 0 for a fresh
// cell.
func (s State) Algorithm() Algorithm { return s.alg }

// IsZero reports whether s is a fresh cell.
func (s State) IsZero() bool { return s == State{} }

// isFormat1 reports whether s is a gcra or token_bucket cell decoded from
// format 1 (see y).
func (s State) isFormat1() bool { return s.y < 0 && (s.alg == GCRA || s.alg == TokenBucket) }

// Format versions, the high nibble of the tag byte. A cell in any other
// format fails DecodeState and is treated as fresh by the caller.
const (
	stateVersion = 0x20
	format1      = 0x10
)

// Encoded sizes per algorithm, tag byte included.
const (
	sizeLevel       = 1 + 8 + 8 + 8 // gcra and token_bucket
	sizeFixedWindow = 1 + 8 + 2
	sizeSliding     = 1 + 8 + 2 + 2
	sizeFormat1GCRA = 1 + 8 + 8
	// MaxStateSize is the longest encoding AppendBinary produces.
	MaxStateSize = sizeLevel
)

// AppendBinary appends the state's binary form to dst: one zero byte for a
// fresh cell, at most MaxStateSize bytes otherwise. It does not allocate when
// dst has room.
func (s State) AppendBinary(dst []byte) []byte {
	if s.alg < GCRA || s.alg > TokenBucket {
		return append(dst, 0)
	}
	if s.isFormat1() {
		dst = append(dst, format1|byte(s.alg))
		dst = binary.BigEndian.AppendUint64(dst, uint64(s.t))
		dst = binary.BigEndian.AppendUint64(dst, uint64(s.x))
		if s.alg == TokenBucket {
			dst = binary.BigEndian.AppendUint64(dst, uint64(^s.y))
		}
		return dst
	}
	dst = append(dst, stateVersion|byte(s.alg))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.t))
	switch s.alg {
	case GCRA:
		dst = binary.BigEndian.AppendUint64(dst, uint64(s.x))
		dst = binary.BigEndian.AppendUint64(dst, uint64(s.y))
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

// DecodeState decodes a cell written by AppendBinary, in format 2 or 1. An
// empty cell and the single zero byte decode to a fresh State. Anything else
// that is not exactly one of the encodings (unknown tag or version, wrong
// length, a negative field that must not be) is an error, and the caller
// treats the cell as fresh.
func DecodeState(b []byte) (State, error) {
	if len(b) == 0 || (len(b) == 1 && b[0] == 0) {
		return State{}, nil
	}
	version := b[0] & 0xf0
	if version != stateVersion && version != format1 {
		return State{}, fmt.Errorf("rate: decoding state: tag byte %#02x: unknown format version", b[0])
	}
	alg := Algorithm(b[0] & 0x0f)
	want := 0
	switch alg {
	case GCRA:
		want = sizeLevel
		if version == format1 {
			want = sizeFormat1GCRA
		}
	case FixedWindow:
		want = sizeFixedWindow
	case SlidingWindow:
		want = sizeSliding
	case TokenBucket:
		want = sizeLevel
	default:
		return State{}, fmt.Errorf("rate: decoding state: tag byte %#02x: unknown algorithm", b[0])
	}
	if len(b) != want {
		return State{}, fmt.Errorf("rate: decoding %s state: %d bytes: want %d", alg, len(b), want)
	}
	s := State{alg: alg, t: int64(binary.BigEndian.Uint64(b[1:]))}
	switch {
	case alg == FixedWindow:
		s.x = int64(binary.BigEndian.Uint16(b[9:]))
	case alg == SlidingWindow:
		s.x = int64(binary.BigEndian.Uint16(b[9:]))
		s.y = int64(binary.BigEndian.Uint16(b[11:]))
	case version == format1:
		return decodeFormat1(s, b)
	default:
		s.x = int64(binary.BigEndian.Uint64(b[9:]))
		s.y = int64(binary.BigEndian.Uint64(b[17:]))
		if s.x < 0 {
			return State{}, fmt.Errorf("rate: decoding %s state: negative units in use %d", alg, s.x)
		}
		if s.y < 0 {
			return State{}, fmt.Errorf("rate: decoding %s state: negative remainder %d", alg, s.y)
		}
	}
	return s, nil
}

// decodeFormat1 reads the fields of a format-1 gcra or token_bucket cell b
// into s, marking s as format 1.
func decodeFormat1(s State, b []byte) (State, error) {
	s.x = int64(binary.BigEndian.Uint64(b[9:]))
	if s.alg == GCRA {
		if s.x < 0 {
			return State{}, fmt.Errorf("rate: decoding gcra state: negative remainder %d", s.x)
		}
		s.y = -1
		return s, nil
	}
	carry := int64(binary.BigEndian.Uint64(b[17:]))
	if carry < 0 {
		return State{}, fmt.Errorf("rate: decoding token_bucket state: negative carry %d", carry)
	}
	s.y = ^carry
	return s, nil
}
