package llm

import (
	"strings"

	"github.com/tidwall/gjson"
)

// findUsage is ParseUsage's fast path: one pass over the top level of a
// JSON answer that skips every member's value (strings eight bytes at a
// time, nested values by their brackets) and keeps the spans of the last
// "usage" and the last "model" members, as gjson's iteration of the top
// level would. gjson walked every nested value of the answer (the whole
// completion text) through its generic parser; in the filter's wasm that
// was most of a non-streamed request's settlement. ok is false for a body
// this pass is not sure of (invalid JSON, which gjson reads leniently; a
// top-level name spelt with escapes; nesting deeper than MaxDepth): the
// caller then reads it with gjson. TestFindUsageMatchesGJSON and
// FuzzParseUsage hold the two to the same results.
func findUsage(b []byte) (usage, model span, ok bool) {
	n := len(b)
	i := skipSpace(b, 0)
	if i == n || b[i] != '{' {
		return span{}, span{}, false
	}
	i = skipSpace(b, i+1)
	if i < n && b[i] == '}' {
		return span{}, span{}, skipSpace(b, i+1) == n
	}
	for {
		if i == n || b[i] != '"' {
			return span{}, span{}, false
		}
		ks := i
		end, esc, ok := stringEnd(b, i)
		end++
		if !ok || esc {
			return span{}, span{}, false
		}
		key := b[ks+1 : end-1]
		i = skipSpace(b, end)
		if i == n || b[i] != ':' {
			return span{}, span{}, false
		}
		i = skipSpace(b, i+1)
		vs := i
		if i, ok = skipValue(b, i); !ok {
			return span{}, span{}, false
		}
		switch string(key) {
		case "usage":
			usage = span{vs, i}
		case "model":
			model = span{vs, i}
		}
		i = skipSpace(b, i)
		if i == n {
			return span{}, span{}, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return usage, model, skipSpace(b, i+1) == n
		default:
			return span{}, span{}, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipValue returns the offset just past the valid JSON value at b[i],
// checked with checkSyntax's rules, or false.
func skipValue(b []byte, i int) (int, bool) {
	var stack [MaxDepth / 64]uint64 // bit set: object
	depth := 0
	n := len(b)
	for {
		if i == n {
			return i, false
		}
		// A value starts at i.
		switch c := b[i]; c {
		case '{', '[':
			if depth == MaxDepth {
				return i, false
			}
			if c == '{' {
				stack[depth/64] |= 1 << (depth % 64)
			} else {
				stack[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			i = skipSpace(b, i+1)
			if i < n && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				depth--
				i++
				break
			}
			if c == '{' {
				var ok bool
				if i, ok = skipKey(b, i); !ok {
					return i, false
				}
			}
			continue
		case '"':
			end, _, ok := stringEnd(b, i)
			if !ok {
				return i, false
			}
			i = end + 1
		case 't':
			if !hasLiteral(b, i, "true") {
				return i, false
			}
			i += 4
		case 'f':
			if !hasLiteral(b, i, "false") {
				return i, false
			}
			i += 5
		case 'n':
			if !hasLiteral(b, i, "null") {
				return i, false
			}
			i += 4
		default:
			if c != '-' && (c < '0' || c > '9') {
				return i, false
			}
			var cause string
			if i, cause = scanNumber(b, i); cause != "" {
				return i, false
			}
		}
		// A value ended at i: close containers or go on to the next
		// element or member.
		for {
			if depth == 0 {
				return i, true
			}
			i = skipSpace(b, i)
			if i == n {
				return i, false
			}
			obj := stack[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			switch c := b[i]; {
			case c == ',':
				i = skipSpace(b, i+1)
				if obj {
					var ok bool
					if i, ok = skipKey(b, i); !ok {
						return i, false
					}
				}
			case c == '}' && obj, c == ']' && !obj:
				depth--
				i++
				continue
			default:
				return i, false
			}
			break
		}
	}
}

// skipKey skips an object key and its colon, leaving i where the value
// starts.
func skipKey(b []byte, i int) (int, bool) {
	if i == len(b) || b[i] != '"' {
		return i, false
	}
	end, _, ok := stringEnd(b, i)
	if !ok {
		return i, false
	}
	i = skipSpace(b, end+1)
	if i == len(b) || b[i] != ':' {
		return i, false
	}
	return skipSpace(b, i+1), true
}

// parseUsageFast is ParseUsage over findUsage's spans; ok false when
// findUsage was not sure (the caller then takes the gjson path).
func parseUsageFast(body []byte) (c counts, served string, have, ok bool) {
	u, m, ok := findUsage(body)
	if !ok {
		return counts{}, "", false, false
	}
	if u.end == 0 {
		return counts{}, "", false, true
	}
	if c, have = readCountsRaw(body[u.start:u.end]); !have {
		return counts{}, "", false, true
	}
	if m.end != 0 && body[m.start] == '"' {
		served = strings.Clone(m.str(body))
	}
	return c, served, true, true
}

// readCountsRaw is readCounts(gjson.Parse(raw)) for a usage object whose
// syntax its caller has already checked (findUsage, walkEvent): one pass
// over its members that reads plain counts as integers, with no second
// syntax check, no gjson iteration and no float parsing (in the filter's
// wasm those were two thirds of reading an answer's usage). An object it
// is not sure of (a member name spelt with escapes, a count with a sign, a
// fraction or an exponent, a details member that is not an object) is read
// by readCounts. TestCountsOfMatchesReadCounts and FuzzParseUsage hold the
// two to the same results.
func readCountsRaw(raw []byte) (counts, bool) {
	if c, ok, sure := countsOf(raw); sure {
		return c, ok
	}
	return readCounts(gjson.Parse(view(raw)))
}

// countsOf is readCountsRaw's one pass over a valid usage object b; sure
// is false when readCounts must decide. Whatever b holds, it returns
// rather than indexing past it.
func countsOf(b []byte) (c counts, ok, sure bool) {
	n := len(b)
	if n == 0 || b[0] != '{' {
		return counts{}, false, false
	}
	i := skipSpace(b, 1)
	if i < n && b[i] == '}' {
		return counts{}, false, skipSpace(b, i+1) == n
	}
	for {
		key, v, ok := member(b, i)
		if !ok {
			return counts{}, false, false
		}
		i = v
		var dst *int64
		var bit uint8
		detail := ""
		switch string(key) {
		case "prompt_tokens", "input_tokens":
			dst, bit = &c.in, hasIn
		case "completion_tokens", "output_tokens":
			dst, bit = &c.out, hasOut
		case "total_tokens":
			dst, bit = &c.total, hasTotal
		case "cache_read_input_tokens":
			dst, bit = &c.cacheRead, hasCacheRead
		case "cache_creation_input_tokens":
			dst, bit = &c.cacheCreation, hasCacheCreation
		case "prompt_tokens_details", "input_tokens_details":
			detail, bit = "cached_tokens", hasCached
		case "completion_tokens_details", "output_tokens_details":
			detail, bit = "reasoning_tokens", hasReasoning
		}
		switch {
		case dst != nil:
			switch x := b[i]; {
			case x == 'n' && hasLiteral(b, i, "null"):
				i += 4 // null is absent
			case x >= '0' && x <= '9':
				v, end, plain := plainCount(b, i)
				if !plain {
					return counts{}, false, false
				}
				*dst, c.has, i = v, c.has|bit, end
			case x == '-':
				return counts{}, false, false // -0 is a count of 0
			default:
				// A string, a boolean, an object or an array: usage the
				// provider did not report readably.
				return counts{}, false, true
			}
		case detail != "":
			v, found, end, sure := detailCount(b, i, detail)
			if !sure {
				return counts{}, false, false
			}
			if found {
				if bit == hasCached {
					c.cached = v
				} else {
					c.reasoning = v
				}
				c.has |= bit
			}
			i = end
		default:
			var ok bool
			if i, ok = skipValue(b, i); !ok {
				return counts{}, false, false
			}
		}
		i = skipSpace(b, i)
		if i >= n {
			return counts{}, false, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			if skipSpace(b, i+1) != n {
				return counts{}, false, false
			}
			return c, c.has&(hasIn|hasOut|hasTotal) != 0, true
		default:
			return counts{}, false, false
		}
	}
}

// member reads the object member whose name starts at b[i]: its name
// (false when spelt with escapes) and where its value starts.
func member(b []byte, i int) (key []byte, value int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	end, esc, ok := stringEnd(b, i)
	if !ok || esc {
		return nil, i, false
	}
	key = b[i+1 : end]
	i = skipSpace(b, end+1)
	if i >= len(b) || b[i] != ':' {
		return nil, i, false
	}
	i = skipSpace(b, i+1)
	return key, i, i < len(b)
}

// plainCount reads the number at b[i] when it is a run of at most 15
// digits (exact as a float64, as gjson would read it); plain is false for
// a longer run, a fraction or an exponent.
func plainCount(b []byte, i int) (v int64, end int, plain bool) {
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		v = v*10 + int64(b[j]-'0')
		j++
	}
	if j-i > 15 || j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return 0, j, false
	}
	return v, j, true
}

// detailCount reads a details member's value at b[i] as readCounts does,
// count(v.Get(name)): the first member called name of an object, when it
// is a count. found is false for null or for an object without a count
// of that name; sure is false for anything else.
func detailCount(b []byte, i int, name string) (v int64, found bool, end int, sure bool) {
	if hasLiteral(b, i, "null") {
		return 0, false, i + 4, true
	}
	if b[i] != '{' {
		return 0, false, i, false
	}
	end, ok := skipValue(b, i)
	if !ok {
		return 0, false, i, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return 0, false, end, true
	}
	for {
		key, at, ok := member(b, i)
		if !ok {
			return 0, false, end, false
		}
		if string(key) == name {
			switch x := b[at]; {
			case x >= '0' && x <= '9':
				v, _, plain := plainCount(b, at)
				return v, plain, end, plain
			case x == '-':
				return 0, false, end, false
			default:
				return 0, false, end, true
			}
		}
		if i, ok = skipValue(b, at); !ok {
			return 0, false, end, false
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ',' {
			return 0, false, end, true // the object's end: no such member
		}
		i = skipSpace(b, i+1)
	}
}
