package ledger

import (
	"unsafe"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// scanner is ParseRow's single-pass reader of one row. It pulls the
// members a row knows with the project's tokenizer's scanning functions
// under the strict rules (RFC 8259, UTF-8 checked; see RATIONALE.md, "Why
// one JSON tokenizer?"), and skips every other value with jsontok.Skip.
// Strings that need no unescaping are substrings of one copy of the
// input, so a row costs one allocation for all its plain strings.
type scanner struct {
	src  string // the input, copied once
	b    []byte // src for the tokenizer's functions, not a copy
	i    int
	fail bool // the input is not valid JSON, or nests too deep
	deep bool // the failure is nesting deeper than maxDepth
}

// maxDepth bounds the nesting of a member's value, so no input can grow
// memory without limit: jsontok.Strict's bound.
const maxDepth = jsontok.DefaultMaxDepth

// newScanner reads a copy of data.
func newScanner(data []byte) scanner {
	src := string(data)
	return scanner{src: src, b: unsafe.Slice(unsafe.StringData(src), len(src))}
}

func (s *scanner) ws() { s.i = jsontok.SkipSpace(s.b, s.i) }

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

// str reads a string; false without fail when the next value is not one.
func (s *scanner) str() (string, bool) {
	if s.peek() != '"' {
		return "", false
	}
	start := s.i
	end, shrink, code := jsontok.ScanString(s.b, start, true)
	s.i = end
	if code != jsontok.ErrNone {
		s.fail = true
		return "", false
	}
	if shrink == 0 {
		return s.src[start+1 : end-1], true
	}
	return jsontok.Text(s.b[start:end], false), true
}

// number reads a JSON number and returns its text; false without fail
// when the next value does not start as one.
func (s *scanner) number() (string, bool) {
	s.ws()
	start := s.i
	if start == len(s.src) || s.src[start] != '-' && (s.src[start] < '0' || s.src[start] > '9') {
		return "", false
	}
	end, code := jsontok.ScanNumber(s.b, start)
	s.i = end
	if code != jsontok.ErrNone {
		s.fail = true
		return "", false
	}
	return s.src[start:end], true
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
func (s *scanner) skip() bool {
	end, e := jsontok.Skip(s.b, s.i, jsontok.Strict)
	if e.Code != jsontok.ErrNone {
		s.i, s.fail, s.deep = e.At(), true, e.Code == jsontok.ErrDepth
		return false
	}
	s.i = end
	return true
}

// raw returns the text of the (valid) value starting at the cursor, for
// an error message, without moving the cursor; cut at 40 bytes.
func (s *scanner) raw() string {
	start := jsontok.SkipSpace(s.b, s.i)
	end, e := jsontok.Skip(s.b, start, jsontok.Strict)
	if e.Code != jsontok.ErrNone || end <= start {
		end = min(start+1, len(s.src))
	}
	return excerpt(s.src[start:end])
}
