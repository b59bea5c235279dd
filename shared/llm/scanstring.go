package llm

import "math/bits"

// Eight-byte-at-a-time scanning. In wasm a loop over single bytes costs
// about 15 ns a byte, against under 2 ns for one that tests a word at a
// time, so every loop that crosses a request body or a stream does the
// latter.

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainRun returns the offset of the first byte at or after i that ends a
// run of plain string bytes: a quote, a backslash or a control character
// (len(b) when there is none).
func plainRun(b []byte, i int) int {
	n := len(b)
	for i+16 <= n {
		x, y := word(b, i), word(b, i+8)
		// A byte of t has its high bit set where x's byte is a quote, a
		// backslash or below 0x20; borrows can only mark bytes above a
		// match, so the lowest mark is exact.
		qx, bx := x^(ones*'"'), x^(ones*'\\')
		t := ((qx - ones) &^ qx) | ((bx - ones) &^ bx) | ((x - ones*' ') &^ x)
		qy, by := y^(ones*'"'), y^(ones*'\\')
		u := ((qy - ones) &^ qy) | ((by - ones) &^ by) | ((y - ones*' ') &^ y)
		if (t|u)&highs != 0 {
			if t &= highs; t != 0 {
				return i + bits.TrailingZeros64(t)/8
			}
			return i + 8 + bits.TrailingZeros64(u&highs)/8
		}
		i += 16
	}
	if i+8 <= n {
		x := word(b, i)
		qx, bx := x^(ones*'"'), x^(ones*'\\')
		if t := (((qx - ones) &^ qx) | ((bx - ones) &^ bx) | ((x - ones*' ') &^ x)) & highs; t != 0 {
			return i + bits.TrailingZeros64(t)/8
		}
		i += 8
	}
	for i < n && strClass[b[i]] == 0 {
		i++
	}
	return i
}

// readString reads the JSON string whose opening quote is b[i]. It
// returns the offset just past its closing quote, its decoded length
// (what decodedLen gives: a JSON escape counts the bytes it stands for, a
// surrogate that is not half of a valid pair 3), and whether it holds an
// escape; ok is false when the string is cut short or holds a control
// byte or an invalid escape.
func readString(b []byte, i int) (end int, n int64, esc, ok bool) {
	i++
	start := i
	shrink := 0 // raw bytes of escapes beyond the bytes they decode to
	for {
		i = plainRun(b, i)
		if i >= len(b) {
			return i, 0, esc, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, int64(i - start - shrink), esc, true
		case c < ' ':
			return i, 0, esc, false
		}
		esc = true
		if i+1 >= len(b) {
			return i, 0, esc, false
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			shrink++
			i += 2
		case 'u':
			r, ok := hexAt(b, i+2)
			if !ok {
				return i, 0, esc, false
			}
			i += 6
			if r >= 0xD800 && r < 0xDC00 && i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
				if r2, ok := hexAt(b, i+2); ok && r2 >= 0xDC00 && r2 < 0xE000 {
					shrink += 12 - 4 // a pair: one 4-byte rune
					i += 6
					continue
				}
			}
			switch {
			case r < 0x80:
				shrink += 6 - 1
			case r < 0x800:
				shrink += 6 - 2
			default: // surrogate halves count as U+FFFD's 3
				shrink += 6 - 3
			}
		default:
			return i, 0, esc, false
		}
	}
}

// hexAt decodes the four hexadecimal digits at b[i:].
func hexAt(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
