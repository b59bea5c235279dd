package config

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// SyntaxError is a configuration document that could not be parsed, with
// the position of the fault (1-based; Column 0 when unknown).
type SyntaxError struct {
	Format string // "json" or "yaml"
	Line   int
	Column int
	Msg    string
}

func (e *SyntaxError) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("%s: %s", e.Format, e.Msg)
	case e.Column == 0:
		return fmt.Sprintf("%s: line %d: %s", e.Format, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: line %d, column %d: %s", e.Format, e.Line, e.Column, e.Msg)
}

// maxJSONDepth bounds how deeply arrays and objects nest, as encoding/json
// bounds it.
const maxJSONDepth = 10000

// ParseJSON parses a JSON document (RFC 8259) into the generic tree
// DecodeStrict reads: objects become map[string]any, arrays []any, numbers
// Number (the literal kept exact), and strings, booleans and null as
// themselves. A repeated object key is an error, as is anything after the
// first value. Strings decode as encoding/json decodes them: invalid UTF-8
// and unpaired surrogate escapes become U+FFFD. Syntax errors carry the line
// and column (in bytes) of the offending character and encoding/json's
// wording (invalid character '}' looking for beginning of value).
//
// It is a small scanner of its own so that the filter's wasm build carries
// no encoding/json (see RATIONALE.md, "Why does shared/config parse JSON
// itself?").
func ParseJSON(b []byte) (any, error) {
	p := jsonParser{src: b}
	p.skipSpace()
	if p.pos == len(p.src) {
		return nil, &SyntaxError{Format: "json", Msg: "empty document"}
	}
	v, err := p.value("")
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos < len(p.src) {
		return nil, p.errAt(p.pos, "unexpected data after the top-level value")
	}
	return v, nil
}

// jsonParser is a recursive-descent JSON parser over src. pos is the next
// byte to read; value, object, array and the scalars start at a non-space
// byte and leave pos just past what they read.
type jsonParser struct {
	src   []byte
	pos   int
	depth int
}

func (p *jsonParser) value(path string) (any, error) {
	if p.pos >= len(p.src) {
		return nil, p.eof()
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(path)
	case c == '[':
		return p.array(path)
	case c == '"':
		return p.str()
	case c == '-' || isDigit(c):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, p.invalid("looking for beginning of value")
}

func (p *jsonParser) object(path string) (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	m := map[string]any{}
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		p.depth--
		return m, nil
	}
	for {
		if p.pos >= len(p.src) {
			return nil, p.eof()
		}
		if p.src[p.pos] != '"' {
			return nil, p.invalid("looking for beginning of object key string")
		}
		keyAt := p.pos
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, p.errAt(keyAt, fmt.Sprintf("duplicate field %q in %s", k, pathOrTop(path)))
		}
		if err := p.expect(':', "after object key"); err != nil {
			return nil, err
		}
		p.skipSpace()
		v, err := p.value(JoinPath(path, k))
		if err != nil {
			return nil, err
		}
		m[k] = v
		if done, err := p.next('}', "after object key:value pair"); done || err != nil {
			return m, err
		}
	}
}

func (p *jsonParser) array(path string) (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	l := []any{}
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		p.depth--
		return l, nil
	}
	for {
		v, err := p.value(path + "[" + strconv.Itoa(len(l)) + "]")
		if err != nil {
			return nil, err
		}
		l = append(l, v)
		if done, err := p.next(']', "after array element"); done || err != nil {
			return l, err
		}
	}
}

// enter steps into an object or array, refusing to nest too deeply.
func (p *jsonParser) enter() error {
	if p.depth >= maxJSONDepth {
		return p.errAt(p.pos, fmt.Sprintf("nested more than %d levels deep", maxJSONDepth))
	}
	p.depth++
	p.pos++
	return nil
}

// expect skips space and consumes c; anything else is an error in context.
func (p *jsonParser) expect(c byte, context string) error {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return p.eof()
	}
	if p.src[p.pos] != c {
		return p.invalid(context)
	}
	p.pos++
	return nil
}

// next reads what follows a member or element: a comma (then space, so the
// next value starts at pos) or the closing byte, which ends the container.
func (p *jsonParser) next(closing byte, context string) (done bool, err error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return false, p.eof()
	}
	switch p.src[p.pos] {
	case ',':
		p.pos++
		p.skipSpace()
		return false, nil
	case closing:
		p.pos++
		p.depth--
		return true, nil
	}
	return false, p.invalid(context)
}

// str reads a string literal. The common case, no escapes and valid
// UTF-8, is one copy of the bytes between the quotes.
func (p *jsonParser) str() (string, error) {
	start := p.pos + 1
	plain := true
	for i := start; ; {
		if i >= len(p.src) {
			p.pos = i
			return "", p.eof()
		}
		switch c := p.src[i]; {
		case c == '"':
			p.pos = i + 1
			if plain {
				return string(p.src[start:i]), nil
			}
			return unescape(p.src[start:i]), nil
		case c == '\\':
			plain = false
			i++
			if i >= len(p.src) {
				p.pos = i
				return "", p.eof()
			}
			switch p.src[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				for k := 0; k < 4; k++ {
					if i >= len(p.src) {
						p.pos = i
						return "", p.eof()
					}
					if hexValue(p.src[i]) < 0 {
						p.pos = i
						return "", p.invalid(`in \u hexadecimal character escape`)
					}
					i++
				}
			default:
				p.pos = i
				return "", p.invalid("in string escape code")
			}
		case c < 0x20:
			p.pos = i
			return "", p.invalid("in string literal")
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(p.src[i:])
			if r == utf8.RuneError && size == 1 {
				plain = false
			}
			i += size
		}
	}
}

// unescape decodes the body of a string literal str has checked: escapes
// resolved, a surrogate pair joined, an unpaired surrogate and each byte of
// invalid UTF-8 replaced by U+FFFD, exactly as encoding/json does.
func unescape(s []byte) string {
	b := make([]byte, 0, len(s)+utf8.UTFMax)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			switch e := s[i+1]; e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := u4(s[i:])
				i += 6
				if utf16.IsSurrogate(r) {
					if pair := utf16.DecodeRune(r, u4(s[i:])); pair != utf8.RuneError {
						b = utf8.AppendRune(b, pair)
						i += 6
						continue
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
				continue
			default: // '"', '\\', '/'
				b = append(b, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			b = utf8.AppendRune(b, r)
			i += size
		}
	}
	return string(b)
}

// u4 reads the \uXXXX escape at the start of s, or returns -1.
func u4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		h := hexValue(c)
		if h < 0 {
			return -1
		}
		r = r<<4 | rune(h)
	}
	return r
}

func hexValue(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// number reads a number literal in JSON's grammar and keeps it as written.
func (p *jsonParser) number() (any, error) {
	start := p.pos
	n := scanNumber(p.src[start:])
	if n.end < 0 {
		p.pos = start + n.at
		if p.pos >= len(p.src) {
			return nil, p.eof()
		}
		return nil, p.invalid(n.context)
	}
	p.pos = start + n.end
	return Number(p.src[start:p.pos]), nil
}

// literal reads true, false or null.
func (p *jsonParser) literal(word string) error {
	for k := 1; k < len(word); k++ {
		i := p.pos + k
		if i >= len(p.src) {
			p.pos = i
			return p.eof()
		}
		if p.src[i] != word[k] {
			p.pos = i
			return p.invalid(fmt.Sprintf("in literal %s (expecting %s)", word, quoteChar(word[k])))
		}
	}
	p.pos += len(word)
	return nil
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\r', '\n':
			p.pos++
			continue
		}
		return
	}
}

func pathOrTop(path string) string {
	if path == "" {
		return "the top-level object"
	}
	return path
}

// eof is the error for a document that ends inside a value.
func (p *jsonParser) eof() error {
	return p.errAt(len(p.src), "unexpected end of document")
}

// invalid is the error for the byte at pos, in encoding/json's words.
func (p *jsonParser) invalid(context string) error {
	return p.errAt(p.pos, "invalid character "+quoteChar(p.src[p.pos])+" "+context)
}

// quoteChar renders a byte the way encoding/json's syntax errors do.
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

// errAt positions a message at a byte offset of the source.
func (p *jsonParser) errAt(off int, msg string) error {
	off = min(off, len(p.src))
	line, col := 1, 1
	for _, c := range p.src[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &SyntaxError{Format: "json", Line: line, Column: col, Msg: msg}
}
