package llm

import (
	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// includeUsageMember is what InjectIncludeUsage adds.
const (
	includeUsageMember  = `"include_usage":true`
	streamOptionsMember = `"stream_options":{` + includeUsageMember + `}`
)

// InjectIncludeUsage makes a streaming OpenAI chat or completions request
// ask for usage: when body has "stream": true and lacks
// stream_options.include_usage: true, it returns a copy of body with it set
// and true. The rest of the document is kept byte for byte: a missing
// stream_options is added after the last member, an existing object gets
// the member added first (its other fields kept), a false or null
// include_usage (or a null stream_options) has just that value replaced.
//
// Otherwise it returns body unchanged and false: not streaming, already
// asking, not a valid JSON object, stream_options not an object, or a
// duplicated stream, stream_options or include_usage key (ParseRequest
// refuses such bodies). Call it only for /v1/chat/completions and
// /v1/completions; the responses API and Anthropic always report usage.
func InjectIncludeUsage(body []byte) ([]byte, bool) {
	if off, _ := checkSyntax(body); off >= 0 {
		return body, false
	}
	root := jv.Parse(view(body))
	if !root.IsObject() {
		return body, false
	}
	var stream, opts jv.Value
	var streams, optsSeen, members int
	root.ForEach(func(k, v jv.Value) bool {
		members++
		switch k.Str {
		case "stream":
			stream = v
			streams++
		case "stream_options":
			opts = v
			optsSeen++
		}
		return true
	})
	if streams != 1 || stream.Type != jv.True || optsSeen > 1 {
		return body, false
	}
	switch {
	case optsSeen == 0:
		return addMember(body, members, streamOptionsMember), true
	case opts.Type == jv.Null:
		return splice(body, opts.Index, opts.Index+len(opts.Raw), "{"+includeUsageMember+"}"), true
	case !opts.IsObject():
		return body, false
	}
	var include jv.Value
	var includes, optMembers int
	opts.ForEach(func(k, v jv.Value) bool {
		optMembers++
		if k.Str == "include_usage" {
			include = v
			includes++
		}
		return true
	})
	switch {
	case includes > 1:
		return body, false
	case includes == 1 && include.Type == jv.True:
		return body, false
	case includes == 1 && (include.Type == jv.False || include.Type == jv.Null):
		return splice(body, include.Index, include.Index+len(include.Raw), "true"), true
	case includes == 1:
		return body, false // a wrong type: leave it for the provider to refuse
	case optMembers == 0:
		return splice(body, opts.Index, opts.Index+len(opts.Raw), "{"+includeUsageMember+"}"), true
	}
	return splice(body, opts.Index+1, opts.Index+1, includeUsageMember+","), true
}

// InjectIncludeUsage is the package's InjectIncludeUsage for the body r
// was parsed from (or the body an earlier rewrite of r returned), spliced
// at the offsets the parse noted; given another body, it reads it.
func (r *Request) InjectIncludeUsage(body []byte) ([]byte, bool) {
	ed := &r.edits
	if ed.size == 0 || ed.size != len(body) {
		return InjectIncludeUsage(body)
	}
	if !r.Stream || r.IncludeUsage || r.Endpoint != ChatCompletions && r.Endpoint != Completions {
		return body, false
	}
	var out []byte
	switch {
	case ed.opts.end == 0:
		at := memberEnd(body)
		member := streamOptionsMember
		if ed.members > 0 {
			member = "," + member
		}
		out = splice(body, at, at, member)
	case ed.optsNull, ed.optsMembers == 0:
		out = splice(body, ed.opts.start, ed.opts.end, "{"+includeUsageMember+"}")
	case ed.include.end != 0:
		out = splice(body, ed.include.start, ed.include.end, "true") // false or null
	default:
		out = splice(body, ed.opts.start+1, ed.opts.start+1, includeUsageMember+",")
	}
	r.IncludeUsage = true
	*ed = bodyEdits{} // not kept: nothing rewrites the body after this
	return out, true
}

// addMember returns a copy of the JSON object body (which has members
// members) with member ("key":value) added after its last member.
func addMember(body []byte, members int, member string) []byte {
	if members > 0 {
		member = "," + member
	}
	at := memberEnd(body)
	return splice(body, at, at, member)
}

// memberEnd is where a member added after the last one of the JSON object
// body goes: after the last non-space byte before its closing brace.
func memberEnd(body []byte) int {
	end := len(body) - 1
	for end >= 0 && body[end] != '}' {
		end--
	}
	at := end
	for at > 0 && jsontok.IsSpace(body[at-1]) {
		at--
	}
	return at
}

// shift moves the noted offsets at or after at by d bytes: d bytes were
// inserted there.
func (ed *bodyEdits) shift(at, d int) {
	for _, sp := range []*span{&ed.model, &ed.maxTokens, &ed.maxCompletion, &ed.maxOutput, &ed.opts, &ed.include} {
		if sp.end != 0 && sp.start >= at {
			sp.start += d
			sp.end += d
		}
	}
}

// replaced notes that the value at h now has n bytes.
func (ed *bodyEdits) replaced(h span, n int) {
	d := n - (h.end - h.start)
	for _, sp := range []*span{&ed.model, &ed.maxTokens, &ed.maxCompletion, &ed.maxOutput, &ed.opts, &ed.include} {
		switch {
		case sp.end == 0:
		case *sp == h:
			sp.end = sp.start + n
		case sp.start >= h.end:
			sp.start += d
			sp.end += d
		}
	}
}

// splice returns a new slice: b with b[from:to] replaced by s.
func splice(b []byte, from, to int, s string) []byte {
	out := make([]byte, 0, len(b)-(to-from)+len(s))
	out = append(out, b[:from]...)
	out = append(out, s...)
	return append(out, b[to:]...)
}
