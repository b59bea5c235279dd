package llm

import "github.com/tidwall/gjson"

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
	root := gjson.Parse(view(body))
	if !root.IsObject() {
		return body, false
	}
	var stream, opts gjson.Result
	var streams, optsSeen, members int
	root.ForEach(func(k, v gjson.Result) bool {
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
	if streams != 1 || stream.Type != gjson.True || optsSeen > 1 {
		return body, false
	}
	switch {
	case optsSeen == 0:
		return addMember(body, members, streamOptionsMember), true
	case opts.Type == gjson.Null:
		return splice(body, opts.Index, opts.Index+len(opts.Raw), "{"+includeUsageMember+"}"), true
	case !opts.IsObject():
		return body, false
	}
	var include gjson.Result
	var includes, optMembers int
	opts.ForEach(func(k, v gjson.Result) bool {
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
	case includes == 1 && include.Type == gjson.True:
		return body, false
	case includes == 1 && (include.Type == gjson.False || include.Type == gjson.Null):
		return splice(body, include.Index, include.Index+len(include.Raw), "true"), true
	case includes == 1:
		return body, false // a wrong type: leave it for the provider to refuse
	case optMembers == 0:
		return splice(body, opts.Index, opts.Index+len(opts.Raw), "{"+includeUsageMember+"}"), true
	}
	return splice(body, opts.Index+1, opts.Index+1, includeUsageMember+","), true
}

// addMember returns a copy of the JSON object body (which has members
// members) with member ("key":value) added after its last member.
func addMember(body []byte, members int, member string) []byte {
	// After the last member: the last non-space byte before the final '}'.
	end := len(body) - 1
	for end >= 0 && body[end] != '}' {
		end--
	}
	at := end
	for at > 0 && isSpace(body[at-1]) {
		at--
	}
	if members > 0 {
		member = "," + member
	}
	return splice(body, at, at, member)
}

// splice returns a new slice: b with b[from:to] replaced by s.
func splice(b []byte, from, to int, s string) []byte {
	out := make([]byte, 0, len(b)-(to-from)+len(s))
	out = append(out, b[:from]...)
	out = append(out, s...)
	return append(out, b[to:]...)
}
