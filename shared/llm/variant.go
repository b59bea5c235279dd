package llm

import (
	pathpkg "path"
	"strings"
)

// VariantOf reports the governed endpoint that a request path spells in a
// way EndpointOf does not read, but that a server in front of or at the
// provider may route as that endpoint: percent-escaped characters
// (/v1/chat%2Fcompletions, a trailing %2F, escapes of escapes), other
// letter case (/V1/CHAT/COMPLETIONS), path parameters
// (/v1/chat/completions;x), backslashes for slashes, or a NUL that ends
// the path for a C server. It returns Unknown for a path EndpointOf
// classifies itself, and for every path that is no such variant; it does
// not allocate for a path with none of those features.
func VariantOf(raw string) Endpoint {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	if !oddPath(raw) || EndpointOf(pathpkg.Clean("/"+raw)) != Unknown {
		return Unknown
	}
	p := raw
	for i := 0; i < 3 && strings.IndexByte(p, '%') >= 0; i++ {
		p = unescapeLenient(p)
	}
	if i := strings.IndexAny(p, "?#\x00"); i >= 0 {
		p = p[:i]
	}
	p = strings.ReplaceAll(p, "\\", "/")
	if strings.IndexByte(p, ';') >= 0 {
		segs := strings.Split(p, "/")
		for i, s := range segs {
			if j := strings.IndexByte(s, ';'); j >= 0 {
				segs[i] = s[:j]
			}
		}
		p = strings.Join(segs, "/")
	}
	p = strings.ToLower(strings.TrimSpace(p))
	return EndpointOf(pathpkg.Clean("/" + p))
}

// oddPath reports whether p has anything VariantOf reads past: an escape,
// a path parameter, a backslash, an upper-case letter.
func oddPath(p string) bool {
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '%', c == ';', c == '\\', 'A' <= c && c <= 'Z':
			return true
		}
	}
	return false
}

// unescapeLenient decodes every valid %XX escape of s and leaves anything
// else as it is.
func unescapeLenient(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if h, ok := unhex(s[i+1]); ok {
				if l, ok := unhex(s[i+2]); ok {
					b.WriteByte(h<<4 | l)
					i += 2
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
