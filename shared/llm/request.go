package llm

import (
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"
)

// Request is what the gates read from a request body.
//
// PromptBytes is the number of bytes of the message contents, measured on
// the decoded text (a JSON escape such as \n counts as the one byte it
// stands for). Per API, it is the sum of:
//
//   - /v1/chat/completions: messages[].content as a string, or the text of
//     its content parts (parts[].text); and messages[].tool_calls[].function
//     .arguments, which the model reads back as prompt.
//   - /v1/completions: prompt as a string or an array of strings.
//   - /v1/embeddings: input as a string or an array of strings.
//   - /v1/responses: instructions, and input as a string or, per input item,
//     its content (a string or the text of its parts), its output (a
//     function_call_output, string or parts) and its arguments (a
//     function_call).
//   - /v1/messages: system as a string or the text of its blocks, and
//     messages[].content as a string or blocks: text blocks' text, tool_use
//     blocks' input (its JSON bytes) and tool_result blocks' content (a
//     string or text blocks).
//
// A prompt or input given as tokens (an array of integers, or an array of
// such arrays) counts TokenBytes bytes per token, so PromptBytes/4 is the
// token count the caller sent. Images, audio and files count nothing.
type Request struct {
	Endpoint Endpoint
	// Model as requested (decoded; never empty).
	Model string
	// MaxTokens is the output maximum the caller set: max_completion_tokens
	// (else max_tokens) on chat, max_tokens on completions and messages,
	// max_output_tokens on responses. HasMaxTokens reports whether it was
	// set; embeddings have none.
	MaxTokens    int64
	HasMaxTokens bool
	// Stream is the "stream" flag.
	Stream bool
	// IncludeUsage is stream_options.include_usage == true.
	IncludeUsage bool
	// PromptBytes is the byte count of the message contents (see above).
	PromptBytes int64
	// Choices is how many completions one call generates and bills: n on
	// chat and completions, best_of on completions (the larger), 1 when
	// absent or not a positive integer (the provider refuses those).
	Choices int64
	// RemoteInput is set when the call's input is not all in its body: a
	// responses call continuing a stored response or conversation
	// (previous_response_id, conversation), naming a stored prompt, or
	// with a tool that retrieves server-side (file_search, web_search).
	RemoteInput bool

	// edits locate the members SetOutputMax and InjectIncludeUsage
	// rewrite in the body the request was parsed from.
	edits bodyEdits
}

// TokenBytes is what one token of a token-array prompt counts toward
// PromptBytes, the inverse of the 4-bytes-per-token estimate.
const TokenBytes = 4

// maxExactInt is the largest integer a JSON number carries exactly in a
// float64; larger token counts are refused rather than rounded.
const maxExactInt = 1 << 53

// governed top-level keys; a second occurrence of any is refused, since
// gjson would read the first and a provider typically the last.
const (
	seenModel uint16 = 1 << iota
	seenStream
	seenStreamOptions
	seenMaxTokens
	seenMaxCompletionTokens
	seenMaxOutputTokens
	seenMessages
	seenPrompt
	seenInput
	seenInstructions
	seenSystem
)

// ParseRequest reads the governed fields of a request body sent to the
// endpoint at path (classified by EndpointOf). The body must be one valid
// JSON object; model must be a non-empty string; the fields it reads must
// have their documented types (null counts as absent) and appear once.
// Anything else is a *RequestError whose text names the field or byte
// offset and the cause, suitable for a 400 body. An endpoint that is not
// governed is a plain error.
func ParseRequest(path string, body []byte) (Request, error) {
	ep := EndpointOf(path)
	if ep == Unknown {
		return Request{}, &EndpointError{Path: path}
	}
	req, rerr := parseRequest(ep, body)
	if rerr != nil {
		return Request{}, rerr
	}
	return req, nil
}

// ParseRequestFields is ParseRequest that also reads the body members at
// paths as Fields reads them (out, reused when it has room, holds the
// value at each path), in the same pass over the body when the one-pass
// reader takes it: the body is read once.
func ParseRequestFields(path string, body []byte, paths []string, out []jv.Value) (Request, []jv.Value, error) {
	ep := EndpointOf(path)
	if ep == Unknown {
		return Request{}, out[:0], &EndpointError{Path: path}
	}
	req, out, rerr := parseRequestFields(ep, body, paths, out)
	if rerr != nil {
		return Request{}, out, rerr
	}
	return req, out, nil
}

func parseRequestFields(ep Endpoint, body []byte, paths []string, out []jv.Value) (Request, []jv.Value, *RequestError) {
	fr := newFieldReader(paths, out)
	req := Request{Endpoint: ep, Choices: 1}
	if scanRequest(ep, body, &req, &fr) {
		return req, fr.out, nil
	}
	req, rerr := parseRequestGJSON(ep, body)
	if rerr != nil {
		return Request{}, fr.out[:0], rerr
	}
	return req, Fields(body, paths, fr.out), nil
}

func parseRequest(ep Endpoint, body []byte) (Request, *RequestError) {
	req := Request{Endpoint: ep, Choices: 1}
	if scanRequest(ep, body, &req, nil) {
		return req, nil
	}
	return parseRequestGJSON(ep, body)
}

// parseRequestGJSON is the reading of a body the one-pass scanner leaves
// (see scanrequest.go): checkSyntax, then jv's iterators, each
// governed member checked for its type and repetition in document order.
func parseRequestGJSON(ep Endpoint, body []byte) (Request, *RequestError) {
	if off, cause := checkSyntax(body); off >= 0 {
		return Request{}, &RequestError{Offset: off, Cause: "invalid JSON: " + cause}
	}
	root := jv.Parse(view(body))
	if !root.IsObject() {
		return Request{}, &RequestError{Offset: root.Index, Cause: "must be a JSON object; got " + typeName(root)}
	}
	if err := foldedKey(root, path{}, ep, true, rootNames); err != nil {
		return Request{}, err
	}
	p := requestParser{req: Request{Endpoint: ep, Choices: 1}, maxTokens: -1, maxCompletion: -1}
	root.ForEach(p.field)
	if p.err != nil {
		return Request{}, p.err
	}
	if p.seen&seenModel == 0 {
		return Request{}, &RequestError{Field: "model", Offset: -1, Cause: `missing; name the model to call, e.g. "model":"gpt-4o-mini"`}
	}
	r := &p.req
	switch {
	case p.maxCompletion >= 0:
		r.MaxTokens, r.HasMaxTokens = p.maxCompletion, true
	case p.maxTokens >= 0:
		r.MaxTokens, r.HasMaxTokens = p.maxTokens, true
	}
	return p.req, nil
}

// requestParser walks the top-level members once.
type requestParser struct {
	req           Request
	seen          uint16
	maxTokens     int64 // -1 when absent or null
	maxCompletion int64
	err           *RequestError
}

func (p *requestParser) field(k, v jv.Value) bool {
	_, bit := rootRole(p.req.Endpoint, viewBytes(k.Str)) // the governed members, as the one pass knows them
	if bit == 0 {
		p.extra(k.Str, v)
		return p.err == nil
	}
	if p.seen&bit != 0 {
		p.err = fieldError(path{}.key(k.Str), k, "duplicate key; send each field once")
		return false
	}
	p.seen |= bit
	r := &p.req
	var n int64
	var err *RequestError
	at := path{}.key(k.Str)
	switch bit {
	case seenModel:
		if v.Type != jv.String {
			err = fieldError(at, v, "must be a string; got "+typeName(v))
		} else if v.Str == "" {
			err = fieldError(at, v, `must not be empty; name the model to call, e.g. "model":"gpt-4o-mini"`)
		} else {
			r.Model = strings.Clone(v.Str) // v.Str may alias the body
		}
	case seenStream:
		switch v.Type {
		case jv.True:
			r.Stream = true
		case jv.False, jv.Null:
		default:
			err = fieldError(at, v, "must be true or false; got "+typeName(v))
		}
	case seenStreamOptions:
		r.IncludeUsage, err = streamOptions(v, at)
	case seenMaxTokens:
		p.maxTokens, err = tokenLimit(v, at)
	case seenMaxCompletionTokens:
		p.maxCompletion, err = tokenLimit(v, at)
	case seenMaxOutputTokens:
		p.maxTokens, err = tokenLimit(v, at)
	case seenMessages:
		n, err = messagesBytes(v, at)
	case seenPrompt, seenInput:
		if p.req.Endpoint == Responses {
			n, err = responsesInputBytes(v, at)
		} else {
			n, err = promptBytes(v, at)
		}
	case seenInstructions:
		n, err = stringBytes(v, at)
	case seenSystem:
		n, err = contentBytes(v, at)
	}
	if err != nil {
		p.err = err
		return false
	}
	r.PromptBytes = addSat(r.PromptBytes, n)
	return true
}

// streamOptions reads stream_options.include_usage.
func streamOptions(v jv.Value, at path) (bool, *RequestError) {
	if v.Type == jv.Null {
		return false, nil
	}
	if !v.IsObject() {
		return false, fieldError(at, v, "must be an object; got "+typeName(v))
	}
	if err := foldedKey(v, at, Unknown, false, streamOptsNames); err != nil {
		return false, err
	}
	var include, seen bool
	var err *RequestError
	v.ForEach(func(k, f jv.Value) bool {
		if k.Str != "include_usage" {
			return true
		}
		sub := at.key("include_usage")
		if seen {
			err = fieldError(sub, k, "duplicate key; send each field once")
			return false
		}
		seen = true
		switch f.Type {
		case jv.True:
			include = true
		case jv.False, jv.Null:
		default:
			err = fieldError(sub, f, "must be true or false; got "+typeName(f))
			return false
		}
		return true
	})
	return include, err
}

// tokenLimit reads an output maximum: a non-negative integer, or null
// (absent, -1).
func tokenLimit(v jv.Value, at path) (int64, *RequestError) {
	switch v.Type {
	case jv.Null:
		return -1, nil
	case jv.Number:
		if v.Num >= 0 && v.Num <= maxExactInt && v.Num == float64(int64(v.Num)) {
			return int64(v.Num), nil
		}
		return -1, fieldError(at, v, "must be a non-negative integer; got "+v.Raw)
	}
	return -1, fieldError(at, v, "must be a non-negative integer; got "+typeName(v))
}

// addSat adds two non-negative counts, saturating instead of overflowing.
func addSat(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// typeName names a JSON value's type for an error message.
func typeName(v jv.Value) string {
	switch v.Type {
	case jv.Null:
		return "null"
	case jv.True, jv.False:
		return "a boolean"
	case jv.Number:
		return "a number"
	case jv.String:
		return "a string"
	case jv.JSON:
		if v.IsArray() {
			return "an array"
		}
		return "an object"
	}
	return "nothing"
}

// itoa is strconv.Itoa, named for brevity in path rendering.
func itoa(i int) string { return strconv.Itoa(i) }

// extra reads the members that bound a call's cost without being part of
// its prompt: how many completions it generates, and whether its input
// reaches beyond the body. A value of the wrong type is left for the
// provider to refuse.
func (p *requestParser) extra(key string, v jv.Value) {
	r := &p.req
	switch ep := r.Endpoint; {
	case key == "n" && (ep == ChatCompletions || ep == Completions), key == "best_of" && ep == Completions:
		if v.Type == jv.Number && v.Num >= 1 && v.Num <= 1<<20 && v.Num == float64(int64(v.Num)) && int64(v.Num) > r.Choices {
			r.Choices = int64(v.Num)
		}
	case ep != Responses:
	case key == "previous_response_id" || key == "conversation":
		if v.Type != jv.Null && v.Raw != `""` {
			r.RemoteInput = true
		}
	case key == "prompt":
		if v.IsObject() {
			r.RemoteInput = true
		}
	case key == "tools":
		i := 0
		v.ForEach(func(k, t jv.Value) bool {
			at := path{}.key("tools")
			if v.IsArray() {
				at = at.index(i)
			} else {
				at = at.key(k.Str)
			}
			i++
			if t.IsObject() {
				if p.err = foldedKey(t, at, Unknown, false, toolNames); p.err != nil {
					return false
				}
			}
			if typ := t.Get("type").String(); strings.Contains(typ, "search") || strings.Contains(typ, "file") {
				r.RemoteInput = true
				return false
			}
			return true
		})
	}
}
