package llm

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// compareRequest reads body both ways and fails when the one-pass scanner
// took it and read it otherwise than the gjson reading. It reports whether
// the scanner took it.
func compareRequest(t testing.TB, ep Endpoint, body []byte) bool {
	t.Helper()
	// The members read with the body are what Fields reads of it.
	if req, got, err := parseRequestFields(ep, body, fieldPaths, nil); err == nil {
		if ref, _ := parseRequest(ep, body); req != ref {
			t.Fatalf("%s %q: read with its fields %+v, without %+v", ep, body, req, ref)
		}
		want := Fields(body, fieldPaths, nil)
		for i := range want {
			if g, w := got[i], want[i]; g.Type != w.Type || g.Raw != w.Raw || g.Str != w.Str || g.Num != w.Num {
				t.Fatalf("%s %q: %s read with the body %+v, by Fields %+v", ep, body, fieldPaths[i], g, w)
			}
		}
	}
	fast := Request{Endpoint: ep, Choices: 1}
	if !scanRequest(ep, body, &fast, nil) {
		return false
	}
	if !gjson.ValidBytes(body) {
		t.Fatalf("%s: the scanner took invalid JSON %q", ep, body)
	}
	ref, err := parseRequestGJSON(ep, body)
	if err != nil {
		t.Fatalf("%s %q: the scanner read %+v where the gjson reading refuses: %v", ep, body, fast, err)
	}
	// The model the one pass noted is where the body's reading finds it.
	if at := modelSpan(body); fast.edits.model != at {
		t.Fatalf("%s %q: model noted at %v, read at %v", ep, body, fast.edits.model, at)
	}
	fast.edits = bodyEdits{}
	if fast != ref {
		t.Fatalf("%s %q:\nscanner %+v\ngjson   %+v", ep, body, fast, ref)
	}
	// The rewrites splice at the noted offsets exactly what the reading
	// rewrites find.
	for _, n := range []int64{0, 7, 123456} {
		r := Request{Endpoint: ep, Choices: 1}
		scanRequest(ep, body, &r, nil)
		got, gotChanged := r.SetOutputMax(body, n)
		want, wantChanged := SetOutputMax(ep, body, n)
		if gotChanged != wantChanged || !bytes.Equal(got, want) {
			t.Fatalf("%s %q: SetOutputMax(%d) spliced %q (%v), want %q (%v)", ep, body, n, got, gotChanged, want, wantChanged)
		}
		if ep != ChatCompletions && ep != Completions {
			continue
		}
		if wantChanged {
			if again, err := parseRequestGJSON(ep, want); err == nil {
				r.Stream, r.IncludeUsage = again.Stream, again.IncludeUsage
			}
		}
		got2, gotChanged2 := r.InjectIncludeUsage(got)
		want2, wantChanged2 := InjectIncludeUsage(want)
		if gotChanged2 != wantChanged2 || !bytes.Equal(got2, want2) {
			t.Fatalf("%s %q then max %d: InjectIncludeUsage spliced %q (%v), want %q (%v)", ep, want, n, got2, gotChanged2, want2, wantChanged2)
		}
	}
	// SetModel splices the model where the body's reading finds it, on
	// the body as parsed and after the other rewrites moved it.
	for _, rewrite := range []bool{false, true} {
		r := Request{Endpoint: ep, Choices: 1}
		scanRequest(ep, body, &r, nil)
		b := body
		if rewrite {
			if ep == ChatCompletions || ep == Completions {
				b, _ = r.InjectIncludeUsage(b)
			}
			b, _ = r.SetOutputMax(b, 7)
		}
		var plain Request // no noted offsets: SetModel reads the body
		want, wantOK := plain.SetModel(b, `gpt-"é"`)
		got, gotOK := r.SetModel(b, `gpt-"é"`)
		if gotOK != wantOK || !bytes.Equal(got, want) {
			t.Fatalf("%s %q: SetModel spliced %q (%v), want %q (%v)", ep, b, got, gotOK, want, wantOK)
		}
		if again, ok := r.SetOutputMax(got, 5); ok {
			if want2, _ := SetOutputMax(ep, got, 5); !bytes.Equal(again, want2) {
				t.Fatalf("%s %q: SetOutputMax after SetModel spliced %q, want %q", ep, got, again, want2)
			}
		}
	}
	r := Request{Endpoint: ep, Choices: 1}
	scanRequest(ep, body, &r, nil)
	if ep == ChatCompletions || ep == Completions {
		got, gotChanged := r.InjectIncludeUsage(body)
		want, wantChanged := InjectIncludeUsage(body)
		if gotChanged != wantChanged || !bytes.Equal(got, want) {
			t.Fatalf("%s %q: InjectIncludeUsage spliced %q (%v), want %q (%v)", ep, body, got, gotChanged, want, wantChanged)
		}
	}
	return true
}

// fieldPaths are body fields compareRequest reads with the body, of
// every kind: members and nested members the generated bodies hold or
// lack, governed ones among them.
var fieldPaths = []string{"user", "metadata.user_id", "metadata", "model", "stream", "stream_options.include_usage", "messages", "n", "max_tokens", "input", "x", "user.id"}

var endpoints = []Endpoint{ChatCompletions, Completions, Embeddings, Responses, Messages}

// TestScanRequestMatchesGJSON holds the one-pass scanner to the gjson
// reading on generated bodies: the governed members in every type, null
// and repeated, nested parts and tool calls, escapes, whitespace.
func TestScanRequestMatchesGJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	took, valid := 0, 0
	const n = 30000
	for k := 0; k < n; k++ {
		ep := endpoints[rng.Intn(len(endpoints))]
		body := []byte(randomRequest(rng, ep))
		if k%3 == 2 { // a mutation
			i := rng.Intn(len(body))
			const junk = `{}[]:,"\ 0an`
			body[i] = junk[rng.Intn(len(junk))]
		}
		if compareRequest(t, ep, body) {
			took++
		}
		if _, err := parseRequestGJSON(ep, body); err == nil {
			valid++
		}
	}
	// What the scanner leaves is escaped keys (1 in 25) and a few repeats.
	if valid < n/10 || took < valid*3/4 {
		t.Fatalf("the scanner took %d of the %d bodies the gjson reading accepts (of %d); the generator misses the common case", took, valid, n)
	}
}

// TestScanRequestTakesTypicalBodies: every golden body that parses is read
// in one pass, bar those that spell a key with escapes.
func TestScanRequestTakesTypicalBodies(t *testing.T) {
	for _, fx := range fixtures(t, "requests", ".json") {
		file, body, ep := fx.file, fx.body, EndpointOf(fx.path)
		if _, err := parseRequestGJSON(ep, body); err != nil {
			continue
		}
		if !compareRequest(t, ep, body) && !strings.Contains(string(body), `\u`) {
			t.Errorf("%s: left to the gjson reading", file)
		}
	}
	if !compareRequest(t, ChatCompletions, typicalChat) {
		t.Error("the typical chat body was left to the gjson reading")
	}
}

// FuzzScanRequest: the scanner never panics, and what it takes it reads
// and rewrites as the gjson reading does.
func FuzzScanRequest(f *testing.F) {
	addFiles(f, "testdata/requests/*.json", func(b []byte) { f.Add(b, uint8(0)) })
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 50; i++ {
		f.Add([]byte(randomRequest(rng, endpoints[i%5])), uint8(i%5))
	}
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		compareRequest(t, endpoints[int(sel)%len(endpoints)], body)
	})
}

// randomRequest writes a request body for ep: mostly what SDKs send, with
// members of the wrong type, nulls, repeats, escapes and deep shapes mixed
// in.
func randomRequest(rng *rand.Rand, ep Endpoint) string {
	g := reqGen{rng: rng}
	var members []string
	add := func(key, value string) {
		members = append(members, g.key(key)+g.ws()+":"+g.ws()+value)
	}
	if rng.Intn(12) > 0 {
		add("model", g.pick(`"gpt-4o-mini"`, `"claude-sonnet-4-5"`, `""`, `42`, `"m\u00e9"`, `null`, `["x"]`))
	}
	if rng.Intn(3) == 0 {
		add("stream", g.pick(`true`, `false`, `null`, `"true"`, `1`))
	}
	if rng.Intn(3) == 0 {
		add("stream_options", g.pick(`null`, `{}`, `{"include_usage":true}`, `{"include_usage":false}`, `{"include_usage":null}`,
			`{"x":1,"include_usage":false}`, `{"include_usage":"yes"}`, `{"include_usage":true,"include_usage":false}`, `[]`, `true`))
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if rng.Intn(4) == 0 {
			add(k, g.pick(`256`, `0`, `null`, `12.5`, `-1`, `1e3`, `"256"`, `9007199254740993`, `1E400`))
		}
	}
	switch ep {
	case ChatCompletions, Messages:
		add("messages", g.messages())
		if ep == Messages && rng.Intn(2) == 0 {
			add("system", g.content(0))
		}
	case Completions, Embeddings:
		add(map[Endpoint]string{Completions: "prompt", Embeddings: "input"}[ep], g.prompt())
	case Responses:
		if rng.Intn(3) > 0 {
			add("input", g.pick(`"hello"`, g.items(), `null`, `5`))
		}
		if rng.Intn(3) == 0 {
			add("instructions", g.pick(`"be brief"`, `null`, `{}`))
		}
		if rng.Intn(4) == 0 {
			add(g.pick("previous_response_id", "conversation"), g.pick(`"resp_1"`, `""`, `null`, `{"id":"c"}`, `0`))
		}
		if rng.Intn(4) == 0 {
			add("prompt", g.pick(`{"id":"pmpt_1"}`, `"p"`, `[]`))
		}
		if rng.Intn(3) == 0 {
			add("tools", g.tools())
		}
	}
	for _, k := range []string{"n", "best_of"} {
		if rng.Intn(5) == 0 {
			add(k, g.pick(`1`, `3`, `0`, `2.5`, `"4"`, `1048577`, `null`))
		}
	}
	if rng.Intn(3) == 0 {
		add("temperature", g.pick(`0.7`, `{"a":[1,{"b":null}]}`, `"x"`))
	}
	if rng.Intn(10) == 0 { // a repeated governed key
		members = append(members, members[rng.Intn(len(members)+1)%max(len(members), 1)])
	}
	rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return g.ws() + "{" + g.ws() + strings.Join(members, ","+g.ws()) + g.ws() + "}" + g.ws()
}

type reqGen struct{ rng *rand.Rand }

func (g reqGen) pick(s ...string) string { return s[g.rng.Intn(len(s))] }

func (g reqGen) ws() string {
	if g.rng.Intn(4) > 0 {
		return ""
	}
	return g.pick(" ", "\n  ", "\t", "\r\n")
}

// key spells k, now and then with an escape.
func (g reqGen) key(k string) string {
	if g.rng.Intn(25) == 0 && len(k) > 1 {
		return `"` + k[:1] + `\u00` + "0123456789abcdef"[k[1]>>4:k[1]>>4+1] + "0123456789abcdef"[k[1]&15:k[1]&15+1] + k[2:] + `"`
	}
	return `"` + k + `"`
}

func (g reqGen) text() string {
	return g.pick(`"What is the capital of Germany?"`, `""`, `"line\nbreak \"quoted\" \u00e9 \ud83d\ude00"`, `"`+strings.Repeat("long text ", 20)+`"`, `"\ud800"`)
}

func (g reqGen) list(n int, elem func() string) string {
	var parts []string
	for i := g.rng.Intn(n + 1); i > 0; i-- {
		parts = append(parts, elem())
	}
	return "[" + g.ws() + strings.Join(parts, ","+g.ws()) + g.ws() + "]"
}

func (g reqGen) messages() string {
	if g.rng.Intn(15) == 0 {
		return g.pick(`null`, `{}`, `"hi"`)
	}
	return g.list(4, func() string {
		if g.rng.Intn(20) == 0 {
			return g.pick(`"user"`, `null`, `[]`)
		}
		var m []string
		m = append(m, `"role":"user"`)
		if g.rng.Intn(6) > 0 {
			m = append(m, g.key("content")+":"+g.content(0))
		}
		if g.rng.Intn(4) == 0 {
			m = append(m, g.key("tool_calls")+":"+g.toolCalls())
		}
		if g.rng.Intn(15) == 0 {
			m = append(m, `"content":`+g.text())
		}
		g.rng.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
		return "{" + strings.Join(m, ",") + "}"
	})
}

func (g reqGen) content(level int) string {
	switch g.rng.Intn(8) {
	case 0:
		return g.pick(`null`, `42`, `{"text":"x"}`, `true`)
	case 1, 2, 3:
		return g.text()
	}
	return g.list(3, func() string { return g.part(level) })
}

func (g reqGen) part(level int) string {
	if g.rng.Intn(20) == 0 {
		return g.pick(`"text"`, `null`, `[]`)
	}
	var m []string
	switch g.rng.Intn(5) {
	case 0:
		m = append(m, `"type":"tool_use"`, `"input":`+g.pick(`{"city":"Berlin","n":[1,2]}`, `[]`, `"s"`, `null`))
	case 1:
		if level < 2 {
			m = append(m, `"type":"tool_result"`, g.key("content")+":"+g.content(level+1))
		}
	case 2:
		m = append(m, `"type":"image_url"`, `"image_url":{"url":"data:..."}`)
	default:
		m = append(m, `"type":"text"`, g.key("text")+":"+g.pick(g.text(), g.text(), `null`, `7`, `["t"]`))
	}
	return "{" + strings.Join(m, ","+g.ws()) + "}"
}

func (g reqGen) toolCalls() string {
	if g.rng.Intn(10) == 0 {
		return g.pick(`null`, `{}`, `"x"`)
	}
	return g.list(3, func() string {
		if g.rng.Intn(15) == 0 {
			return g.pick(`"call"`, `[]`)
		}
		fn := g.pick(
			`{"name":"f","arguments":"{\"a\":1}"}`,
			`{"arguments":null}`,
			`{"arguments":5}`,
			`{"name":"f"}`,
			`{"arguments":"x","arguments":"yz"}`,
			`[{"arguments":"x"}]`,
			`"f"`,
		)
		m := []string{`"id":"call_1"`, `"type":"function"`, g.key("function") + ":" + fn}
		if g.rng.Intn(6) == 0 {
			m = append(m, `"function":{"arguments":"later"}`)
		}
		g.rng.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
		return "{" + strings.Join(m, ",") + "}"
	})
}

func (g reqGen) prompt() string {
	switch g.rng.Intn(6) {
	case 0:
		return g.pick(`null`, `{}`, `true`)
	case 1, 2:
		return g.text()
	}
	return g.list(4, func() string {
		switch g.rng.Intn(5) {
		case 0:
			return g.pick(`12`, `3.5`, `null`, `{}`)
		case 1:
			return g.list(5, func() string { return g.pick(`1`, `2`, `30000`, `"x"`) })
		}
		return g.text()
	})
}

func (g reqGen) items() string {
	return g.list(3, func() string {
		if g.rng.Intn(15) == 0 {
			return g.pick(`"item"`, `null`)
		}
		var m []string
		m = append(m, `"type":"message"`)
		switch g.rng.Intn(3) {
		case 0:
			m = append(m, g.key("content")+":"+g.content(0))
		case 1:
			m = append(m, `"output":`+g.content(0))
		default:
			m = append(m, g.key("arguments")+":"+g.pick(g.text(), `null`, `{}`))
		}
		return "{" + strings.Join(m, ",") + "}"
	})
}

func (g reqGen) tools() string {
	tool := func() string {
		return g.pick(`{"type":"function","name":"f"}`, `{"type":"file_search"}`, `{"name":"x","type":"web_search_preview"}`,
			`{"type":{"kind":"file"}}`, `{"type":null,"type":"file_search"}`, `{"type":"f\u0069le_search"}`, `"file_search"`, `[{"type":"file_search"}]`, `{"type":7}`)
	}
	if g.rng.Intn(5) == 0 {
		return "{" + `"a":` + tool() + `,"b":` + tool() + "}"
	}
	return g.list(3, tool)
}

// TestParseRequestFieldsInOnePass: the body fields gate 2 reads (a
// customer, tags) come out of the one pass that reads the request, equal
// to what Fields reads of the body, first occurrences, nested members,
// escapes and all.
func TestParseRequestFieldsInOnePass(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, body := range []string{
		`{"model":"m",` + msgs + `,"user":"alice"}`,
		`{"user":"a\u006cice","model":"m",` + msgs + `,"user":"bob"}`,
		`{"model":"m","metadata":{"user_id":"u-1","tags":["a","b"]},` + msgs + `}`,
		`{"model":"m","metadata":"flat",` + msgs + `,"metadata":{"user_id":"second"}}`,
		`{"model":"m","metadata":{"deep":{"x":[1,{"user_id":"no"}]},"user_id":7},` + msgs + `,"user":null}`,
		`{"model":"m",` + msgs + `,"safety_identifier":"s","user":{"id":"obj"}}`,
		`{"model":"m",` + msgs + `}`,
	} {
		if !compareRequest(t, ChatCompletions, []byte(body)) {
			t.Errorf("%s: not read in one pass", body)
		}
		fr := newFieldReader(fieldPaths, nil)
		r := Request{Endpoint: ChatCompletions, Choices: 1}
		scanRequest(ChatCompletions, []byte(body), &r, &fr)
		if strings.Contains(body, `"user":`) && fr.out[0].Raw == "" {
			t.Errorf("%s: the one pass read no user", body)
		}
	}
}
