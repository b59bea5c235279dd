package llm

import (
	"strconv"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"
)

// SetOutputMax returns a copy of a request body whose output maximum is n:
// the member the endpoint reads it from (max_completion_tokens or
// max_tokens on chat, max_tokens on completions and messages,
// max_output_tokens on responses) has its value replaced, or, when the
// request set none, max_completion_tokens (chat), max_tokens (completions,
// messages) or max_output_tokens (responses) is added after the last
// member. On chat both max_tokens and max_completion_tokens are lowered
// when both are present. The rest of the document is kept byte for byte.
// Embeddings have no output: the body comes back unchanged and false, as
// it does for a body that is not a valid JSON object.
func SetOutputMax(ep Endpoint, body []byte, n int64) ([]byte, bool) {
	var names []string
	var add string
	switch ep {
	case ChatCompletions:
		names, add = []string{"max_completion_tokens", "max_tokens"}, "max_completion_tokens"
	case Completions, Messages:
		names, add = []string{"max_tokens"}, "max_tokens"
	case Responses:
		names, add = []string{"max_output_tokens"}, "max_output_tokens"
	default:
		return body, false
	}
	if off, _ := checkSyntax(body); off >= 0 {
		return body, false
	}
	root := jv.Parse(view(body))
	if !root.IsObject() {
		return body, false
	}
	type hit struct{ from, to int }
	var hits []hit
	members := 0
	root.ForEach(func(k, v jv.Value) bool {
		members++
		for _, name := range names {
			if k.Str == name && v.Type != jv.Null {
				hits = append(hits, hit{v.Index, v.Index + len(v.Raw)})
			}
		}
		return true
	})
	num := strconv.FormatInt(n, 10)
	if len(hits) == 0 {
		return addMember(body, members, `"`+add+`":`+num), true
	}
	// Replace from the last hit backwards so earlier offsets stay valid.
	out := body
	for i := len(hits) - 1; i >= 0; i-- {
		out = splice(out, hits[i].from, hits[i].to, num)
	}
	return out, true
}

// SetOutputMax is the package's SetOutputMax for the body r was parsed
// from (or the body an earlier rewrite of r returned): it splices at the
// offsets the parse noted instead of reading the body again, and keeps
// them current for the next rewrite. Given another body, it reads it.
func (r *Request) SetOutputMax(body []byte, n int64) ([]byte, bool) {
	ed := &r.edits
	if ed.size == 0 || ed.size != len(body) {
		return SetOutputMax(r.Endpoint, body, n)
	}
	var hits [2]span
	var add string
	switch r.Endpoint {
	case ChatCompletions:
		hits, add = [2]span{ed.maxTokens, ed.maxCompletion}, "max_completion_tokens"
	case Completions, Messages:
		hits[0], add = ed.maxTokens, "max_tokens"
	case Responses:
		hits[0], add = ed.maxOutput, "max_output_tokens"
	default:
		return body, false
	}
	num := strconv.FormatInt(n, 10)
	if hits[0].end == 0 && hits[1].end == 0 {
		at := memberEnd(body)
		member := `"` + add + `":` + num
		if ed.members > 0 {
			member = "," + member
		}
		out := splice(body, at, at, member)
		ed.shift(at, len(member))
		ed.members++
		sp := span{at + len(member) - len(num), at + len(member)}
		if add == "max_completion_tokens" {
			ed.maxCompletion = sp
		} else if add == "max_tokens" {
			ed.maxTokens = sp
		} else {
			ed.maxOutput = sp
		}
		ed.size = len(out)
		return out, true
	}
	// The later span first, so that the earlier one's offsets stay valid.
	if hits[0].start < hits[1].start {
		hits[0], hits[1] = hits[1], hits[0]
	}
	out := body
	for _, h := range hits {
		if h.end == 0 {
			continue
		}
		out = splice(out, h.start, h.end, num)
		ed.replaced(h, len(num))
	}
	ed.size = len(out)
	return out, true
}
