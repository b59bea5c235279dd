package jsontok

import (
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped as encoding/json escapes
// it with HTML escaping off (json.Encoder.SetEscapeHTML(false)): the quote
// and the backslash, \b \f \n \r \t, other control characters as \u00XX,
// U+2028 and U+2029 as \u2028 and \u2029 (JavaScript reads them as line
// ends), and each byte of invalid UTF-8 as \ufffd. Every writer of JSON in
// the project escapes with it (shared/wire's bodies, the ledger row).
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = AppendEscaped(dst, s)
	return append(dst, '"')
}

// AppendKeyString appends key, the JSON text that stands before a value
// (a member's quoted name and colon, with the comma or brace before it:
// `,"node":`), as it is, and then s as AppendString writes it.
func AppendKeyString(dst []byte, key, s string) []byte {
	dst = append(dst, key...)
	return AppendString(dst, s)
}

// AppendKeyInt is AppendKeyString for a number, written as AppendInt
// writes it.
func AppendKeyInt(dst []byte, key string, v int64) []byte {
	dst = append(dst, key...)
	return AppendInt(dst, v)
}

// AppendKeyBool is AppendKeyString for true or false.
func AppendKeyBool(dst []byte, key string, b bool) []byte {
	dst = append(dst, key...)
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// AppendStrings appends ss as a JSON array of AppendString's strings ([]
// when ss is empty or nil).
func AppendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, s)
	}
	return append(dst, ']')
}

// AppendEscaped appends what AppendString writes between the quotes, for
// a string written in parts.
func AppendEscaped(dst []byte, s string) []byte {
	i := plainPrefix(s)
	if i == len(s) {
		return append(dst, s...) // most strings: ids, nodes, models
	}
	return appendEscaped(dst, s, i, false)
}

// AppendStringHTML is AppendString that also writes <, > and & as
// \u003c, \u003e and \u0026: what encoding/json's Marshal writes, and so
// the canonical configuration's strings (the plan hash).
func AppendStringHTML(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s, 0, true)
	return append(dst, '"')
}

// appendEscaped appends s escaped, its first plain bytes already known to
// be plain.
func appendEscaped(dst []byte, s string, plain int, html bool) []byte {
	start, i := 0, plain
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!html || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}

// plainPrefix is the length of the longest prefix of s that AppendString
// copies as it is (printable ASCII other than a quote or a backslash),
// found eight bytes at a time.
func plainPrefix(s string) int {
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := word(b, i)
		q, bs := x^(ones*'"'), x^(ones*'\\')
		// High bit set where a byte is a quote, a backslash, below 0x20
		// or above 0x7f.
		if t := (((q - ones) &^ q) | ((bs - ones) &^ bs) | ((x - ones*0x20) &^ x) | x) & highs; t != 0 {
			return i + bits.TrailingZeros64(t)/8
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

// AppendInt is strconv.AppendInt(dst, v, 10), with the common case (a
// non-negative count) written without strconv's general machinery, which
// costs several times as much in the filter's wasm.
func AppendInt(dst []byte, v int64) []byte {
	if v < 0 {
		return strconv.AppendInt(dst, v, 10)
	}
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		if v /= 10; v == 0 {
			break
		}
	}
	return append(dst, b[i:]...)
}

// AppendFloat appends f as encoding/json writes a float of bitSize bits
// (32 or 64): strconv's shortest digits, in 'f' form, but 'e' below 1e-6
// and from 1e21 with the exponent's leading zero dropped (1e-07 is
// 1e-7). NaN and the infinities are not JSON: ok is false and dst comes
// back as it was.
func AppendFloat(dst []byte, f float64, bitSize int) (out []byte, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bitSize == 64 && (abs < 1e-6 || abs >= 1e21) || bitSize == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b := strconv.AppendFloat(dst, f, format, -1, bitSize)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}
