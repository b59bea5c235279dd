package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// NanosPerUSD is the number of nanodollars in one dollar.
const NanosPerUSD = 1_000_000_000

// ParseUSD reads a decimal dollar amount ("1000", "0.000001", "12.5",
// "2.5e3") exactly onto the nanodollar grid. It never passes through a
// float: an amount with more than 9 decimal places, or one beyond the range
// of an int64 of nanodollars, is an error.
func ParseUSD(s string) (USD, error) {
	n, err := parseDecimal(s, 9)
	if err != nil {
		return USD{}, err
	}
	return USD{Nanos: n}, nil
}

// USDFromNanos returns the amount of n nanodollars.
func USDFromNanos(n int64) USD { return USD{Nanos: n} }

// String renders the amount in dollars with no more decimal places than it
// needs: 1000, 0.000001, 12.5.
func (u USD) String() string {
	n := u.Nanos
	neg := n < 0
	var mag uint64
	if neg {
		mag = uint64(-(n + 1)) + 1 // safe for math.MinInt64
	} else {
		mag = uint64(n)
	}
	whole, frac := mag/NanosPerUSD, mag%NanosPerUSD
	s := strconv.FormatUint(whole, 10)
	if frac != 0 {
		f := fmt.Sprintf("%09d", frac)
		for f[len(f)-1] == '0' {
			f = f[:len(f)-1]
		}
		s += "." + f
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Dollars returns the amount as a float64, for display and wire formats
// that carry dollars as a JSON number. Arithmetic stays on Nanos.
func (u USD) Dollars() float64 { return float64(u.Nanos) / NanosPerUSD }

// MarshalJSON writes the amount as a JSON number in dollars, exactly. It and
// UnmarshalJSON serve native code that uses encoding/json (the guards are in
// usd_test.go, so the filter's wasm build need not link encoding/json).
func (u USD) MarshalJSON() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalJSON reads a JSON number in dollars, exactly (see ParseUSD). A
// JSON string is refused here; the configuration decoder (DecodeStrict)
// also reads an amount written as a string.
func (u *USD) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		if len(b) > 40 {
			b = append(b[:40:40], "…"...)
		}
		return fmt.Errorf("config: usd amount: %s is a string; write the amount as a JSON number of dollars, e.g. 12.5", b)
	}
	v, err := ParseUSD(string(b))
	if err != nil {
		return fmt.Errorf("config: usd amount: %w", err)
	}
	*u = v
	return nil
}

// parseDecimal reads a decimal number (JSON number grammar, plus a leading
// '+') scaled by 10^scale into an int64, exactly.
func parseDecimal(s string, scale int) (int64, error) {
	orig := s
	if s == "" {
		return 0, errors.New("empty number")
	}
	neg := false
	switch s[0] {
	case '-':
		neg, s = true, s[1:]
	case '+':
		s = s[1:]
	}
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart := s[:i]
	s = s[i:]
	fracPart := ""
	if len(s) > 0 && s[0] == '.' {
		j := 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		fracPart, s = s[1:j], s[j:]
	}
	if intPart == "" && fracPart == "" {
		return 0, fmt.Errorf("%q is not a number", orig)
	}
	exp := 0
	if len(s) > 0 && (s[0] == 'e' || s[0] == 'E') {
		e, err := strconv.Atoi(s[1:])
		if err != nil || len(s) == 1 || !isDigit(s[len(s)-1]) {
			return 0, fmt.Errorf("%q is not a number", orig)
		}
		// Clamping keeps the arithmetic bounded and changes no outcome: a
		// non-zero value is out of range or too fine either way.
		exp, s = max(-1000, min(1000, e)), ""
	}
	if s != "" {
		return 0, fmt.Errorf("%q is not a number", orig)
	}
	digits := intPart + fracPart
	point := len(intPart) + exp // digits[:point] is the whole part
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
		point--
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
	}
	if digits == "" {
		return 0, nil
	}
	if places := len(digits) - point; places > scale {
		return 0, fmt.Errorf("%s has more than %d decimal places (amounts are held on a grid of 1e-%d); round it to at most %d", orig, scale, scale, scale)
	}
	// value = digits × 10^(point+scale-len(digits)), a non-negative power.
	zeros := point + scale - len(digits)
	if len(digits)+zeros > 19 {
		return 0, rangeError(orig, scale)
	}
	var v uint64
	for k := 0; k < len(digits)+zeros; k++ {
		d := uint64(0)
		if k < len(digits) {
			d = uint64(digits[k] - '0')
		}
		if v > (math.MaxUint64-d)/10 {
			return 0, rangeError(orig, scale)
		}
		v = v*10 + d
	}
	if v > math.MaxInt64 {
		return 0, rangeError(orig, scale)
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}

func rangeError(orig string, scale int) error {
	if scale == 9 {
		return fmt.Errorf("%s is out of range (at most %s)", orig, USD{Nanos: math.MaxInt64})
	}
	return fmt.Errorf("%s is out of range", orig)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
