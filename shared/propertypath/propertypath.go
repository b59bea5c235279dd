// Package propertypath spells proxy-wasm property paths, so that every host
// of the filter (wasmtest and the native stand-in) reads a configured
// property at the same path.
//
// On the wire a path is its segments joined by NUL: ["xds", "node", "id"] is
// "xds\x00node\x00id" (shared/proxy-wasm.md 1.6). Written by hand it is the
// segments joined by dots, and a segment that itself holds a dot, such as
// the filter name envoy.filters.http.wasm in route metadata, is a quoted map
// key in brackets, as CEL and Envoy's attribute docs write it:
//
//	xds.route_metadata.filter_metadata['envoy.filters.http.wasm'].backend
//
// A string that already holds a NUL is taken as the wire form.
package propertypath

import (
	"fmt"
	"strings"
)

// Parse splits a written path into its segments.
func Parse(s string) ([]string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		segs := strings.Split(s, "\x00")
		for i, seg := range segs {
			if seg == "" {
				return nil, fmt.Errorf("property path %q: segment %d is empty", strings.ReplaceAll(s, "\x00", `\0`), i)
			}
		}
		return segs, nil
	}
	var segs []string
	i := 0
	for {
		if i >= len(s) {
			return nil, fmt.Errorf("property path %q: ends without a segment (write a segment after every dot)", s)
		}
		if s[i] == '[' {
			if i+1 >= len(s) || (s[i+1] != '\'' && s[i+1] != '"') {
				return nil, fmt.Errorf("property path %q: a bracket at byte %d must hold a quoted key, like ['envoy.filters.http.wasm']", s, i)
			}
			q := s[i+1]
			n := strings.IndexByte(s[i+2:], q)
			closeAt := i + 2 + n // the closing quote
			if n < 0 || closeAt+1 >= len(s) || s[closeAt+1] != ']' {
				return nil, fmt.Errorf("property path %q: the bracket at byte %d is not closed by %c]", s, i, q)
			}
			if n == 0 {
				return nil, fmt.Errorf("property path %q: the bracket at byte %d holds an empty key", s, i)
			}
			segs = append(segs, s[i+2:closeAt])
			i = closeAt + 2
		} else {
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("property path %q: empty segment at byte %d", s, i)
			}
			segs = append(segs, s[i:j])
			i = j
		}
		if i == len(s) {
			return segs, nil
		}
		switch s[i] {
		case '.':
			i++
		case '[':
			// a bracketed key may follow a segment directly: a['b']
		default:
			return nil, fmt.Errorf("property path %q: unexpected %q at byte %d (segments are joined by dots)", s, s[i], i)
		}
	}
}

// Wire joins segments as the ABI carries them: NUL between segments.
func Wire(segs []string) string { return strings.Join(segs, "\x00") }

// Format writes segments back in the written form: a segment that holds a
// dot, a bracket, a quote or nothing at all goes in brackets.
func Format(segs []string) string {
	var b strings.Builder
	for i, seg := range segs {
		if seg == "" || strings.ContainsAny(seg, ".[]'\"") {
			q := "'"
			if strings.Contains(seg, "'") {
				q = `"`
			}
			b.WriteString("[" + q + seg + q + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}
