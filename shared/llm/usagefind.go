package llm

import (
	"strings"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// findUsage is ParseUsage's fast path: one pass over the top level of a
// JSON answer with the project's tokenizer, skipping every member's value
// whole (strings sixteen bytes at a time, nested values in one call), and
// keeping the spans of the last "usage" and the last "model" members, as
// gjson's iteration of the top level would. gjson walked every nested
// value of the answer (the whole completion text) through its generic
// parser; in the filter's wasm that was most of a non-streamed request's
// settlement. ok is false for a body this pass is not sure of (invalid
// JSON, read up to its fault and then for its last valid usage object; a
// top-level name spelt with escapes; nesting deeper than MaxDepth): the
// caller then reads it with jv.
// TestFindUsageMatchesGJSON and FuzzParseUsage hold the two to the same
// results.
func findUsage(b []byte) (usage, model span, ok bool) {
	var t jsontok.Tokenizer
	t.Reset(b, jsontok.GJSON)
	keep := 0 // 1: the member read is usage; 2: model
	start := 0
	for {
		toks := t.Batch()
		for k := range toks {
			tok := &toks[k]
			switch {
			case tok.Depth == 1 && tok.Kind == jsontok.Key:
				keep = 0
				if tok.Shrink > 0 {
					return span{}, span{}, false // spelt with escapes: gjson decides
				}
				switch string(b[tok.Start+1 : tok.End-1]) {
				case "usage":
					keep = 1
				case "model":
					keep = 2
				}
			case tok.Depth == 1 && keep != 0:
				// The value of a kept member: a scalar, or a container
				// opening (its span ends at its close).
				switch tok.Kind {
				case jsontok.ObjectStart, jsontok.ArrayStart:
					start = tok.Start
					continue
				case jsontok.ObjectEnd, jsontok.ArrayEnd:
				default:
					start = tok.Start
				}
				if keep == 1 {
					usage = span{start, tok.End}
				} else {
					model = span{start, tok.End}
				}
				keep = 0
			case tok.Depth == 0:
				switch tok.Kind {
				case jsontok.End:
					return usage, model, true
				case jsontok.ObjectStart, jsontok.ObjectEnd:
				default:
					return span{}, span{}, false // not an object
				}
			case tok.Kind == jsontok.Err:
				return span{}, span{}, false
			}
		}
	}
}

// parseUsageFast is ParseUsage over findUsage's spans; ok false when
// findUsage was not sure (the caller then takes the jv path).
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

// readCountsRaw is readCounts(jv.Parse(raw)) for a usage object whose
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
	return readCounts(jv.Parse(view(raw)))
}

// countsOf is readCountsRaw's one pass over a valid usage object b; sure
// is false when readCounts must decide. Whatever b holds, it returns
// rather than indexing past it.
func countsOf(b []byte) (c counts, ok, sure bool) {
	var t jsontok.Tokenizer
	t.Reset(b, jsontok.GJSON)
	var (
		dst    *int64 // the count the member being read sets (usageMember)
		bit    uint8
		detail string // a details member being read: the name of its count
		found  bool   // the details member's count is the value being read
	)
	for {
		toks := t.Batch()
		for k := range toks {
			tok := &toks[k]
			switch tok.Depth {
			case 0:
				switch tok.Kind {
				case jsontok.ObjectStart, jsontok.ObjectEnd:
					continue
				case jsontok.End:
					return c, c.has&(hasIn|hasOut|hasTotal) != 0, true
				}
				return counts{}, false, false // not an object, or not JSON
			case 1:
				if tok.Kind == jsontok.Key {
					if tok.Shrink > 0 {
						return counts{}, false, false // spelt with escapes
					}
					dst, bit, detail = usageMember(&c, string(b[tok.Start+1:tok.End-1]))
					found = false
					continue
				}
				switch {
				case detail != "":
					if tok.Kind != jsontok.Null && tok.Kind != jsontok.ObjectStart && tok.Kind != jsontok.ObjectEnd {
						return counts{}, false, false // a details member that is not an object
					}
				case dst != nil:
					switch tok.Kind {
					case jsontok.Null: // null is absent
					case jsontok.Number:
						v, plain := plainCount(b, tok)
						if !plain {
							return counts{}, false, false
						}
						*dst, c.has = v, c.has|bit
					default:
						// A string, a boolean, an object or an array: usage
						// the provider did not report readably.
						return counts{}, false, true
					}
					dst = nil
				}
			case 2:
				// Inside a details object: its first member called detail
				// (count(v.Get(detail))); a count with a sign, fraction or
				// exponent is readCounts' to decide.
				if detail == "" {
					continue
				}
				if tok.Kind == jsontok.Key {
					if tok.Shrink > 0 {
						return counts{}, false, false
					}
					found = string(b[tok.Start+1:tok.End-1]) == detail
					continue
				}
				if !found {
					continue
				}
				if tok.Kind == jsontok.Number {
					v, plain := plainCount(b, tok)
					if !plain {
						return counts{}, false, false
					}
					*dst, c.has = v, c.has|bit
				}
				dst, detail, found = nil, "", false // the first such member decides
			default:
				if tok.Kind == jsontok.Err {
					return counts{}, false, false
				}
			}
		}
	}
}

// plainCount reads a number token when it is a run of at most 15 digits
// (exact as a float64, as gjson would read it); plain is false for a sign,
// a longer run, a fraction or an exponent (-0 and 1e3 are counts to gjson).
func plainCount(b []byte, tok *jsontok.Token) (v int64, plain bool) {
	if tok.End-tok.Start > 15 {
		return 0, false
	}
	for _, c := range b[tok.Start:tok.End] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}
