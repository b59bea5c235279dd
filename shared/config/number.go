package config

// Number is a number in the generic tree: its literal exactly as written,
// in JSON's number grammar (YAML literals are normalised to it), so that a
// dollar amount never passes through a float. It plays the part of
// encoding/json's Number without bringing encoding/json into the filter.
type Number string

// String returns the literal.
func (n Number) String() string { return string(n) }

// numberScan is what scanNumber found: a number of end bytes, or, when end
// is -1, the offset of the byte that breaks the grammar (len of the input
// when it ended too soon) and encoding/json's words for the fault.
type numberScan struct {
	end     int
	at      int
	context string
}

// scanNumber reads the longest prefix of s in JSON's number grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(s []byte) numberScan {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s) || !isDigit(s[i]):
		return numberScan{end: -1, at: i, context: "in numeric literal"}
	case s[i] == '0':
		i++
	default:
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return numberScan{end: -1, at: i, context: "after decimal point in numeric literal"}
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return numberScan{end: -1, at: i, context: "in exponent of numeric literal"}
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return numberScan{end: i}
}

// isJSONNumber reports whether s is exactly one number in JSON's grammar.
func isJSONNumber(s string) bool {
	return scanNumber([]byte(s)).end == len(s)
}
