package llm

import (
	"strconv"

	"github.com/tidwall/gjson"
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
	root := gjson.Parse(view(body))
	if !root.IsObject() {
		return body, false
	}
	type hit struct{ from, to int }
	var hits []hit
	members := 0
	root.ForEach(func(k, v gjson.Result) bool {
		members++
		for _, name := range names {
			if k.Str == name && v.Type != gjson.Null {
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
