package llm

import "strconv"

// MaxDepth is the deepest nesting of arrays and objects a request body may
// have. Real requests stay far below it (tool schemas nest a few dozen
// levels at most); the bound keeps validation iterative and its memory
// fixed, where gjson.ValidBytes recurses once per level with no limit.
const MaxDepth = 512

// checkSyntax validates b as one JSON value with the rules of
// gjson.ValidBytes (whitespace is space, tab, CR and LF; strings must not
// hold control characters; escapes are checked; UTF-8 is not), iteratively
// and with nesting bounded by MaxDepth. It returns -1 and "" when b is valid,
// else the byte offset of the first problem and what it is. See
// RATIONALE.md#why-does-shared-llm-validate-json-itself.
func checkSyntax(b []byte) (int, string) {
	var stack [MaxDepth / 64]uint64 // bit set: object; clear: array
	depth := 0
	i := 0
	n := len(b)
	const (
		stValue = iota // a value must start here
		stAfter        // a value just ended
		stKey          // an object key must start here
	)
	state := stValue
	for {
		for i < n && isSpace(b[i]) {
			i++
		}
		switch state {
		case stValue:
			if i == n {
				return i, "unexpected end of input, expecting a value"
			}
			switch c := b[i]; c {
			case '{', '[':
				if depth == MaxDepth {
					return i, "nesting deeper than " + strconv.Itoa(MaxDepth) + " levels"
				}
				if c == '{' {
					stack[depth/64] |= 1 << (depth % 64)
				} else {
					stack[depth/64] &^= 1 << (depth % 64)
				}
				depth++
				i++
				for i < n && isSpace(b[i]) {
					i++
				}
				if i < n && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
					depth--
					i++
					state = stAfter
				} else if c == '{' {
					state = stKey
				}
			case '"':
				var cause string
				if i, cause = scanString(b, i+1); cause != "" {
					return i, cause
				}
				state = stAfter
			case 't':
				if !hasLiteral(b, i, "true") {
					return i, "invalid literal, expecting true"
				}
				i += 4
				state = stAfter
			case 'f':
				if !hasLiteral(b, i, "false") {
					return i, "invalid literal, expecting false"
				}
				i += 5
				state = stAfter
			case 'n':
				if !hasLiteral(b, i, "null") {
					return i, "invalid literal, expecting null"
				}
				i += 4
				state = stAfter
			default:
				if c == '-' || c >= '0' && c <= '9' {
					var cause string
					if i, cause = scanNumber(b, i); cause != "" {
						return i, cause
					}
					state = stAfter
					continue
				}
				return i, "unexpected " + quoteByte(c) + ", expecting a value"
			}
		case stKey:
			if i == n {
				return i, "unexpected end of input, expecting an object key"
			}
			if b[i] != '"' {
				return i, "unexpected " + quoteByte(b[i]) + ", expecting an object key in double quotes"
			}
			var cause string
			if i, cause = scanString(b, i+1); cause != "" {
				return i, cause
			}
			for i < n && isSpace(b[i]) {
				i++
			}
			if i == n {
				return i, "unexpected end of input, expecting ':' after an object key"
			}
			if b[i] != ':' {
				return i, "unexpected " + quoteByte(b[i]) + ", expecting ':' after an object key"
			}
			i++
			state = stValue
		case stAfter:
			if depth == 0 {
				if i != n {
					return i, "unexpected " + quoteByte(b[i]) + " after the top-level value"
				}
				return -1, ""
			}
			object := stack[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			closer, what := byte(']'), "']' after an array element"
			if object {
				closer, what = '}', "'}' after an object member"
			}
			if i == n {
				return i, "unexpected end of input, expecting ',' or " + what
			}
			switch b[i] {
			case ',':
				i++
				if object {
					state = stKey
				} else {
					state = stValue
				}
			case closer:
				i++
				depth--
			default:
				return i, "unexpected " + quoteByte(b[i]) + ", expecting ',' or " + what
			}
		}
	}
}

// scanString scans a string body starting just after its opening quote and
// returns the offset just after the closing quote.
func scanString(b []byte, i int) (int, string) {
	for ; i < len(b); i++ {
		if i = plainRun(b, i); i == len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, ""
		case c < ' ':
			return i, "control character " + quoteByte(c) + " in a string; escape it"
		case c == '\\':
			i++
			if i == len(b) {
				return i, "unexpected end of input in a string escape"
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 0; k < 4; k++ {
					i++
					if i >= len(b) || !isHex(b[i]) {
						return i, `invalid \u escape in a string, expecting 4 hexadecimal digits`
					}
				}
			default:
				return i, "invalid escape " + quoteByte(b[i]) + " in a string"
			}
		}
	}
	return i, "unexpected end of input in a string"
}

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i.
func scanNumber(b []byte, i int) (int, string) {
	const bad = "invalid number"
	if b[i] == '-' {
		i++
	}
	if i == len(b) || !isDigit(b[i]) {
		return i, bad
	}
	if b[i] == '0' {
		i++
	} else {
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i == len(b) || !isDigit(b[i]) {
			return i, bad
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i == len(b) || !isDigit(b[i]) {
			return i, bad
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, ""
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// quoteByte renders c for an error message: 'x' when printable, else 0x1f.
func quoteByte(c byte) string {
	if c >= ' ' && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	const hex = "0123456789abcdef"
	return "byte 0x" + string([]byte{hex[c>>4], hex[c&15]})
}
