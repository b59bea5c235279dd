package jsontok

import "strconv"

// Code says what broke the grammar.
type Code uint8

const (
	ErrNone     Code = iota
	ErrValue         // a value must start here
	ErrKey           // an object member's name must start here
	ErrColon         // a ':' must follow a member's name
	ErrElement       // a ',' or ']' must follow an array element
	ErrMember        // a ',' or '}' must follow an object member
	ErrTrailing      // something follows the top-level value
	ErrDepth         // nesting deeper than Rules.MaxDepth
	ErrLiteral       // a broken true, false or null
	ErrNumber        // a number without digits where they must be
	ErrFraction      // a number without digits after its decimal point
	ErrExponent      // a number without digits in its exponent
	ErrControl       // a control character in a string
	ErrEscape        // a backslash not followed by an escape
	ErrHex           // a \u escape without four hexadecimal digits
	ErrString        // the input ends inside a string
	ErrUTF8          // a byte sequence in a string that is not UTF-8 (Rules.UTF8)
)

// Error is where and how a document broke the grammar.
type Error struct {
	Code Code
	// Off is the offset of the byte at fault, len(input) when the input
	// ended too soon (EOF is then set).
	Off int
	// Start is where the token holding the fault starts: a literal's
	// first byte, a string's opening quote, a number's first byte; Off
	// between tokens.
	Start int
	EOF   bool
	Byte  byte // the byte at Off, when not EOF
	// Literal is the word a broken literal was to be (ErrLiteral), Depth
	// the bound that was passed (ErrDepth).
	Literal string
	Depth   int
}

// At is the offset a reader reports the fault at: where a broken
// literal starts (it is one word, and "tru}" is read as a whole), the
// byte at fault for everything else.
func (e Error) At() int {
	if e.Code == ErrLiteral {
		return e.Start
	}
	return e.Off
}

// Error is "at byte N: " and the Cause.
func (e Error) Error() string { return "at byte " + strconv.Itoa(e.At()) + ": " + e.Cause() }

// Cause is the fault in the project's words, for a 400 or a log line:
// "unexpected '}', expecting a value", "control character byte 0x0a in a
// string; escape it".
func (e Error) Cause() string {
	got := "unexpected end of input"
	if !e.EOF {
		got = "unexpected " + QuoteByte(e.Byte)
	}
	switch e.Code {
	case ErrValue:
		return got + ", expecting a value"
	case ErrKey:
		if e.EOF {
			return got + ", expecting an object key"
		}
		return got + ", expecting an object key in double quotes"
	case ErrColon:
		return got + ", expecting ':' after an object key"
	case ErrElement:
		return got + ", expecting ',' or ']' after an array element"
	case ErrMember:
		return got + ", expecting ',' or '}' after an object member"
	case ErrTrailing:
		return got + " after the top-level value"
	case ErrDepth:
		return "nesting deeper than " + strconv.Itoa(e.Depth) + " levels"
	case ErrLiteral:
		return "invalid literal, expecting " + e.Literal
	case ErrNumber, ErrFraction, ErrExponent:
		return "invalid number"
	case ErrControl:
		return "control character " + QuoteByte(e.Byte) + " in a string; escape it"
	case ErrEscape:
		if e.EOF {
			return "unexpected end of input in a string escape"
		}
		return "invalid escape " + QuoteByte(e.Byte) + " in a string"
	case ErrHex:
		return `invalid \u escape in a string, expecting 4 hexadecimal digits`
	case ErrString:
		return "unexpected end of input in a string"
	case ErrUTF8:
		return "invalid UTF-8 in a string"
	}
	return "invalid JSON"
}

// QuoteByte renders c for a message in the project's words: 'x' when
// printable ASCII, else byte 0x1f.
func QuoteByte(c byte) string {
	if c >= ' ' && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	const hex = "0123456789abcdef"
	return "byte 0x" + string([]byte{hex[c>>4], hex[c&15]})
}

// GoText is the fault in encoding/json's words, for a fault that is not at
// the end of the input: "invalid character '}' looking for beginning of
// value". encoding/json reports the same fault at offset Off+1 (the bytes
// read with the one at fault). Faults it does not word this way (the end
// of the input, ErrTrailing, ErrDepth, ErrUTF8, which it does not refuse)
// are worded as it words its nearest: its readers say those in their own
// words.
func (e Error) GoText() string {
	var context string
	switch e.Code {
	case ErrValue:
		context = "looking for beginning of value"
	case ErrKey:
		context = "looking for beginning of object key string"
	case ErrColon:
		context = "after object key"
	case ErrElement:
		context = "after array element"
	case ErrMember:
		context = "after object key:value pair"
	case ErrTrailing:
		context = "after top-level value"
	case ErrLiteral:
		want := e.Literal[min(max(e.Off-e.Start, 1), len(e.Literal)-1)]
		context = "in literal " + e.Literal + " (expecting " + GoQuoteChar(want) + ")"
	case ErrNumber:
		context = "in numeric literal"
	case ErrFraction:
		context = "after decimal point in numeric literal"
	case ErrExponent:
		context = "in exponent of numeric literal"
	case ErrControl, ErrUTF8:
		context = "in string literal"
	case ErrEscape:
		context = "in string escape code"
	case ErrHex:
		context = `in \u hexadecimal character escape`
	case ErrDepth:
		return "exceeded max depth"
	}
	c := e.Byte
	if e.EOF {
		if e.Code == ErrString || e.Code == ErrValue || e.Code == ErrKey || e.Code == ErrColon ||
			e.Code == ErrElement || e.Code == ErrMember {
			return "unexpected end of JSON input"
		}
		c = ' ' // encoding/json feeds a space at the end of its input
	}
	return "invalid character " + GoQuoteChar(c) + " " + context
}

// GoQuoteChar renders a byte as encoding/json's syntax errors do: 'x',
// '\”, '"', '\n', '\x01', 'ÿ' (a byte above 0x7f as the rune of that
// value).
func GoQuoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}
