package llm

import (
	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// SetModel returns a copy of the body r was parsed from (or the body an
// earlier rewrite of r returned) whose top-level model member names model
// instead, the rest kept byte for byte, and sets r.Model. A body with no
// model string member (or not a valid JSON object) comes back unchanged
// with false, r untouched. The offsets the parse noted for later rewrites
// are kept current; where the one pass noted the model's, the body is not
// read again.
func (r *Request) SetModel(body []byte, model string) ([]byte, bool) {
	ed := &r.edits
	at := ed.model
	if ed.size == 0 || ed.size != len(body) || at.end == 0 {
		if at = modelSpan(body); at.end == 0 {
			return body, false
		}
	}
	val := string(jsontok.AppendString(nil, model))
	out := splice(body, at.start, at.end, val)
	if ed.size != 0 && ed.size == len(body) {
		ed.replaced(at, len(val))
		ed.size = len(out)
	}
	r.Model = model
	return out, true
}

// modelSpan is where the last top-level model string member of body is,
// read with jv (end 0 when there is none, or body is not a valid JSON
// object).
func modelSpan(body []byte) span {
	if off, _ := checkSyntax(body); off >= 0 {
		return span{}
	}
	root := jv.Parse(view(body))
	if !root.IsObject() {
		return span{}
	}
	var at span
	root.ForEach(func(k, v jv.Value) bool {
		if k.Str == "model" && v.Type == jv.String {
			at = span{v.Index, v.Index + len(v.Raw)}
		}
		return true
	})
	return at
}
