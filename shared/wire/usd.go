package wire

import (
	"fmt"
	"strconv"
)

// NanosPerUSD is the nanodollar grid: every budget_usd amount is an integer
// count of nanodollars.
const NanosPerUSD = 1_000_000_000

// AppendUSD appends a nanodollar amount as a plain decimal number of
// dollars: no exponent, no trailing zeros, no decimal point for whole
// dollars (12600 → 0.0000126, 1000 → 0.000001, 1e12 → 1000, 0 → 0).
func AppendUSD(dst []byte, nanos int64) []byte {
	mag := uint64(nanos)
	if nanos < 0 {
		dst = append(dst, '-')
		mag = -mag
	}
	dst = strconv.AppendUint(dst, mag/NanosPerUSD, 10)
	frac := mag % NanosPerUSD
	if frac == 0 {
		return dst
	}
	var digits [9]byte
	for i := 8; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 9
	for digits[n-1] == '0' {
		n--
	}
	dst = append(dst, '.')
	return append(dst, digits[:n]...)
}

// FormatUSD returns AppendUSD's rendering as a string.
func FormatUSD(nanos int64) string { return string(AppendUSD(nil, nanos)) }

// ParseUSD reads a plain decimal number of dollars ("0.0000126", "1000",
// "-2.5") into nanodollars, exactly. It accepts what AppendUSD writes and
// also trailing zeros; it refuses exponents, more than nine decimals,
// and amounts beyond ±9,223,372,036 dollars.
func ParseUSD(s string) (int64, error) {
	in := s
	neg := false
	if s != "" && s[0] == '-' {
		neg, s = true, s[1:]
	}
	whole, frac, dot := s, "", false
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			whole, frac, dot = s[:i], s[i+1:], true
			break
		}
	}
	if whole == "" || (dot && frac == "") {
		return 0, fmt.Errorf("wire: usd amount %q: want a decimal number such as 0.5 or 12", in)
	}
	if len(whole) > 1 && whole[0] == '0' {
		return 0, fmt.Errorf("wire: usd amount %q: leading zero", in)
	}
	if len(frac) > 9 {
		return 0, fmt.Errorf("wire: usd amount %q: more than 9 decimals (finer than a nanodollar)", in)
	}
	var mag uint64
	for _, c := range []byte(whole) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("wire: usd amount %q: want a decimal number such as 0.5 or 12", in)
		}
		mag = mag*10 + uint64(c-'0')
		if mag > 1<<63/NanosPerUSD {
			return 0, fmt.Errorf("wire: usd amount %q: out of range", in)
		}
	}
	mag *= NanosPerUSD
	scale := uint64(NanosPerUSD / 10)
	for _, c := range []byte(frac) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("wire: usd amount %q: want a decimal number such as 0.5 or 12", in)
		}
		mag += uint64(c-'0') * scale
		scale /= 10
	}
	if mag > 1<<63-1 && !(neg && mag == 1<<63) {
		return 0, fmt.Errorf("wire: usd amount %q: out of range", in)
	}
	if neg {
		return -int64(mag), nil
	}
	return int64(mag), nil
}
