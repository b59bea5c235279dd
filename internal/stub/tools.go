package stub

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/shared/llm"
)

// What an answer is: text, a structured output (JSON text that conforms
// to the schema the request gave), or a call of one of the request's
// tools (arguments that conform to its parameters).
const (
	answerText = iota
	answerJSON
	answerTool
)

// shape is what a request asks its answer to be, decided from the request
// alone, so equal requests get equal answers:
//
//   - a tool is called when the request offers function tools, does not
//     say tool_choice none, and does not end with a tool's result (the
//     model has what it asked for and answers in text, as after one round
//     of a tool loop) unless tool_choice requires a call. The tool is the
//     one tool_choice names, else the first whose name the last message
//     mentions, else the first; its arguments are Example of its
//     parameters;
//   - else the answer is JSON when the request asks for it: OpenAI's
//     response_format json_schema or json_object, the Responses API's
//     text.format, Anthropic's output_format;
//   - else text, as before.
type shape struct {
	kind int
	name string // the tool called
	json []byte // the arguments, or the JSON answer
}

// shapeOf reads a request body's tools, tool choice and output format.
func shapeOf(ep llm.Endpoint, body []byte) shape {
	b := gjson.ParseBytes(body)
	var tools []tool
	var choice toolChoice
	var last gjson.Result
	lastIsResult := false
	var format gjson.Result
	switch ep {
	case llm.ChatCompletions:
		b.Get("tools").ForEach(func(_, t gjson.Result) bool {
			if t.Get("type").Str == "function" || !t.Get("type").Exists() {
				f := t.Get("function")
				tools = append(tools, tool{name: f.Get("name").Str, params: f.Get("parameters")})
			}
			return true
		})
		choice = openAIChoice(b.Get("tool_choice"), "function.name")
		msgs := b.Get("messages").Array()
		if len(msgs) > 0 {
			last = msgs[len(msgs)-1]
			r := last.Get("role").Str
			lastIsResult = r == "tool" || r == "function"
		}
		format = b.Get("response_format")
		if format.Get("type").Str == "json_schema" {
			format = gjsonObject("json_schema", format.Get("json_schema.schema"))
		}
	case llm.Responses:
		b.Get("tools").ForEach(func(_, t gjson.Result) bool {
			if t.Get("type").Str == "function" {
				tools = append(tools, tool{name: t.Get("name").Str, params: t.Get("parameters")})
			}
			return true
		})
		choice = openAIChoice(b.Get("tool_choice"), "name")
		if in := b.Get("input"); in.IsArray() {
			items := in.Array()
			if len(items) > 0 {
				last = items[len(items)-1]
				lastIsResult = last.Get("type").Str == "function_call_output"
			}
		} else {
			last = in
		}
		format = b.Get("text.format")
		if format.Get("type").Str == "json_schema" {
			format = gjsonObject("json_schema", format.Get("schema"))
		}
	case llm.Messages:
		b.Get("tools").ForEach(func(_, t gjson.Result) bool {
			if typ := t.Get("type").Str; typ == "" || typ == "custom" {
				tools = append(tools, tool{name: t.Get("name").Str, params: t.Get("input_schema")})
			}
			return true
		})
		switch c := b.Get("tool_choice"); c.Get("type").Str {
		case "none":
			choice = toolChoice{none: true}
		case "any":
			choice = toolChoice{required: true}
		case "tool":
			choice = toolChoice{required: true, name: c.Get("name").Str}
		}
		msgs := b.Get("messages").Array()
		if len(msgs) > 0 {
			last = msgs[len(msgs)-1]
			last.Get("content").ForEach(func(_, blk gjson.Result) bool {
				if blk.Get("type").Str == "tool_result" {
					lastIsResult = true
				}
				return !lastIsResult
			})
		}
		format = b.Get("output_format")
		if format.Get("type").Str == "json_schema" {
			format = gjsonObject("json_schema", format.Get("schema"))
		}
	}
	if len(tools) > 0 && !choice.none && (choice.required || !lastIsResult) {
		t := pickTool(tools, choice.name, last.Raw)
		return shape{kind: answerTool, name: t.name, json: Example([]byte(t.params.Raw))}
	}
	switch format.Get("type").Str {
	case "json_schema":
		return shape{kind: answerJSON, json: Example([]byte(format.Get("schema").Raw))}
	case "json_object":
		return shape{kind: answerJSON, json: []byte(`{"answer":"stub"}`)}
	}
	return shape{}
}

type tool struct {
	name   string
	params gjson.Result
}

type toolChoice struct {
	none, required bool
	name           string // a forced tool
}

// openAIChoice reads OpenAI's tool_choice: "none", "auto", "required", or
// an object naming a function (at path within it).
func openAIChoice(c gjson.Result, path string) toolChoice {
	switch {
	case c.Str == "none":
		return toolChoice{none: true}
	case c.Str == "required":
		return toolChoice{required: true}
	case c.IsObject():
		if name := c.Get(path).Str; name != "" {
			return toolChoice{required: true, name: name}
		}
		if name := c.Get("name").Str; name != "" {
			return toolChoice{required: true, name: name}
		}
	}
	return toolChoice{}
}

// pickTool is the tool named, else the first the last message mentions,
// else the first.
func pickTool(tools []tool, name, last string) tool {
	for _, t := range tools {
		if name != "" && t.name == name {
			return t
		}
	}
	for _, t := range tools {
		if t.name != "" && strings.Contains(last, t.name) {
			return t
		}
	}
	return tools[0]
}

// gjsonObject is {"type":typ,"schema":schema} as a gjson value.
func gjsonObject(typ string, schema gjson.Result) gjson.Result {
	raw := schema.Raw
	if raw == "" {
		raw = "{}"
	}
	return gjson.Parse(`{"type":"` + typ + `","schema":` + raw + `}`)
}
