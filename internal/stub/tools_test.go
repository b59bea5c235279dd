package stub

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/tidwall/gjson"
)

// conforms checks that value is valid under schema, with a JSON Schema
// validator of its own (draft 2020-12 unless the schema names another).
func conforms(t *testing.T, schema, value string) {
	t.Helper()
	s, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", s); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("compiling %s: %v", schema, err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(value))
	if err != nil {
		t.Fatalf("%s is not JSON: %v", value, err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s does not conform to %s:\n%v", value, schema, err)
	}
}

// schemas are shapes the SDKs send: zod (v3 through zod-to-json-schema,
// v4's toJSONSchema), pydantic, hand-written tool parameters.
var schemas = []string{
	`{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`,
	`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"recipe":{"type":"object","properties":{"name":{"type":"string"},"ingredients":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"amount":{"type":"string"}},"required":["name","amount"],"additionalProperties":false}},"steps":{"type":"array","items":{"type":"string"},"minItems":2}},"required":["name","ingredients","steps"],"additionalProperties":false}},"required":["recipe"],"additionalProperties":false}`,
	`{"type":"object","properties":{"age":{"type":"integer","minimum":18,"maximum":120},"score":{"type":"number","exclusiveMinimum":0,"maximum":1},"email":{"type":"string","format":"email"},"when":{"type":"string","format":"date-time"},"id":{"type":"string","format":"uuid"},"nick":{"type":["string","null"]},"code":{"type":"string","minLength":6,"maxLength":8},"tags":{"type":"array","items":{"type":"string"},"minItems":3,"maxItems":3},"ok":{"type":"boolean"},"kind":{"const":"person"},"steps":{"type":"integer","multipleOf":5,"minimum":7}},"required":["age","score","email","when","id","nick","code","tags","ok","kind","steps"]}`,
	`{"type":"object","properties":{"maybe":{"anyOf":[{"type":"null"},{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}]},"either":{"oneOf":[{"type":"string"},{"type":"number"}]}},"required":["maybe","either"]}`,
	`{"$defs":{"Node":{"type":"object","properties":{"label":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/Node"}}},"required":["label","children"]}},"$ref":"#/$defs/Node"}`,
	`{"definitions":{"Pet":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}},"type":"object","properties":{"pets":{"type":"array","items":{"$ref":"#/definitions/Pet"}}},"required":["pets"]}`,
	`{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"type":"object","properties":{"b":{"type":"integer"}},"required":["b"]}]}`,
	`{"type":"object","properties":{"tuple":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false,"minItems":2},"weird.key*":{"type":"string","default":"d"},"ünïcode":{"type":"string","enum":["naïve","b"]}},"required":["tuple","weird.key*","ünïcode"]}`,
	`{"type":"object","properties":{}}`,
	`{}`,
}

// TestExampleConforms: every example conforms to its schema, checked by a
// JSON Schema validator, and equal schemas give equal examples.
func TestExampleConforms(t *testing.T) {
	for _, s := range schemas {
		v := Example([]byte(s))
		conforms(t, s, string(v))
		if again := Example([]byte(s)); !bytes.Equal(again, v) {
			t.Errorf("%s: two examples %s and %s", s, v, again)
		}
	}
}

const weatherTool = `{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}`

// sseData returns the data lines of an SSE answer.
func sseData(t *testing.T, body []byte) []gjson.Result {
	t.Helper()
	var out []gjson.Result
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "[DONE]" {
			if !gjson.Valid(d) {
				t.Fatalf("an event that is not JSON: %s", d)
			}
			out = append(out, gjson.Parse(d))
		}
	}
	return out
}

// TestToolCalls: a request offering a tool is answered with a call of it
// in each provider's shape, JSON and streamed, its arguments conforming
// to the tool's parameters and the usage counting them; a request whose
// last message is the tool's result is answered in text; tool_choice
// none is text, a forced tool is called, a mentioned one is picked.
func TestToolCalls(t *testing.T) {
	s := New(Options{})
	chat := func(extra string) string {
		return `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":` + weatherTool + `}},{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}}}]` + extra + `}`
	}
	// Chat completions, JSON.
	w := do(t, s, "POST", "/v1/chat/completions", chat(""))
	r := gjson.Parse(w.Body.String())
	call := r.Get("choices.0.message.tool_calls.0")
	if w.Code != 200 || r.Get("choices.0.finish_reason").Str != "tool_calls" || call.Get("type").Str != "function" ||
		call.Get("function.name").Str != "get_weather" || !strings.HasPrefix(call.Get("id").Str, "call_") || r.Get("choices.0.message.content").Type != gjson.Null {
		t.Fatalf("chat tool call: %d %s", w.Code, w.Body)
	}
	args := call.Get("function.arguments").Str
	conforms(t, weatherTool, args)
	if got := r.Get("usage.completion_tokens").Int(); got != int64((len(args)+3)/4) {
		t.Errorf("completion_tokens %d for %d bytes of arguments", got, len(args))
	}
	if again := do(t, s, "POST", "/v1/chat/completions", chat("")); again.Body.String() != w.Body.String() {
		t.Errorf("the same request answered twice differently")
	}
	// Streamed: the arguments in pieces add up to the same.
	w = do(t, s, "POST", "/v1/chat/completions", chat(`,"stream":true,"stream_options":{"include_usage":true}`))
	var streamed strings.Builder
	var finish, name string
	for _, ev := range sseData(t, w.Body.Bytes()) {
		tc := ev.Get("choices.0.delta.tool_calls.0")
		if n := tc.Get("function.name").Str; n != "" {
			name = n
		}
		streamed.WriteString(tc.Get("function.arguments").Str)
		if f := ev.Get("choices.0.finish_reason").Str; f != "" {
			finish = f
		}
	}
	if name != "get_weather" || streamed.String() != args || finish != "tool_calls" {
		t.Errorf("streamed chat tool call: %s %q %s\n%s", name, streamed.String(), finish, w.Body)
	}
	// A mentioned tool, a forced one, none, and after the tool's result.
	for _, c := range []struct{ body, want string }{
		{strings.Replace(chat(""), "Weather in Paris?", "What does get_time say?", 1), "get_time"},
		{chat(`,"tool_choice":{"type":"function","function":{"name":"get_time"}}`), "get_time"},
		{chat(`,"tool_choice":"none"`), ""},
		{strings.Replace(chat(""), `{"role":"user","content":"Weather in Paris?"}`,
			`{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"21C"}`, 1), ""},
		{strings.Replace(chat(`,"tool_choice":"required"`), `{"role":"user","content":"Weather in Paris?"}`,
			`{"role":"user","content":"x"},{"role":"tool","tool_call_id":"call_1","content":"21C"}`, 1), "get_weather"},
	} {
		r := gjson.Parse(do(t, s, "POST", "/v1/chat/completions", c.body).Body.String())
		got := r.Get("choices.0.message.tool_calls.0.function.name").Str
		if got != c.want || (c.want == "" && r.Get("choices.0.message.content").Str == "") {
			t.Errorf("%s: called %q, want %q: %s", c.body, got, c.want, r.Raw)
		}
	}

	// The Responses API.
	resp := `{"model":"gpt-4o","input":"Weather in Paris?","tools":[{"type":"function","name":"get_weather","strict":true,"parameters":` + weatherTool + `}]`
	r = gjson.Parse(do(t, s, "POST", "/v1/responses", resp+`}`).Body.String())
	item := r.Get("output.0")
	if item.Get("type").Str != "function_call" || item.Get("name").Str != "get_weather" || !strings.HasPrefix(item.Get("call_id").Str, "call_") || r.Get("status").Str != "completed" {
		t.Fatalf("responses tool call: %s", r.Raw)
	}
	conforms(t, weatherTool, item.Get("arguments").Str)
	w = do(t, s, "POST", "/v1/responses", resp+`,"stream":true}`)
	streamed.Reset()
	var done, types []string
	for _, ev := range sseData(t, w.Body.Bytes()) {
		types = append(types, ev.Get("type").Str)
		switch ev.Get("type").Str {
		case "response.function_call_arguments.delta":
			streamed.WriteString(ev.Get("delta").Str)
		case "response.function_call_arguments.done":
			done = append(done, ev.Get("arguments").Str)
		}
	}
	if streamed.String() != item.Get("arguments").Str || len(done) != 1 || done[0] != streamed.String() || types[len(types)-1] != "response.completed" {
		t.Errorf("streamed responses tool call: %v %q %v", types, streamed.String(), done)
	}
	after := `{"model":"gpt-4o","input":[{"role":"user","content":"Weather?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"21C"}],"tools":[{"type":"function","name":"get_weather","parameters":` + weatherTool + `}]}`
	if r := gjson.Parse(do(t, s, "POST", "/v1/responses", after).Body.String()); r.Get("output.0.type").Str != "message" {
		t.Errorf("responses after the tool's output: %s", r.Raw)
	}

	// Anthropic.
	msg := `{"model":"claude-3-5-haiku-latest","max_tokens":1024,"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[{"name":"get_weather","description":"d","input_schema":` + weatherTool + `}]`
	r = gjson.Parse(do(t, s, "POST", "/v1/messages", msg+`}`).Body.String())
	use := r.Get("content.0")
	if r.Get("stop_reason").Str != "tool_use" || use.Get("type").Str != "tool_use" || use.Get("name").Str != "get_weather" || !strings.HasPrefix(use.Get("id").Str, "toolu_") {
		t.Fatalf("anthropic tool use: %s", r.Raw)
	}
	conforms(t, weatherTool, use.Get("input").Raw)
	w = do(t, s, "POST", "/v1/messages", msg+`,"stream":true}`)
	streamed.Reset()
	var stop string
	for _, ev := range sseData(t, w.Body.Bytes()) {
		switch ev.Get("type").Str {
		case "content_block_start":
			if ev.Get("content_block.type").Str != "tool_use" || ev.Get("content_block.name").Str != "get_weather" {
				t.Errorf("content_block_start %s", ev.Raw)
			}
		case "content_block_delta":
			streamed.WriteString(ev.Get("delta.partial_json").Str)
		case "message_delta":
			stop = ev.Get("delta.stop_reason").Str
		}
	}
	conforms(t, weatherTool, streamed.String())
	if stop != "tool_use" {
		t.Errorf("streamed stop_reason %q", stop)
	}
	forced := strings.Replace(msg, `"tools":`, `"tool_choice":{"type":"tool","name":"get_weather"},"tools":`, 1) + `}`
	forced = strings.Replace(forced, `{"role":"user","content":"Weather in Paris?"}`, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}`, 1)
	if r := gjson.Parse(do(t, s, "POST", "/v1/messages", forced).Body.String()); r.Get("content.0.type").Str != "tool_use" {
		t.Errorf("anthropic forced tool after a result: %s", r.Raw)
	}
	result := strings.Replace(msg, `{"role":"user","content":"Weather in Paris?"}`,
		`{"role":"user","content":"Weather?"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"get_weather","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"21C"}]}`, 1) + `}`
	if r := gjson.Parse(do(t, s, "POST", "/v1/messages", result).Body.String()); r.Get("content.0.type").Str != "text" || r.Get("stop_reason").Str != "end_turn" {
		t.Errorf("anthropic after the tool's result: %s", r.Raw)
	}
}

// TestStructuredOutput: a request asking for JSON of a schema gets JSON
// conforming to it as its text, in chat completions (response_format),
// the Responses API (text.format) and Anthropic (output_format), JSON and
// streamed; json_object gets a JSON object.
func TestStructuredOutput(t *testing.T) {
	s := New(Options{})
	schema := schemas[1]
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"A recipe"}],"response_format":{"type":"json_schema","json_schema":{"name":"recipe","strict":true,"schema":` + schema + `}}`
	r := gjson.Parse(do(t, s, "POST", "/v1/chat/completions", chat+`}`).Body.String())
	text := r.Get("choices.0.message.content").Str
	conforms(t, schema, text)
	if r.Get("choices.0.finish_reason").Str != "stop" {
		t.Errorf("finish_reason %s", r.Get("choices.0.finish_reason").Str)
	}
	var streamed strings.Builder
	for _, ev := range sseData(t, do(t, s, "POST", "/v1/chat/completions", chat+`,"stream":true}`).Body.Bytes()) {
		streamed.WriteString(ev.Get("choices.0.delta.content").Str)
	}
	if streamed.String() != text {
		t.Errorf("streamed JSON %q, want %q", streamed.String(), text)
	}
	obj := gjson.Parse(do(t, s, "POST", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"json"}],"response_format":{"type":"json_object"}}`).Body.String())
	if c := obj.Get("choices.0.message.content").Str; !gjson.Valid(c) || !gjson.Parse(c).IsObject() {
		t.Errorf("json_object answered %q", c)
	}
	resp := `{"model":"gpt-4o","input":"A recipe","text":{"format":{"type":"json_schema","name":"recipe","strict":true,"schema":` + schema + `}}}`
	r = gjson.Parse(do(t, s, "POST", "/v1/responses", resp).Body.String())
	conforms(t, schema, r.Get("output.0.content.0.text").Str)
	msg := `{"model":"claude-sonnet-4-20250514","max_tokens":4096,"messages":[{"role":"user","content":"A recipe"}],"output_format":{"type":"json_schema","schema":` + schema + `}}`
	r = gjson.Parse(do(t, s, "POST", "/v1/messages", msg).Body.String())
	conforms(t, schema, r.Get("content.0.text").Str)
	// An output maximum below the JSON cuts it, as a model would.
	cut := gjson.Parse(do(t, s, "POST", "/v1/chat/completions", chat+`,"max_tokens":3}`).Body.String())
	if cut.Get("choices.0.finish_reason").Str != "length" || len(cut.Get("choices.0.message.content").Str) != 12 || cut.Get("usage.completion_tokens").Int() != 3 {
		t.Errorf("cut JSON: %s", cut.Raw)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
}
