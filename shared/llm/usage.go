package llm

import (
	"strings"

	"github.com/tidwall/gjson"

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
// the provider reports them. A missing total_tokens is Input + Output.
// Counts that are not non-negative numbers read as 0.
//
// The body is not validated as a whole (it comes from the provider, and
// may be large); the usage object is.
func ParseUsage(path string, body []byte) (u ledger.Usage, servedModel string, ok bool) {
	ep := EndpointOf(path)
	if ep == Unknown {
		return ledger.Usage{}, "", false
	}
	root := gjson.Parse(view(body))
	if !root.IsObject() {
		return ledger.Usage{}, "", false
	}
	var usage, model gjson.Result
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "usage":
			usage = v
		case "model":
			model = v
		}
		return true
	})
	c, ok := readCounts(usage)
	if !ok {
		return ledger.Usage{}, "", false
	}
	if model.Type == gjson.String {
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
// valid object with an input, output or total count.
func readCounts(u gjson.Result) (c counts, ok bool) {
	if !u.IsObject() {
		return counts{}, false
	}
	if off, _ := checkSyntax(viewBytes(u.Raw)); off >= 0 {
		return counts{}, false
	}
	u.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "prompt_tokens", "input_tokens":
			c.in, c.has = count(v), c.has|hasIn
		case "completion_tokens", "output_tokens":
			c.out, c.has = count(v), c.has|hasOut
		case "total_tokens":
			c.total, c.has = count(v), c.has|hasTotal
		case "prompt_tokens_details", "input_tokens_details":
			if d := v.Get("cached_tokens"); d.Exists() {
				c.cached, c.has = count(d), c.has|hasCached
			}
		case "completion_tokens_details", "output_tokens_details":
			if d := v.Get("reasoning_tokens"); d.Exists() {
				c.reasoning, c.has = count(d), c.has|hasReasoning
			}
		case "cache_read_input_tokens":
			c.cacheRead, c.has = count(v), c.has|hasCacheRead
		case "cache_creation_input_tokens":
			c.cacheCreation, c.has = count(v), c.has|hasCacheCreation
		}
		return true
	})
	return c, c.has&(hasIn|hasOut|hasTotal) != 0
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

// count reads a token count: a non-negative number, else 0.
func count(v gjson.Result) int64 {
	if v.Type != gjson.Number || !(v.Num > 0) {
		return 0
	}
	if v.Num >= maxExactInt {
		return maxExactInt
	}
	return int64(v.Num)
}
