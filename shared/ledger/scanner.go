package ledger

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is a strict single-pass JSON reader over one row: RFC 8259
// grammar, UTF-8 checked, no reflection. Strings that need no unescaping
// are substrings of one copy of the input, so a row costs one allocation for
// all its plain strings.
type scanner struct {
	src  string // the input, copied once
	i    int
	fail bool // the input is not valid JSON, or nests too deep
	deep bool // the failure is nesting deeper than maxDepth
}

// maxDepth bounds the nesting of unknown members, so no input can grow the
// stack without limit.
const maxDepth = 512

func (s *scanner) ws() {
	for s.i < len(s.src) {
		switch s.src[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.src) {
		return s.src[s.i]
	}
	return 0
}

// consume skips c if it is next.
func (s *scanner) consume(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// next starts the next member of an object (or item of an array, key
// false) whose opening bracket was consumed: it reports false at the
// closing bracket, and marks the input invalid on anything else.
func (s *scanner) next(first bool, closer byte) bool {
	if s.consume(closer) {
		return false
	}
	if !first && !s.consume(',') {
		s.fail = true
		return false
	}
	return true
}

// key reads a member name and its colon.
func (s *scanner) key() (string, bool) {
	k, ok := s.str()
	if !ok || !s.consume(':') {
		s.fail = true
		return "", false
	}
	return k, true
}

// str reads a string.
func (s *scanner) str() (string, bool) {
	if s.peek() != '"' {
		return "", false
	}
	s.i++
	start := s.i
	for s.i < len(s.src) {
		c := s.src[s.i]
		switch {
		case c == '"':
			out := s.src[start:s.i]
			s.i++
			return out, true
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			s.fail = true
			return "", false
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, n := utf8.DecodeRuneInString(s.src[s.i:])
			if r == utf8.RuneError && n == 1 {
				s.fail = true
				return "", false
			}
			s.i += n
		}
	}
	s.fail = true
	return "", false
}

// escaped finishes a string holding escapes, from its first escape on.
func (s *scanner) escaped(start int) (string, bool) {
	buf := []byte(s.src[start:s.i])
	for s.i < len(s.src) {
		c := s.src[s.i]
		switch {
		case c == '"':
			s.i++
			return string(buf), true
		case c == '\\':
			if s.i+1 >= len(s.src) {
				s.fail = true
				return "", false
			}
			e := s.src[s.i+1]
			s.i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := s.hex4()
				if !ok {
					return "", false
				}
				if utf16.IsSurrogate(r) {
					r2 := rune(utf8.RuneError)
					if s.i+1 < len(s.src) && s.src[s.i] == '\\' && s.src[s.i+1] == 'u' {
						save := s.i
						s.i += 2
						if lo, ok := s.hex4(); ok {
							if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
								r2 = d
							} else {
								s.i = save // not a pair: the second escape stands alone
							}
						} else {
							return "", false
						}
					}
					r = r2
				}
				buf = utf8.AppendRune(buf, r)
			default:
				s.fail = true
				return "", false
			}
		case c < 0x20:
			s.fail = true
			return "", false
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			s.i++
		default:
			r, n := utf8.DecodeRuneInString(s.src[s.i:])
			if r == utf8.RuneError && n == 1 {
				s.fail = true
				return "", false
			}
			buf = append(buf, s.src[s.i:s.i+n]...)
			s.i += n
		}
	}
	s.fail = true
	return "", false
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.src) {
		s.fail = true
		return 0, false
	}
	v, err := strconv.ParseUint(s.src[s.i:s.i+4], 16, 16)
	if err != nil || s.src[s.i] == '+' || s.src[s.i] == '-' {
		s.fail = true
		return 0, false
	}
	s.i += 4
	return rune(v), true
}

// number reads a JSON number and returns its text.
func (s *scanner) number() (string, bool) {
	s.ws()
	start := s.i
	if s.i < len(s.src) && s.src[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.src) && s.src[s.i] == '0':
		s.i++
	case s.digits() == 0:
		s.i = start
		return "", false
	}
	if s.i < len(s.src) && s.src[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			s.fail = true
			return "", false
		}
	}
	if s.i < len(s.src) && (s.src[s.i] == 'e' || s.src[s.i] == 'E') {
		s.i++
		if s.i < len(s.src) && (s.src[s.i] == '+' || s.src[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			s.fail = true
			return "", false
		}
	}
	return s.src[start:s.i], true
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.src) && s.src[s.i] >= '0' && s.src[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// literal reads true, false or null.
func (s *scanner) literal(word string) bool {
	s.ws()
	if len(s.src)-s.i >= len(word) && s.src[s.i:s.i+len(word)] == word {
		s.i += len(word)
		return true
	}
	return false
}

// skip reads and discards any value (an unknown member's), checking it.
func (s *scanner) skip(depth int) bool {
	if depth >= maxDepth {
		s.fail, s.deep = true, true
		return false
	}
	switch s.peek() {
	case '"':
		_, ok := s.str()
		return ok
	case '{':
		s.i++
		for first := true; s.next(first, '}'); first = false {
			if _, ok := s.key(); !ok || !s.skip(depth+1) {
				return false
			}
		}
		return !s.fail
	case '[':
		s.i++
		for first := true; s.next(first, ']'); first = false {
			if !s.skip(depth + 1) {
				return false
			}
		}
		return !s.fail
	case 't':
		return s.literal("true") || s.invalid()
	case 'f':
		return s.literal("false") || s.invalid()
	case 'n':
		return s.literal("null") || s.invalid()
	}
	if _, ok := s.number(); ok {
		return true
	}
	return s.invalid()
}

func (s *scanner) invalid() bool {
	s.fail = true
	return false
}

// raw returns the text of the value starting at the cursor, for an error
// message, without moving the cursor; cut at 40 bytes.
func (s *scanner) raw() string {
	save, fail := s.i, s.fail
	s.ws()
	start := s.i
	s.skip(0)
	end := s.i
	s.i, s.fail = save, fail
	if end <= start {
		end = min(start+1, len(s.src))
	}
	return excerpt(s.src[start:end])
}
