package llm

import (
	"strings"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"
)

// Fields reads body members by dotted path (user, metadata.user_id): for
// each path of paths, the value at it, or a value of Type jv.Null and
// empty Raw when the body has none. The body's top level is walked once,
// whatever the number of paths; a path is plain member names joined by
// "." (govern checks them at compile). The body must be a valid JSON
// object (ParseRequest has read it). out is reused when it has room.
// ParseRequestFields reads the same in ParseRequest's pass over the body.
func Fields(body []byte, paths []string, out []jv.Value) []jv.Value {
	fr := newFieldReader(paths, out)
	if fr.left == 0 {
		return fr.out
	}
	jv.ParseBytes(body).ForEach(func(k, v jv.Value) bool {
		fr.member(k.Str, v)
		return fr.left > 0
	})
	return fr.out
}

// fieldReader reads the members at paths from a body's top-level members
// in document order.
type fieldReader struct {
	paths []string
	out   []jv.Value
	left  int // paths not yet read
}

func newFieldReader(paths []string, out []jv.Value) fieldReader {
	out = out[:0]
	for range paths {
		out = append(out, jv.Value{})
	}
	return fieldReader{paths: paths, out: out, left: len(paths)}
}

// wants reports whether a top-level member named k may hold a path not
// yet read.
func (fr *fieldReader) wants(k string) bool {
	for i, p := range fr.paths {
		if fr.out[i].Raw == "" && (p == k || len(p) > len(k) && p[len(k)] == '.' && p[:len(k)] == k) {
			return true
		}
	}
	return false
}

// member reads the top-level member named k, of value v.
func (fr *fieldReader) member(k string, v jv.Value) {
	for i, p := range fr.paths {
		if fr.out[i].Raw != "" {
			continue // the first occurrence of a member is read, as gjson reads it
		}
		first, rest, nested := strings.Cut(p, ".")
		if k != first {
			continue
		}
		f := v
		if nested {
			f = v.Get(rest)
		}
		if f.Raw == "" {
			continue
		}
		fr.out[i] = f
		fr.left--
	}
}
