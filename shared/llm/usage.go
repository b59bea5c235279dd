package llm

import (
	"math"
	"strings"

	"github.com/tokentriage/tokentriage/shared/jsontok"
	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// ParseUsage reads the usage a provider reported in a JSON response body
// of the endpoint at path, and the model it says it served. ok is false
// when the body carries no usage object with token counts (an error body,
// an unknown endpoint, unreadable JSON).
//
// The fields, per API:
//
//   - chat and completions: usage.prompt_tokens → Input,
//     completion_tokens → Output, total_tokens → Total,
//     prompt_tokens_details.cached_tokens → CachedInput,
//     completion_tokens_details.reasoning_tokens → Reasoning.
//   - embeddings: prompt_tokens → Input, total_tokens → Total.
//   - responses: input_tokens, output_tokens, total_tokens,
//     input_tokens_details.cached_tokens and
//     output_tokens_details.reasoning_tokens, likewise.
//   - messages (Anthropic): input_tokens counts only the uncached part of
//     the prompt, so Input = input_tokens + cache_read_input_tokens +
//     cache_creation_input_tokens (every prompt token, as OpenAI counts
//     them); CachedInput = cache_read_input_tokens (the part billed at the
//     cache-read rate); Output = output_tokens; Total = Input + Output.
//     Cache-creation tokens are priced as plain input: the ledger row has
//     no field for their premium.
//
// OpenAI's cached and reasoning counts are subsets of Input and Output, as
// the provider reports them. A missing total_tokens is Input + Output. A
// usage object whose counts are not non-negative whole numbers (a string,
// a negative, a fraction) is no usage: ok is false, and settlement
// estimates the row as it does when a provider reports none.
//
// The body is not validated as a whole (it comes from the provider, and
// may be large); the usage object is.
func ParseUsage(path string, body []byte) (u ledger.Usage, servedModel string, ok bool) {
	ep := EndpointOf(path)
	if ep == Unknown {
		return ledger.Usage{}, "", false
	}
	if c, served, have, sure := parseUsageFast(body); sure {
		if !have {
			return ledger.Usage{}, "", false
		}
		return c.usage(ep), served, true
	}
	return parseUsageGJSON(ep, body)
}

// parseUsageGJSON is ParseUsage through jv's iteration of the top level
// (gjson's, on a valid body), for the bodies findUsage is not sure of. A
// body broken before its usage member has its last valid usage object
// read (lastUsage), as gjson read past the fault to it.
func parseUsageGJSON(ep Endpoint, body []byte) (u ledger.Usage, servedModel string, ok bool) {
	root := jv.Parse(view(body))
	if !root.IsObject() {
		return ledger.Usage{}, "", false
	}
	var usage, model jv.Value
	root.ForEach(func(k, v jv.Value) bool {
		switch k.Str {
		case "usage":
			usage = v
		case "model":
			model = v
		}
		return true
	})
	c, ok := readUsage(usage, body)
	if !ok {
		return ledger.Usage{}, "", false
	}
	if model.Type == jv.String {
		servedModel = strings.Clone(model.Str)
	}
	return c.usage(ep), servedModel, true
}

// counts holds the token counts of one usage object, in any of the shapes,
// with a presence bit per field.
type counts struct {
	in, out, total, cached, reasoning, cacheRead, cacheCreation int64
	has                                                         uint8
}

const (
	hasIn uint8 = 1 << iota
	hasOut
	hasTotal
	hasCached
	hasReasoning
	hasCacheRead
	hasCacheCreation
)

// readCounts reads a usage object in one pass. ok is false unless u is a
// valid object with an input, output or total count, and every count it
// carries that the fold uses (input, output, total, Anthropic's cache
// reads and writes) is a non-negative whole number or null: a string, a
// negative or a fraction is not a count of 0, it is usage the provider did
// not report readably, and the caller estimates it as it would missing
// usage. A malformed cached or reasoning count is left out (cached tokens
// are then billed as plain input).
func readCounts(u jv.Value) (c counts, ok bool) {
	if !u.IsObject() {
		return counts{}, false
	}
	if off, _ := checkSyntax(viewBytes(u.Raw)); off >= 0 {
		return counts{}, false
	}
	bad := false
	u.ForEach(func(k, v jv.Value) bool {
		dst, bit, detail := usageMember(&c, k.Str)
		switch {
		case dst == nil:
			return true
		case detail != "":
			if n, ok := count(v.Get(detail)); ok {
				*dst, c.has = n, c.has|bit
			}
			return true
		case v.Type == jv.Null:
			return true // null is absent
		}
		n, ok := count(v)
		if !ok {
			bad = true
			return false
		}
		*dst, c.has = n, c.has|bit
		return true
	})
	if bad {
		return counts{}, false
	}
	return c, c.has&(hasIn|hasOut|hasTotal) != 0
}

// usageMember is what a usage object's member called name holds for
// counts c: a count, to be read into dst and marked with bit in c.has; a
// details object, whose member called detail holds that count; or nothing
// the fold uses (dst nil).
func usageMember(c *counts, name string) (dst *int64, bit uint8, detail string) {
	switch name {
	case "prompt_tokens", "input_tokens":
		return &c.in, hasIn, ""
	case "completion_tokens", "output_tokens":
		return &c.out, hasOut, ""
	case "total_tokens":
		return &c.total, hasTotal, ""
	case "cache_read_input_tokens":
		return &c.cacheRead, hasCacheRead, ""
	case "cache_creation_input_tokens":
		return &c.cacheCreation, hasCacheCreation, ""
	case "prompt_tokens_details", "input_tokens_details":
		return &c.cached, hasCached, "cached_tokens"
	case "completion_tokens_details", "output_tokens_details":
		return &c.reasoning, hasReasoning, "reasoning_tokens"
	}
	return nil, 0, ""
}

// readUsage reads usage, the usage member of doc; a doc broken before
// its usage member has its last valid usage object read (lastUsage).
func readUsage(usage jv.Value, doc []byte) (counts, bool) {
	c, ok := readCounts(usage)
	if !ok && !usage.Exists() && jsontok.Valid(doc, jsontok.GJSON).Code != jsontok.ErrNone {
		c, ok = lastUsage(doc)
	}
	return c, ok
}

// merge overwrites c's fields with those present in d (Anthropic streams
// report usage in two events, the later one cumulative).
func (c *counts) merge(d counts) {
	if d.has&hasIn != 0 {
		c.in = d.in
	}
	if d.has&hasOut != 0 {
		c.out = d.out
	}
	if d.has&hasTotal != 0 {
		c.total = d.total
	}
	if d.has&hasCached != 0 {
		c.cached = d.cached
	}
	if d.has&hasReasoning != 0 {
		c.reasoning = d.reasoning
	}
	if d.has&hasCacheRead != 0 {
		c.cacheRead = d.cacheRead
	}
	if d.has&hasCacheCreation != 0 {
		c.cacheCreation = d.cacheCreation
	}
	c.has |= d.has
}

// usage maps counts to the ledger's Usage for an endpoint (see ParseUsage).
func (c counts) usage(ep Endpoint) ledger.Usage {
	if ep == Messages {
		in := addSat(addSat(c.in, c.cacheRead), c.cacheCreation)
		return ledger.Usage{
			Input:       in,
			Output:      c.out,
			CachedInput: c.cacheRead,
			Total:       addSat(in, c.out),
		}
	}
	u := ledger.Usage{
		Input:       c.in,
		Output:      c.out,
		CachedInput: c.cached,
		Reasoning:   c.reasoning,
		Total:       c.total,
	}
	if c.has&hasTotal == 0 {
		u.Total = addSat(c.in, c.out)
	}
	return u
}

// count reads a token count: a non-negative whole number; ok is false
// for anything else (a string, a negative number, a fraction, null,
// absent). Counts from 2^53 up read as 2^53: settlement bounds what a
// request could have produced long before that.
func count(v jv.Value) (int64, bool) {
	if v.Type != jv.Number || !(v.Num >= 0) || v.Num != math.Trunc(v.Num) {
		return 0, false
	}
	if v.Num >= maxExactInt {
		return maxExactInt, true
	}
	return int64(v.Num), true
}
