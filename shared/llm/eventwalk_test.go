package llm

import (
	"bytes"
	"math/rand"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// scannerState is everything an event can change in a scanner.
type scannerState struct {
	openai     counts
	haveOpenAI bool
	anthropic  counts
	model      string
	textBytes  int64
	stripped   int
}

func stateOf(s *StreamScanner) scannerState {
	return scannerState{s.openai, s.haveOpenAI, s.anthropic, s.model, s.textBytes, s.stripped}
}

// compareEvent runs data through the fast path and the gjson path of two
// scanners in the same state and reports whether the fast path took it.
func compareEvent(t testing.TB, path string, data []byte, model string) bool {
	t.Helper()
	fast, slow := NewStreamScanner(path, true), NewStreamScanner(path, true)
	fast.model, slow.model = model, model
	fast.textBytes, slow.textBytes = 7, 7
	var took, fastStrip, slowStrip bool
	switch fast.ep {
	case ChatCompletions, Completions:
		fastStrip, took = fast.fastOpenAIChunk(data, data, -1)
		slowStrip = slow.openAIChunk(data)
	case Responses:
		took = fast.fastResponsesEvent(data, data, -1)
		slow.responsesEvent(data)
	case Messages:
		took = fast.fastAnthropicEvent(data, data, -1)
		slow.anthropicEvent(data)
	}
	if !took {
		return false
	}
	if off, cause := checkSyntax(data); off >= 0 {
		t.Fatalf("%s: the fast path took invalid JSON %q (%s at %d)", path, data, cause, off)
	}
	if fastStrip != slowStrip || stateOf(fast) != stateOf(slow) {
		t.Fatalf("%s %q (model %q):\nfast strip=%v %+v\ngjson strip=%v %+v", path, data, model, fastStrip, stateOf(fast), slowStrip, stateOf(slow))
	}
	return true
}

// eventData splits an SSE stream into each event's joined data.
func eventData(in []byte) [][]byte {
	var out [][]byte
	for _, ev := range bytes.Split(bytes.ReplaceAll(in, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		var data [][]byte
		for _, line := range bytes.Split(ev, []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(v, []byte(" ")))
			}
		}
		if len(data) > 0 {
			out = append(out, bytes.Join(data, []byte("\n")))
		}
	}
	return out
}

// TestEventWalkMatchesGJSON holds the fast path to the gjson path on every
// event of the fixtures (which it must all take) and on generated events
// full of duplicates, escapes, odd shapes and broken syntax.
func TestEventWalkMatchesGJSON(t *testing.T) {
	for _, fx := range fixtures(t, "streams", ".sse") {
		file, in, path := fx.file, fx.body, fx.path
		for _, data := range eventData(in) {
			for _, model := range []string{"", "set"} {
				if !compareEvent(t, path, data, model) && data[0] == '{' {
					t.Errorf("%s: the fast path left %q to gjson", file, data)
				}
			}
		}
	}
	rng := rand.New(rand.NewSource(5))
	paths := []string{"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"}
	took := 0
	const n = 40000
	for k := 0; k < n; k++ {
		path := paths[rng.Intn(len(paths))]
		data := []byte(genEvent(rng, path))
		if rng.Intn(8) == 0 && len(data) > 0 { // break it somewhere
			data[rng.Intn(len(data))] = `"{}[],:\ x1`[rng.Intn(11)]
		}
		for _, model := range []string{"", "set"} {
			if compareEvent(t, path, data, model) {
				took++
			}
		}
	}
	if took < n/2 {
		t.Fatalf("the fast path took only %d of %d generated events; the generator misses it", took, 2*n)
	}
}

// genEvent builds a random event object from the members the scanner reads
// and their near misses: mostly the shapes providers send, with members
// repeated, reordered, misspelt with escapes or given the wrong type.
func genEvent(rng *rand.Rand, path string) string {
	level := map[string]string{"/v1/chat/completions": "chat", "/v1/completions": "chat", "/v1/responses": "responses", "/v1/messages": "messages"}[path]
	if rng.Intn(10) == 0 {
		level = []string{"chat", "responses", "messages"}[rng.Intn(3)]
	}
	var b strings.Builder
	genObject(rng, &b, level, 0)
	return b.String()
}

// genShapes: per level, its keys and the level (or value kind) each key's
// value usually has: "str", "type", "num" or another level; "[x]" is an
// array of x.
var genShapes = map[string]map[string]string{
	"chat":      {"model": "str", "choices": "[choice]", "usage": "usage", "id": "str"},
	"choice":    {"index": "num", "delta": "delta", "text": "str", "finish_reason": "str"},
	"delta":     {"content": "str", "refusal": "str", "tool_calls": "[call]", "role": "str"},
	"call":      {"index": "num", "id": "str", "function": "function", "type": "str"},
	"function":  {"name": "str", "arguments": "str"},
	"usage":     {"prompt_tokens": "num", "completion_tokens": "num", "total_tokens": "num", "input_tokens": "num", "output_tokens": "num", "prompt_tokens_details": "details", "input_tokens_details": "details", "completion_tokens_details": "details", "cache_read_input_tokens": "num", "cache_creation_input_tokens": "num"},
	"details":   {"cached_tokens": "num", "reasoning_tokens": "num"},
	"responses": {"type": "type", "delta": "str", "response": "response", "item_id": "str"},
	"response":  {"model": "str", "usage": "usage", "status": "str", "output": "[choice]"},
	"messages":  {"type": "type", "message": "message", "delta": "mdelta", "usage": "usage", "index": "num"},
	"message":   {"model": "str", "usage": "usage", "id": "str", "content": "[mdelta]"},
	"mdelta":    {"type": "type", "text": "str", "partial_json": "str", "thinking": "str", "stop_reason": "str"},
}

var (
	genKeys = []string{
		"model", "choices", "usage", "delta", "content", "refusal", "tool_calls", "function", "arguments",
		"text", "type", "response", "message", "partial_json", "thinking", "index",
		"prompt_tokens", "total_tokens", "output_tokens", "cached_tokens",
		`mod\u0065l`, `t\u0065xt`, `x\"y`, `us\u0061ge`,
	}
	genStrings = []string{
		`""`, `"gpt-4o"`, `"a\nb"`, `"\u00e9t\u00e9"`, `"\ud83d\ude00"`, `"\ud800x"`, `"g\u0070t"`,
		`"{\"function\":{\"arguments\":\"z\"}}"`, `"[x]"`, `"abc"`,
	}
	genTypes = []string{
		`"message_start"`, `"message_delta"`, `"content_block_delta"`, `"response.output_text.delta"`,
		`"response.completed"`, `"response.refusal.delta"`, `"response.function_call_arguments.delta"`,
		`"message_st\u0061rt"`, `"ping"`,
	}
	genNumbers = []string{`0`, `5`, `17`, `-3`, `1.5e3`, `12345678901234567890`, `1e400`, `2.5`}
	genOthers  = []string{`true`, `false`, `null`}
	genSpace   = []string{"", "", "", " ", "\n", "\t ", "\r\n"}
)

func genObject(rng *rand.Rand, b *strings.Builder, level string, depth int) {
	shape := genShapes[level]
	var keys []string
	for k := range shape {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("{")
	for k, n := 0, rng.Intn(6); k < n; k++ {
		if k > 0 {
			b.WriteString(",")
		}
		key, kind := genKeys[rng.Intn(len(genKeys))], ""
		if len(keys) > 0 && rng.Intn(10) < 8 {
			key = keys[rng.Intn(len(keys))]
			kind = shape[key]
		}
		b.WriteString(genSpace[rng.Intn(len(genSpace))] + `"` + key + `"` + genSpace[rng.Intn(len(genSpace))] + ":")
		if rng.Intn(10) < 2 {
			kind = ""
		}
		genValue(rng, b, kind, depth+1)
	}
	b.WriteString(genSpace[rng.Intn(len(genSpace))] + "}")
}

func genValue(rng *rand.Rand, b *strings.Builder, kind string, depth int) {
	b.WriteString(genSpace[rng.Intn(len(genSpace))])
	if depth > 7 {
		kind = "num"
	}
	switch {
	case kind == "str":
		b.WriteString(genStrings[rng.Intn(len(genStrings))])
	case kind == "type":
		b.WriteString(genTypes[rng.Intn(len(genTypes))])
	case kind == "num":
		b.WriteString(genNumbers[rng.Intn(len(genNumbers))])
	case strings.HasPrefix(kind, "["):
		elem := strings.Trim(kind, "[]")
		b.WriteString("[")
		for k, n := 0, rng.Intn(4); k < n; k++ {
			if k > 0 {
				b.WriteString(",")
			}
			if rng.Intn(10) < 8 {
				genValue(rng, b, elem, depth+1)
			} else {
				genValue(rng, b, "", depth+1)
			}
		}
		b.WriteString("]")
	case kind != "":
		genObject(rng, b, kind, depth)
	default: // anything
		all := []string{"str", "type", "num", "[call]", "[str]", "choice", "delta", "function", "usage", "call", "mdelta"}
		if r := rng.Intn(14); r < len(all) {
			genValue(rng, b, all[r], depth)
		} else {
			b.WriteString(genOthers[rng.Intn(len(genOthers))])
		}
	}
	b.WriteString(genSpace[rng.Intn(len(genSpace))])
}

// FuzzEventWalk: on any event the fast path takes, it agrees with gjson.
func FuzzEventWalk(f *testing.F) {
	addFiles(f, "testdata/streams/*.sse", func(b []byte) {
		for _, data := range eventData(b) {
			for sel := uint8(0); sel < 4; sel++ {
				f.Add(data, sel)
			}
		}
	})
	paths := []string{"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"}
	f.Fuzz(func(t *testing.T, data []byte, sel uint8) {
		compareEvent(t, paths[int(sel)%len(paths)], data, "")
	})
}

// TestEventShapeMatchesGJSON feeds runs of events of one shape (a
// generated event, then variants with other strings and numbers, some
// broken) through one scanner's fast path and another's gjson path,
// comparing the scanners after every event: an event that matches the
// shape of the one before must read as gjson reads it.
func TestEventShapeMatchesGJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	paths := []string{"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"}
	strRE := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	numRE := regexp.MustCompile(`-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?`)
	values := []string{`""`, `"x"`, `"a much longer value than before"`, `"\n"`, `"t\u00e9\"xt"`, `"\ud83d\ude00"`, `"bad` + "\x01" + `"`, `"\q"`, `"message_delta"`, `"response.output_text.delta"`}
	numbers := []string{`0`, `7`, `-12`, `3.25`, `1e5`, `01`, `1.`, `-`}
	hits := 0
	for n := 0; n < 4000; n++ {
		path := paths[rng.Intn(len(paths))]
		// An event is framed as one data line, so its whitespace holds
		// no line end.
		base := strings.NewReplacer("\r\n", " ", "\n", " ").Replace(genEvent(rng, path))
		fast, slow := NewStreamScanner(path, true), NewStreamScanner(path, true)
		slow.gjsonOnly = true
		for v := 0; v < 8; v++ {
			ev := base
			if v > 0 {
				ev = strRE.ReplaceAllStringFunc(base, func(m string) string {
					if rng.Intn(3) == 0 {
						return values[rng.Intn(len(values))]
					}
					return m
				})
				ev = numRE.ReplaceAllStringFunc(ev, func(m string) string {
					if rng.Intn(3) == 0 {
						return numbers[rng.Intn(len(numbers))]
					}
					return m
				})
				if rng.Intn(10) == 0 && len(ev) > 0 {
					b := []byte(ev)
					b[rng.Intn(len(b))] = `"{}[],:\ x1`[rng.Intn(11)]
					ev = string(b)
				}
			}
			framed := []byte("data: " + ev + "\n\n")
			var probe eventFacts
			if n, ok := fast.shape.match(framed, &probe); ok && n == len(framed) {
				hits++
			}
			fastStrip, slowStrip := fast.event(framed), slow.event(framed)
			if fastStrip != slowStrip || stateOf(fast) != stateOf(slow) {
				t.Fatalf("%s event %d of a run %q:\nfast strip=%v %+v\ngjson strip=%v %+v", path, v, ev, fastStrip, stateOf(fast), slowStrip, stateOf(slow))
			}
		}
	}
	if hits < 4000 {
		t.Fatalf("only %d events matched the shape before them; the variants miss the case", hits)
	}
}

// TestEventShapeCases: events that match the shape of the event before
// them, or nearly, where a careless match would read them differently
// from gjson.
func TestEventShapeCases(t *testing.T) {
	for i, tc := range []struct {
		path       string
		base, next string
		hit        bool // next has base's shape
	}{
		// A usage-only chunk is stripped only when it is valid JSON.
		{"/v1/chat/completions", `{"id":"a","choices":[],"usage":{"total_tokens":3}}`, `{"id":"b` + "\x01" + `","choices":[],"usage":{"total_tokens":3}}`, false},
		{"/v1/chat/completions", `{"id":"a","choices":[],"usage":{"total_tokens":3}}`, `{"id":"b` + "\x01" + `n","choices":[],"usage":{"total_tokens":3}}`, false},
		{"/v1/chat/completions", `{"id":"a","choices":[],"usage":{"total_tokens":3}}`, `{"id":"b\u00e9","choices":[],"usage":{"total_tokens":3}}`, true},
		{"/v1/chat/completions", `{"id":"a","choices":[],"usage":{"total_tokens":3}}`, `{"id":"b\x","choices":[],"usage":{"total_tokens":3}}`, false},
		{"/v1/chat/completions", `{"n":1,"choices":[],"usage":{"total_tokens":3}}`, `{"n":-,"choices":[],"usage":{"total_tokens":3}}`, false},
		{"/v1/chat/completions", `{"n":1,"choices":[],"usage":{"total_tokens":3}}`, `{"n":01,"choices":[],"usage":{"total_tokens":3}}`, false},
		{"/v1/chat/completions", `{"n":1,"choices":[],"usage":{"total_tokens":3}}`, `{"n":1e5,"choices":[],"usage":{"total_tokens":3}}`, true},
		// Usage counts are read, never holes.
		{"/v1/chat/completions", `{"choices":[],"usage":{"total_tokens":3}}`, `{"choices":[],"usage":{"total_tokens":4}}`, false},
		{"/v1/messages", `{"type":"message_delta","usage":{"output_tokens":3}}`, `{"type":"message_delta","usage":{"output_tokens":9}}`, false},
		// Only the last Anthropic delta counts.
		{"/v1/messages", `{"type":"content_block_delta","delta":{"text":"ab"},"delta":{"text":"c"}}`, `{"type":"content_block_delta","delta":{"text":"abcdef"},"delta":{"text":"c"}}`, true},
		{"/v1/messages", `{"type":"content_block_delta","delta":{"text":"ab"},"delta":"x"}`, `{"type":"content_block_delta","delta":{"text":"abcdef"},"delta":"xyz"}`, false},
		// Only a call's first arguments count.
		{"/v1/chat/completions", `{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"a","arguments":"bb"}}]}}]}`, `{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"xyz","arguments":"bbbbbb"}}]}}]}`, true},
		{"/v1/chat/completions", `{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f"},"function":{"arguments":"a"}}]}}]}`, `{"choices":[{"delta":{"tool_calls":[{"function":{"name":"ff"},"function":{"arguments":"abc"}}]}}]}`, true},
		// The responses delta counts by the event type, which is read.
		{"/v1/responses", `{"type":"response.output_text.delta","delta":"ab","sequence_number":1}`, `{"type":"response.output_text.delta","delta":"a\"b\n","sequence_number":2}`, true},
		{"/v1/responses", `{"type":"response.output_text.delta","delta":"ab"}`, `{"type":"response.output_text.done","delta":"ab"}`, false},
		{"/v1/responses", `{"type":"response.output_text.delta","delta":"ab","delta":7}`, `{"type":"response.output_text.delta","delta":"abc","delta":8}`, false},
		{"/v1/responses", `{"type":"response.output_text.delta","delta":"ab","delta":"c","n":7}`, `{"type":"response.output_text.delta","delta":"abcd","delta":"cde","n":8}`, true},
		{"/v1/responses", `{"type":"response.output_text.delta","delta":"ab","sequence_number":1}`, `{"type":"response.output_text.delta","delta":"ab","sequence_number":2}`, true},
		{"/v1/responses", `{"type":"response.output_text.delta","item_id":"i","delta":"ab","n":1}`, `{"type":"response.output_text.delta","item_id":"j","delta":"ab","n":1}`, true},
		// A model is read, not a hole; nor is a key.
		{"/v1/chat/completions", `{"model":"gpt","id":"a"}`, `{"mxdel":"gpt","id":"b"}`, false},
		{"/v1/chat/completions", `{"model":"a","choices":[]}`, `{"model":"b","choices":[]}`, false},
		// Structure and keys are part of the shape.
		{"/v1/chat/completions", `{"id":"a","choices":[{"delta":{"content":"x"}}]}`, `{"id":"a","choices":[{"delta":{"content":"x"}}],"x":1}`, false},
		{"/v1/chat/completions", `{"id":"a","choices":[{"delta":{"content":"x"}}]}`, `{"id":"a","choices":[{"delta":{"refusal":"x"}}]}`, false},
		{"/v1/chat/completions", `{"id":"a","choices":[{"delta":{"content":"x"}}]}`, `{"id":"a","choices":[{"delta":{"content":"x"}}]} `, false},
		{"/v1/chat/completions", `{"id":"a","choices":[{"delta":{"content":"x"}}]}`, `{"id":"a","choices":[{"delta":{"content":"x"}}]`, false},
	} {
		fast, slow := NewStreamScanner(tc.path, true), NewStreamScanner(tc.path, true)
		slow.gjsonOnly = true
		for k, ev := range []string{tc.base, tc.next} {
			framed := []byte("data: " + ev + "\n\n")
			var probe eventFacts
			if n, ok := fast.shape.match(framed, &probe); k == 1 && (ok && n == len(framed)) != tc.hit {
				t.Errorf("case %d: %q matched the shape of %q: %v, want %v", i, tc.next, tc.base, !tc.hit, tc.hit)
			}
			fastStrip, slowStrip := fast.event(framed), slow.event(framed)
			if fastStrip != slowStrip || stateOf(fast) != stateOf(slow) {
				t.Errorf("case %d event %d %q:\nfast strip=%v %+v\ngjson strip=%v %+v", i, k, ev, fastStrip, stateOf(fast), slowStrip, stateOf(slow))
			}
		}
	}
}
