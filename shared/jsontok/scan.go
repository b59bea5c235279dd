package jsontok

import (
	"math/bits"
	"unicode/utf8"
)

// Eight-byte-at-a-time scanning. A byte of the mask t below has its high
// bit set where x's byte is a match; the borrows of the subtraction can
// only mark bytes above a match, so the lowest mark is exact.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// IsSpace reports whether c is JSON whitespace: space, tab, CR or LF.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the offset of the first byte at or after i that is not
// whitespace (len(b) when there is none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// strClass sorts string bytes: 0 plain, 1 the closing quote, 2 a
// backslash, 3 a control character (ScanString's bytewise tail).
var strClass = func() (t [256]uint8) {
	for c := 0; c < ' '; c++ {
		t[c] = 3
	}
	t['"'] = 1
	t['\\'] = 2
	return t
}()

// ScanString scans the string whose opening quote is b[i]. It returns the
// offset just past its closing quote and shrink, how many bytes fewer its
// decoded text has than the bytes between its quotes (so it holds an
// escape exactly when shrink > 0). On a fault code is not 0 and end is the
// offset of the byte at fault (len(b) when the string is cut short). With
// checkUTF8 a byte sequence that is not UTF-8 is a fault (ErrUTF8);
// without, any byte from 0x20 up is part of the string.
//
// Decoded, an escape is the bytes it stands for; a \u escape of a
// surrogate that is not half of a valid pair is U+FFFD (three bytes), as
// encoding/json and gjson decode it.
//
// Runs of plain bytes are crossed sixteen bytes at a time in the function
// itself: in the filter's wasm a call per run would cost more than most
// runs.
func ScanString(b []byte, i int, checkUTF8 bool) (end, shrink int, code Code) {
	n := len(b)
	var high uint64 // with checkUTF8, bytes from 0x80 up also end a run
	if checkUTF8 {
		high = ^uint64(0)
	}
	i++
	for {
		for i+16 <= n {
			x, y := word(b, i), word(b, i+8)
			qx, bx := x^(ones*'"'), x^(ones*'\\')
			u := ((qx - ones) &^ qx) | ((bx - ones) &^ bx) | ((x - ones*' ') &^ x) | x&high
			qy, by := y^(ones*'"'), y^(ones*'\\')
			v := ((qy - ones) &^ qy) | ((by - ones) &^ by) | ((y - ones*' ') &^ y) | y&high
			if (u|v)&highs != 0 {
				if u &= highs; u != 0 {
					i += bits.TrailingZeros64(u) / 8
				} else {
					i += 8 + bits.TrailingZeros64(v&highs)/8
				}
				goto stop
			}
			i += 16
		}
		for i < n && strClass[b[i]] == 0 && (b[i] < utf8.RuneSelf || !checkUTF8) {
			i++
		}
	stop:
		if i >= n {
			return n, 0, ErrString
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, shrink, 0
		case c < ' ':
			return i, 0, ErrControl
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, 0, ErrUTF8
			}
			i += size
			continue
		}
		if i+1 >= n {
			return n, 0, ErrEscape
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			shrink++
			i += 2
		case 'u':
			r, at := hex4(b, i+2)
			if at >= 0 {
				return at, 0, ErrHex
			}
			i += 6
			if r >= 0xD800 && r < 0xDC00 && i+1 < n && b[i] == '\\' && b[i+1] == 'u' {
				if r2, at := hex4(b, i+2); at < 0 && r2 >= 0xDC00 && r2 < 0xE000 {
					shrink += 12 - 4 // a pair: one four-byte rune
					i += 6
					continue
				}
			}
			switch {
			case r < 0x80:
				shrink += 6 - 1
			case r < 0x800:
				shrink += 6 - 2
			default: // surrogate halves decode as U+FFFD's three bytes
				shrink += 6 - 3
			}
		default:
			return i + 1, 0, ErrEscape
		}
	}
}

// hex4 decodes the four hexadecimal digits at b[i:]; at is -1, or the
// offset of the first byte that is not one (len(b) when b ends first).
func hex4(b []byte, i int) (r rune, at int) {
	for k := i; k < i+4; k++ {
		if k >= len(b) {
			return 0, len(b)
		}
		c := b[k]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, k
		}
	}
	return r, -1
}

// ScanNumber scans the number that starts at b[i] (a '-' or a digit):
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. It returns the offset
// just past it, or, with code ErrNumber, ErrFraction or ErrExponent, the
// offset of the byte at fault (len(b) when b ends too soon). A number ends
// where the grammar does: in 01 the number is 0.
func ScanNumber(b []byte, i int) (end int, code Code) {
	n := len(b)
	if i < n && b[i] == '-' {
		i++
	}
	switch {
	case i >= n || !isDigit(b[i]):
		return i, ErrNumber
	case b[i] == '0':
		i++
	default:
		for i < n && isDigit(b[i]) {
			i++
		}
	}
	if i < n && b[i] == '.' {
		i++
		if i >= n || !isDigit(b[i]) {
			return i, ErrFraction
		}
		for i < n && isDigit(b[i]) {
			i++
		}
	}
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < n && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= n || !isDigit(b[i]) {
			return i, ErrExponent
		}
		for i < n && isDigit(b[i]) {
			i++
		}
	}
	return i, 0
}

// ScanLiteral scans the true, false or null that starts at b[i] (a 't',
// 'f' or 'n'). It returns its kind and the offset just past it, or Err and
// the offset of the first byte that differs (len(b) when b ends first).
func ScanLiteral(b []byte, i int) (Kind, int) {
	word, kind := "null", Null
	switch b[i] {
	case 't':
		word, kind = "true", True
	case 'f':
		word, kind = "false", False
	}
	if len(b)-i >= len(word) && string(b[i:i+len(word)]) == word {
		return kind, i + len(word)
	}
	for k := 1; k < len(word); k++ {
		if i+k >= len(b) || b[i+k] != word[k] {
			return Err, min(i+k, len(b))
		}
	}
	return Err, i // unreachable: the word matched
}

// IsNumber reports whether s is exactly one number in JSON's grammar.
func IsNumber(s string) bool {
	b := []byte(s)
	if len(b) == 0 || b[0] != '-' && !isDigit(b[0]) {
		return false
	}
	end, code := ScanNumber(b, 0)
	return code == 0 && end == len(b)
}
