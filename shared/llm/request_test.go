package llm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseRequestSeed(t *testing.T) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What is the capital of Germany?"}]}`)
	req, err := ParseRequest("/v1/chat/completions", body)
	if err != nil {
		t.Fatal(err)
	}
	if req.PromptBytes != 31 || req.HasMaxTokens || req.Model != "gpt-4o-mini" {
		t.Fatalf("got %+v, want 31 prompt bytes, no max_tokens, model gpt-4o-mini", req)
	}
	if got := Reserve(req); got != 16391 {
		t.Fatalf("Reserve = %d, want 16391 (7 + 16384)", got)
	}
}

func TestReserve(t *testing.T) {
	for i, tc := range []struct {
		prompt, max int64
		has         bool
		want        int64
	}{
		{31, 0, false, 7 + ReserveCap},
		{31, 100, true, 7 + 100},
		{31, 0, true, 7},
		{31, ReserveCap + 1, true, 7 + ReserveCap},
		{3, 10, true, 10},
		{400, 1 << 40, true, 100 + ReserveCap},
	} {
		got := Reserve(Request{Endpoint: ChatCompletions, PromptBytes: tc.prompt, MaxTokens: tc.max, HasMaxTokens: tc.has})
		if got != tc.want {
			t.Errorf("case %d: Reserve(prompt %d, max %d/%v) = %d, want %d", i, tc.prompt, tc.max, tc.has, got, tc.want)
		}
	}
}

func TestReserveEmbeddingsHasNoOutput(t *testing.T) {
	if got := Reserve(Request{Endpoint: Embeddings, PromptBytes: 56}); got != 14 {
		t.Fatalf("Reserve(embeddings, 56 bytes) = %d, want 14", got)
	}
}

func TestEstimateTokens(t *testing.T) {
	for n, want := range map[int64]int64{-1: 0, 0: 0, 1: 1, 3: 1, 4: 1, 5: 2, 8: 2, 31: 8, 1<<63 - 1: 1 << 61} {
		if got := EstimateTokens(n); got != want {
			t.Errorf("EstimateTokens(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestEndpointOf(t *testing.T) {
	for path, want := range map[string]Endpoint{
		"/v1/chat/completions":               ChatCompletions,
		"/v1/chat/completions/":              ChatCompletions,
		"/v1/chat/completions?api-version=1": ChatCompletions,
		"/openai/v1/chat/completions":        ChatCompletions,
		"/v1/completions":                    Completions,
		"/proxy/openai/v1/completions":       Completions,
		"/v1/embeddings":                     Embeddings,
		"/v1/responses":                      Responses,
		"/v1/messages":                       Messages,
		"/anthropic/v1/messages":             Messages,
		"/v1/messages/count_tokens":          Unknown,
		"/v1/responses/resp_123":             Unknown,
		"/v1/models":                         Unknown,
		"/xv1/messages":                      Unknown,
		"v1/messages":                        Unknown,
		"":                                   Unknown,
		"/":                                  Unknown,
		"/tt/v1/me":                          Unknown,
	} {
		if got := EndpointOf(path); got != want {
			t.Errorf("EndpointOf(%q) = %v, want %v", path, got, want)
		}
	}
	if ChatCompletions.String() != "/v1/chat/completions" || Unknown.String() != "" || Endpoint(200).String() != "" {
		t.Error("Endpoint.String is not the canonical path")
	}
}

// TestParseRequestErrors asserts error texts word for word.
func TestParseRequestErrors(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	for i, tc := range []struct {
		path, body, want string
	}{
		{"/v1/chat/completions", ``, `request body at byte 0: invalid JSON: unexpected end of input, expecting a value`},
		{"/v1/chat/completions", `{"model":"m",}`, `request body at byte 13: invalid JSON: unexpected '}', expecting an object key in double quotes`},
		{"/v1/chat/completions", `{"model":"m"} x`, `request body at byte 14: invalid JSON: unexpected 'x' after the top-level value`},
		{"/v1/chat/completions", "{\"model\":\"a\tb\"}", `request body at byte 11: invalid JSON: control character byte 0x09 in a string; escape it`},
		{"/v1/chat/completions", `{"model":"\q"}`, `request body at byte 11: invalid JSON: invalid escape 'q' in a string`},
		{"/v1/chat/completions", `{"max_tokens":01}`, `request body at byte 15: invalid JSON: unexpected '1', expecting ',' or '}' after an object member`},
		{"/v1/chat/completions", `{"a":[1 2]}`, `request body at byte 8: invalid JSON: unexpected '2', expecting ',' or ']' after an array element`},
		{"/v1/chat/completions", `{"a":tru}`, `request body at byte 5: invalid JSON: invalid literal, expecting true`},
		{"/v1/chat/completions", `{"a":-}`, `request body at byte 6: invalid JSON: invalid number`},
		{"/v1/chat/completions", `{"a":"\u12"}`, `request body at byte 10: invalid JSON: invalid \u escape in a string, expecting 4 hexadecimal digits`},
		{"/v1/chat/completions", `{"a":1`, `request body at byte 6: invalid JSON: unexpected end of input, expecting ',' or '}' after an object member`},
		{"/v1/chat/completions", `{"a" 1}`, `request body at byte 5: invalid JSON: unexpected '1', expecting ':' after an object key`},
		{"/v1/chat/completions", `{"a":"x`, `request body at byte 7: invalid JSON: unexpected end of input in a string`},
		{"/v1/chat/completions", deep, `request body at byte 512: invalid JSON: nesting deeper than 512 levels`},
		{"/v1/chat/completions", `"x"`, `request body at byte 0: must be a JSON object; got a string`},
		{"/v1/chat/completions", ` {"messages":[]}`, `request body: model: missing; name the model to call, e.g. "model":"gpt-4o-mini"`},
		{"/v1/chat/completions", `{"model":""}`, `request body: model at byte 9: must not be empty; name the model to call, e.g. "model":"gpt-4o-mini"`},
		{"/v1/chat/completions", `{"model":null}`, `request body: model at byte 9: must be a string; got null`},
		{"/v1/chat/completions", `{"model":"a","model":"b"}`, `request body: model at byte 13: duplicate key; send each field once`},
		{"/v1/chat/completions", `{"model":"a","stream":1}`, `request body: stream at byte 22: must be true or false; got a number`},
		{"/v1/chat/completions", `{"model":"a","stream_options":[]}`, `request body: stream_options at byte 30: must be an object; got an array`},
		{"/v1/chat/completions", `{"model":"a","stream_options":{"include_usage":true,"include_usage":false}}`, `request body: stream_options.include_usage at byte 52: duplicate key; send each field once`},
		{"/v1/chat/completions", `{"model":"a","max_completion_tokens":"10"}`, `request body: max_completion_tokens at byte 37: must be a non-negative integer; got a string`},
		{"/v1/chat/completions", `{"model":"a","max_tokens":1e400}`, `request body: max_tokens at byte 26: must be a non-negative integer; got 1e400`},
		{"/v1/chat/completions", `{"model":"a","messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, `request body: messages[0].content[0].text at byte 73: must be a string; got a number`},
		{"/v1/chat/completions", `{"model":"a","messages":[{"content":"x"},{"content":{}}]}`, `request body: messages[1].content at byte 52: must be a string, an array of content parts or null; got an object`},
		{"/v1/chat/completions", `{"model":"a","messages":[{"content":[7]}]}`, `request body: messages[0].content[0] at byte 37: must be a content part object; got a number`},
		{"/v1/chat/completions", `{"model":"a","messages":[{"tool_calls":[{"function":{"arguments":{}}}]}]}`, `request body: messages[0].tool_calls[0].function.arguments at byte 65: must be a string; got an object`},
		{"/v1/chat/completions", `{"model":"a","messages":[{"tool_calls":{}}]}`, `request body: messages[0].tool_calls at byte 39: must be an array of tool calls; got an object`},
		{"/v1/chat/completions", `{"model":"a","messages":[[]]}`, `request body: messages[0] at byte 25: must be a message object; got an array`},
		{"/v1/completions", `{"model":"a","prompt":[true]}`, `request body: prompt[0] at byte 23: must be a string, a token or an array of tokens; got a boolean`},
		{"/v1/completions", `{"model":"a","prompt":[[1,"x"]]}`, `request body: prompt[0][1] at byte 26: must be a token (an integer); got a string`},
		{"/v1/embeddings", `{"model":"a","input":5}`, `request body: input at byte 21: must be a string, an array of strings, an array of tokens or an array of token arrays; got a number`},
		{"/v1/responses", `{"model":"a","input":{}}`, `request body: input at byte 21: must be a string or an array of input items; got an object`},
		{"/v1/responses", `{"model":"a","input":["hi"]}`, `request body: input[0] at byte 22: must be an input item object; got a string`},
		{"/v1/responses", `{"model":"a","instructions":[]}`, `request body: instructions at byte 28: must be a string; got an array`},
		{"/v1/responses", `{"model":"a","input":[{"type":"function_call","arguments":{}}]}`, `request body: input[0].arguments at byte 58: must be a string; got an object`},
		{"/v1/messages", `{"model":"a","system":[{"type":"text","text":null},{"text":false}]}`, `request body: system[1].text at byte 59: must be a string; got a boolean`},
		{"/v1/messages", `{"model":"a","messages":[{"content":[{"type":"tool_result","content":5}]}]}`, `request body: messages[0].content[0].content at byte 69: must be a string, an array of content parts or null; got a number`},
	} {
		_, err := ParseRequest(tc.path, []byte(tc.body))
		if err == nil {
			t.Errorf("case %d: %s %q: no error, want %q", i, tc.path, tc.body, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("case %d: %s %q:\n got  %s\n want %s", i, tc.path, tc.body, err, tc.want)
		}
		var re *RequestError
		if !errors.As(err, &re) {
			t.Errorf("case %d: error is %T, want *RequestError", i, err)
		}
	}
}

func TestParseRequestUnknownEndpoint(t *testing.T) {
	_, err := ParseRequest("/v1/models", []byte(`{}`))
	want := `llm: path "/v1/models": not a governed LLM endpoint; expected a path ending in /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses or /v1/messages`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// TestParseRequestNullsAreAbsent checks optional fields given as null.
func TestParseRequestNullsAreAbsent(t *testing.T) {
	body := `{"model":"m","messages":null,"stream":null,"stream_options":null,"max_tokens":null,"max_completion_tokens":null}`
	req, err := ParseRequest("/v1/chat/completions", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	req.edits = bodyEdits{}
	if req != (Request{Endpoint: ChatCompletions, Model: "m", Choices: 1}) {
		t.Fatalf("got %+v", req)
	}
}

// TestParseRequestDoesNotAlias checks that the Request survives the body.
func TestParseRequestDoesNotAlias(t *testing.T) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[]}`)
	req, err := ParseRequest("/v1/chat/completions", body)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = 'x'
	}
	if req.Model != "gpt-4o-mini" {
		t.Fatalf("model changed with the body: %q", req.Model)
	}
}

// TestParseRequestGolden runs every testdata/requests/*.json through
// ParseRequest, Reserve and InjectIncludeUsage.
func TestParseRequestGolden(t *testing.T) {
	for _, fx := range fixtures(t, "requests", ".json") {
		file, body, path := fx.file, fx.body, fx.path
		var out strings.Builder
		fmt.Fprintf(&out, "POST %s\n", path)
		req, err := ParseRequest(path, body)
		if err != nil {
			fmt.Fprintf(&out, "error: %v\n", err)
		} else {
			fmt.Fprintf(&out, "model: %s\n", req.Model)
			if req.HasMaxTokens {
				fmt.Fprintf(&out, "max_tokens: %d\n", req.MaxTokens)
			} else {
				fmt.Fprintf(&out, "max_tokens: absent\n")
			}
			fmt.Fprintf(&out, "stream: %v\ninclude_usage: %v\nprompt_bytes: %d\nreserve: %d\n",
				req.Stream, req.IncludeUsage, req.PromptBytes, Reserve(req))
			if req.Endpoint == ChatCompletions || req.Endpoint == Completions {
				if nb, changed := InjectIncludeUsage(body); changed {
					fmt.Fprintf(&out, "include_usage injected:\n%s\n", nb)
				}
			}
		}
		checkGolden(t, file, &out)
	}
}

// TestParseRequestCostBounds: how many completions a call bills (n,
// best_of) and whether its input reaches beyond the body.
func TestParseRequestCostBounds(t *testing.T) {
	for _, c := range []struct {
		path, body string
		choices    int64
		remote     bool
	}{
		{"/v1/chat/completions", `{"model":"m","n":4}`, 4, false},
		{"/v1/chat/completions", `{"model":"m","n":"4"}`, 1, false},
		{"/v1/chat/completions", `{"model":"m","n":0}`, 1, false},
		{"/v1/completions", `{"model":"m","n":2,"best_of":5,"prompt":"x"}`, 5, false},
		{"/v1/messages", `{"model":"m","n":3}`, 1, false},
		{"/v1/responses", `{"model":"m","previous_response_id":"resp_1","input":"x"}`, 1, true},
		{"/v1/responses", `{"model":"m","previous_response_id":null,"input":"x"}`, 1, false},
		{"/v1/responses", `{"model":"m","prompt":{"id":"pmpt_1"}}`, 1, true},
		{"/v1/responses", `{"model":"m","input":"x","tools":[{"type":"function","name":"f"},{"type":"file_search"}]}`, 1, true},
		{"/v1/responses", `{"model":"m","input":"x","tools":[{"type":"function","name":"f"}]}`, 1, false},
	} {
		req, err := ParseRequest(c.path, []byte(c.body))
		if err != nil || req.Choices != c.choices || req.RemoteInput != c.remote {
			t.Errorf("%s %s: choices %d remote %v (%v), want %d %v", c.path, c.body, req.Choices, req.RemoteInput, err, c.choices, c.remote)
		}
	}
}

func TestUsageBound(t *testing.T) {
	for i, c := range []struct {
		req     Request
		model   string
		in, out int64
	}{
		{Request{Endpoint: ChatCompletions, MaxTokens: 16, HasMaxTokens: true, Choices: 1}, "gpt-4o-mini", 256_000, 16},
		{Request{Endpoint: ChatCompletions, MaxTokens: 16, HasMaxTokens: true, Choices: 3}, "openai/GPT-4o-2024-08-06", 256_000, 48},
		{Request{Endpoint: ChatCompletions, Choices: 2}, "gpt-4.1-mini", 2_095_152, 4_190_304},
		{Request{Endpoint: Messages, MaxTokens: 1024, HasMaxTokens: true}, "claude-sonnet-4-20250514", 2_000_000, 1024},
		{Request{Endpoint: Responses}, "my-finetune", MaxContextBound, MaxContextBound},
		{Request{Endpoint: Embeddings, PromptBytes: 40_000_000}, "text-embedding-3-small", 40_000_000, 0},
	} {
		in, out := UsageBound(c.req, c.model)
		if in != c.in || out != c.out {
			t.Errorf("step %d: %d, %d; want %d, %d", i, in, out, c.in, c.out)
		}
	}
}
