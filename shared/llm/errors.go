package llm

import "github.com/tokentriage/tokentriage/shared/jsontok/jv"

// RequestError is a request body the gateway cannot read. Its text names
// where (the field's JSON path, the byte offset, or both) and ends with the
// cause; it is meant for the message of a 400 answer.
type RequestError struct {
	// Field is the JSON path of the offending member ("messages[2].content"),
	// or "" for a problem with the document itself.
	Field string
	// Offset is the byte offset of the problem in the body, or -1.
	Offset int
	// Cause says what was wrong.
	Cause string
}

// Error renders "request body: messages[2].content at byte 80: must be ...".
func (e *RequestError) Error() string {
	loc := "request body"
	if e.Field != "" {
		loc += ": " + e.Field
	}
	if e.Offset >= 0 {
		loc += " at byte " + itoa(e.Offset)
	}
	return loc + ": " + e.Cause
}

// EndpointError is a path that is not one of the governed LLM endpoints.
type EndpointError struct{ Path string }

// Error names the path and the endpoints that are governed.
func (e *EndpointError) Error() string {
	return "llm: path " + quote(e.Path) + ": not a governed LLM endpoint; expected a path ending in " +
		"/v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses or /v1/messages"
}

var (
	_ error = (*RequestError)(nil)
	_ error = (*EndpointError)(nil)
)

func fieldError(at path, v jv.Value, cause string) *RequestError {
	return &RequestError{Field: at.String(), Offset: v.Index, Cause: cause}
}

// path is the JSON path of a member, kept as a value (no allocation) and
// rendered only when an error needs it.
type path struct {
	seg [6]segment
	n   int
}

type segment struct {
	key string
	idx int // -1 for a key segment
}

func (p path) key(k string) path {
	if p.n < len(p.seg) {
		p.seg[p.n] = segment{key: k, idx: -1}
	}
	p.n++
	return p
}

func (p path) index(i int) path {
	if p.n < len(p.seg) {
		p.seg[p.n] = segment{idx: i}
	}
	p.n++
	return p
}

// String renders the path as messages[2].content[0].text.
func (p path) String() string {
	var b []byte
	for i := 0; i < p.n && i < len(p.seg); i++ {
		s := p.seg[i]
		if s.idx >= 0 {
			b = append(b, '[')
			b = append(b, itoa(s.idx)...)
			b = append(b, ']')
			continue
		}
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, s.key...)
	}
	if p.n > len(p.seg) {
		b = append(b, "..."...)
	}
	return string(b)
}

// quote renders s in double quotes for a message, escaping only quotes,
// backslashes and control bytes.
func quote(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < ' ' || c == 0x7f:
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}
