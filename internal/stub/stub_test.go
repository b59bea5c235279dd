package stub

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/llm"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

const seedBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What is the capital of Germany?"}]}`

// do sends one request straight to the handler.
func do(t testing.TB, s *Stub, method, path, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// checkGolden checks got against testdata/name.golden.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name+".golden"), got, *update)
}

// TestSeedArithmetic: the seed request is 31 prompt bytes, so 8 prompt
// tokens, and 20 completion tokens.
func TestSeedArithmetic(t *testing.T) {
	w := do(t, New(Options{}), "POST", "/v1/chat/completions", seedBody)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	u, model, ok := llm.ParseUsage("/v1/chat/completions", w.Body.Bytes())
	want := ledger.Usage{Input: 8, Output: 20, Total: 28}
	if !ok || u != want || model != "gpt-4o-mini" {
		t.Fatalf("usage %+v model %q ok %v; want %+v gpt-4o-mini", u, model, ok, want)
	}
	if got := gjson.Get(w.Body.String(), "choices.0.message.content").Str; got != Reply(20) || len(got) != 80 {
		t.Fatalf("content %q, want the 80-byte reply", got)
	}
}

// endpointCase is one request per endpoint used by the table tests.
var endpointCases = []struct {
	name, path, body string
}{
	{"chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is the capital of Germany?"}]}`},
	{"completions", "/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test"}`},
	{"embeddings", "/v1/embeddings", `{"model":"text-embedding-3-small","input":["The food was delicious.","The waiter was rude."]}`},
	{"responses", "/v1/responses", `{"model":"gpt-4.1","instructions":"Be brief.","input":"Tell me a bedtime story."}`},
	{"messages", "/v1/messages", `{"model":"claude-sonnet-4-20250514","max_tokens":1024,"system":"Be brief.","messages":[{"role":"user","content":"Hello, Claude"}]}`},
}

// TestEndpointsJSON checks each endpoint's JSON answer against its golden
// file and against the usage arithmetic, read back with shared/llm.
func TestEndpointsJSON(t *testing.T) {
	s := New(Options{})
	for _, tc := range endpointCases {
		w := do(t, s, "POST", tc.path, tc.body, HeaderCachedTokens, "2")
		if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: status %d %q: %s", tc.name, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
		if !gjson.ValidBytes(w.Body.Bytes()) {
			t.Fatalf("%s: invalid JSON %s", tc.name, w.Body)
		}
		checkGolden(t, tc.name, w.Body.Bytes())
		req, err := llm.ParseRequest(tc.path, []byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		u, model, ok := llm.ParseUsage(tc.path, w.Body.Bytes())
		prompt := max(1, llm.EstimateTokens(req.PromptBytes))
		out := int64(DefaultCompletionTokens)
		if tc.name == "embeddings" {
			out = 0
		}
		want := ledger.Usage{Input: prompt, Output: out, CachedInput: min(2, prompt), Total: prompt + out}
		if tc.name == "embeddings" {
			want.CachedInput = 0
		}
		if !ok || u != want || model != req.Model {
			t.Errorf("%s: usage %+v model %q ok %v; want %+v %q", tc.name, u, model, ok, want, req.Model)
		}
	}
}

// TestEndpointsStream checks each endpoint's SSE answer: its golden file,
// usage read by the same scanner the filter runs, and that an estimate from
// the streamed text equals the reported count.
func TestEndpointsStream(t *testing.T) {
	s := New(Options{})
	for _, tc := range endpointCases {
		if tc.name == "embeddings" {
			continue
		}
		for _, include := range []bool{false, true} {
			body := strings.TrimSuffix(tc.body, "}") + `,"stream":true}`
			if include {
				body = strings.TrimSuffix(body, "}") + `,"stream_options":{"include_usage":true}}`
			}
			w := do(t, s, "POST", tc.path, body)
			if w.Code != 200 || w.Header().Get("Content-Type") != "text/event-stream; charset=utf-8" {
				t.Fatalf("%s: status %d %q", tc.name, w.Code, w.Header().Get("Content-Type"))
			}
			name := tc.name + "_stream"
			if include {
				name += "_include_usage"
			}
			checkGolden(t, name, w.Body.Bytes())

			sc := llm.NewStreamScanner(tc.path, false)
			fwd := sc.Finish(sc.Feed(w.Body.Bytes(), nil))
			if !bytes.Equal(fwd, w.Body.Bytes()) {
				t.Fatalf("%s: scanner changed the stream", name)
			}
			u, est := sc.Usage()
			if u.Output != DefaultCompletionTokens || sc.Model() == "" {
				t.Errorf("%s: usage %+v estimated %+v model %q; want 20 output tokens", name, u, est, sc.Model())
			}
			reported := include || tc.name == "responses" || tc.name == "messages"
			if est.Output == reported {
				t.Errorf("%s: estimated %+v, want reported=%v", name, est, reported)
			}
			if strings.Contains(w.Body.String(), `"choices":[],"usage":{`) != (include && tc.name != "responses" && tc.name != "messages") {
				t.Errorf("%s: usage chunk present = %v", name, !include)
			}
		}
	}
}

// TestCompletionTokens checks max_tokens, the header and finish reasons.
func TestCompletionTokens(t *testing.T) {
	s := New(Options{})
	for i, tc := range []struct {
		path, body string
		header     []string
		want       int64
		reason     string // gjson path = value
	}{
		{"/v1/chat/completions", `{"model":"m","max_tokens":5,"messages":[]}`, nil, 5, `choices.0.finish_reason=length`},
		{"/v1/chat/completions", `{"model":"m","max_completion_tokens":50,"messages":[]}`, nil, 20, `choices.0.finish_reason=stop`},
		{"/v1/chat/completions", `{"model":"m","max_tokens":5}`, []string{HeaderCompletionTokens, "300"}, 300, `choices.0.finish_reason=stop`},
		{"/v1/chat/completions", `{"model":"m","max_tokens":0}`, nil, 0, `choices.0.finish_reason=length`},
		{"/v1/completions", `{"model":"m","max_tokens":3,"prompt":"x"}`, nil, 3, `choices.0.finish_reason=length`},
		{"/v1/responses", `{"model":"m","max_output_tokens":16,"input":"x"}`, nil, 16, `status=incomplete`},
		{"/v1/messages", `{"model":"m","max_tokens":7,"messages":[]}`, nil, 7, `stop_reason=max_tokens`},
		{"/v1/messages", `{"model":"m","max_tokens":7,"messages":[]}`, []string{HeaderCompletionTokens, "0"}, 0, `stop_reason=end_turn`},
	} {
		w := do(t, s, "POST", tc.path, tc.body, tc.header...)
		u, _, ok := llm.ParseUsage(tc.path, w.Body.Bytes())
		kv := strings.SplitN(tc.reason, "=", 2)
		if !ok || u.Output != tc.want || u.Input != 1 || gjson.Get(w.Body.String(), kv[0]).Str != kv[1] {
			t.Errorf("case %d: %s: usage %+v ok %v, %s=%q; want output %d, input 1, %s", i, w.Body, u, ok, kv[0], gjson.Get(w.Body.String(), kv[0]).Str, tc.want, tc.reason)
		}
	}
}

// TestErrors checks provider-shaped errors: bad JSON, forced statuses,
// bad control headers, unknown paths and methods.
func TestErrors(t *testing.T) {
	s := New(Options{})
	for i, tc := range []struct {
		method, path, body string
		header             []string
		status             int
		want               string
	}{
		{"POST", "/v1/chat/completions", `{"model":`, nil, 400,
			`{"error":{"message":"request body at byte 9: invalid JSON: unexpected end of input, expecting a value","type":"invalid_request_error","param":null,"code":null}}`},
		{"POST", "/v1/messages", `{"model":"c","messages":5}`, nil, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"request body: messages at byte 24: must be an array of messages; got a number"}}`},
		{"POST", "/v1/chat/completions", seedBody, []string{HeaderStatus, "429"}, 429,
			`{"error":{"message":"stub: status 429 forced by X-Stub-Status","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`},
		{"POST", "/v1/chat/completions", seedBody, []string{HeaderStatus, "503"}, 503,
			`{"error":{"message":"stub: status 503 forced by X-Stub-Status","type":"server_error","param":null,"code":null}}`},
		{"POST", "/v1/messages", `{}`, []string{HeaderStatus, "529"}, 529,
			`{"type":"error","error":{"type":"overloaded_error","message":"stub: status 529 forced by X-Stub-Status"}}`},
		{"POST", "/v1/messages", `{}`, []string{HeaderStatus, "401"}, 401,
			`{"type":"error","error":{"type":"authentication_error","message":"stub: status 401 forced by X-Stub-Status"}}`},
		{"POST", "/v1/chat/completions", seedBody, []string{HeaderStatus, "200"}, 400,
			`{"error":{"message":"stub: header X-Stub-Status: must be an error status from 400 to 599; got \"200\"","type":"invalid_request_error","param":null,"code":null}}`},
		{"POST", "/v1/chat/completions", seedBody, []string{HeaderCompletionTokens, "-1"}, 400,
			`{"error":{"message":"stub: header X-Stub-Completion-Tokens: must be an integer from 0 to 1048576; got \"-1\"","type":"invalid_request_error","param":null,"code":null}}`},
		{"POST", "/v1/chat/completions", seedBody, []string{HeaderDelayMS, "soon"}, 400,
			`{"error":{"message":"stub: header X-Stub-Delay-Ms: must be an integer from 0 to 600000; got \"soon\"","type":"invalid_request_error","param":null,"code":null}}`},
		{"POST", "/v1/foo", `{}`, nil, 404,
			`{"error":{"message":"stub: no route for POST /v1/foo; the stub serves POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /v1/messages, /v1/messages/count_tokens and GET /v1/models, /v1/models/{id}","type":"invalid_request_error","param":null,"code":"unknown_url"}}`},
		{"GET", "/v1/chat/completions", ``, nil, 405,
			`{"error":{"message":"stub: /v1/chat/completions: method GET not allowed; use POST","type":"invalid_request_error","param":null,"code":null}}`},
	} {
		w := do(t, s, tc.method, tc.path, tc.body, tc.header...)
		if w.Code != tc.status || w.Body.String() != tc.want {
			t.Errorf("case %d: %d %s\nwant %d %s", i, w.Code, w.Body, tc.status, tc.want)
		}
		if _, _, ok := llm.ParseUsage(tc.path, w.Body.Bytes()); ok {
			t.Errorf("case %d: an error body carries usage", i)
		}
	}
}

func TestPrefixedPath(t *testing.T) {
	w := do(t, New(Options{}), "POST", "/openai/v1/chat/completions?api-version=1", seedBody)
	if u, _, ok := llm.ParseUsage("/v1/chat/completions", w.Body.Bytes()); !ok || u.Total != 28 {
		t.Fatalf("status %d usage %+v", w.Code, u)
	}
}

func TestModels(t *testing.T) {
	w := do(t, New(Options{Models: []string{"a", "b\"c"}}), "GET", "/v1/models", "")
	want := `{"object":"list","data":[{"id":"a","object":"model","created":1767225600,"owned_by":"tokentriage-stub"},{"id":"b\"c","object":"model","created":1767225600,"owned_by":"tokentriage-stub"}]}`
	if w.Code != 200 || w.Body.String() != want {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	s := New(Options{Models: []string{"a", "claude-x"}})
	for i, c := range []struct {
		path   string
		header []string
		status int
		want   string
	}{
		{"/v1/models", []string{"Anthropic-Version", "2023-06-01"}, 200,
			`{"data":[{"type":"model","id":"a","display_name":"a","created_at":"2026-01-01T00:00:00Z"},{"type":"model","id":"claude-x","display_name":"claude-x","created_at":"2026-01-01T00:00:00Z"}],"has_more":false,"first_id":"a","last_id":"claude-x"}`},
		{"/v1/models/claude-x", nil, 200, `{"id":"claude-x","object":"model","created":1767225600,"owned_by":"tokentriage-stub"}`},
		{"/openai/v1/models/a", []string{"Anthropic-Version", "2023-06-01"}, 200, `{"type":"model","id":"a","display_name":"a","created_at":"2026-01-01T00:00:00Z"}`},
		{"/v1/models/b", nil, 404, `{"error":{"message":"stub: model b not found","type":"invalid_request_error","param":null,"code":"unknown_url"}}`},
		{"/v1/models/b", []string{"Anthropic-Version", "2023-06-01"}, 404, `{"type":"error","error":{"type":"not_found_error","message":"stub: model b not found"}}`},
	} {
		w := do(t, s, "GET", c.path, "", c.header...)
		if w.Code != c.status || w.Body.String() != c.want {
			t.Errorf("case %d: %s: %d %s\nwant %d %s", i, c.path, w.Code, w.Body, c.status, c.want)
		}
	}
}

func TestCountTokens(t *testing.T) {
	w := do(t, New(Options{}), "POST", "/v1/messages/count_tokens", `{"model":"claude-x","messages":[{"role":"user","content":"What is the capital of Germany?"}]}`)
	if w.Code != 200 || w.Body.String() != `{"input_tokens":8}` {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

func TestEmbeddingsShapes(t *testing.T) {
	s := New(Options{})
	for i, tc := range []struct {
		body        string
		n, dims     int
		base64      bool
		promptBytes int64
	}{
		{`{"model":"e","input":"hello"}`, 1, 8, false, 5},
		{`{"model":"e","input":["a","b","c"],"dimensions":3}`, 3, 3, false, 3},
		{`{"model":"e","input":[1,2,3]}`, 1, 8, false, 12},
		{`{"model":"e","input":[[1,2],[3]],"encoding_format":"base64"}`, 2, 8, true, 12},
	} {
		w := do(t, s, "POST", "/v1/embeddings", tc.body)
		data := gjson.Get(w.Body.String(), "data")
		if len(data.Array()) != tc.n {
			t.Errorf("case %d: %d vectors, want %d: %s", i, len(data.Array()), tc.n, w.Body)
			continue
		}
		emb := data.Get("0.embedding")
		if tc.base64 {
			if emb.Type != gjson.String || len(emb.Str) != (4*tc.dims+2)/3*4 {
				t.Errorf("case %d: embedding %s, want base64 of %d floats", i, emb.Raw, tc.dims)
			}
		} else if len(emb.Array()) != tc.dims {
			t.Errorf("case %d: %d dims, want %d", i, len(emb.Array()), tc.dims)
		}
		if got := gjson.Get(w.Body.String(), "usage.prompt_tokens").Int(); got != max(1, llm.EstimateTokens(tc.promptBytes)) {
			t.Errorf("case %d: prompt_tokens %d", i, got)
		}
	}
}

// TestRecordsRequests checks the request history: what reached the
// upstream, oldest first, bounded.
func TestRecordsRequests(t *testing.T) {
	s := New(Options{History: 2})
	if _, ok := s.Last(); ok {
		t.Fatal("Last on an empty history")
	}
	for i := 0; i < 3; i++ {
		do(t, s, "POST", fmt.Sprintf("/v1/chat/completions?n=%d", i), seedBody, "Authorization", fmt.Sprintf("Bearer sk-%d", i))
	}
	got := s.Requests()
	if len(got) != 2 || got[0].URI != "/v1/chat/completions?n=1" || got[1].Header.Get("Authorization") != "Bearer sk-2" || string(got[1].Body) != seedBody {
		t.Fatalf("history %+v", got)
	}
	if last, ok := s.Last(); !ok || last.URI != "/v1/chat/completions?n=2" || last.Method != "POST" {
		t.Fatalf("Last = %+v %v", last, ok)
	}
	if s.Served() != 3 {
		t.Fatalf("Served = %d", s.Served())
	}
	s.Forget()
	if len(s.Requests()) != 0 {
		t.Fatal("Forget kept requests")
	}
	none := New(Options{History: -1})
	do(t, none, "POST", "/v1/chat/completions", seedBody)
	if _, ok := none.Last(); ok || len(none.Requests()) != 0 {
		t.Fatal("History -1 remembered a request")
	}
}

// TestDelayHonoursCancel: a delayed answer is abandoned, unwritten, when
// the client goes away.
func TestDelayHonoursCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(seedBody)).WithContext(ctx)
	r.Header.Set(HeaderDelayMS, "600000")
	w := httptest.NewRecorder()
	New(Options{}).ServeHTTP(w, r)
	if w.Body.Len() != 0 {
		t.Fatalf("wrote %q after the client left", w.Body)
	}
	// A short delay still answers.
	if w := do(t, New(Options{}), "POST", "/v1/chat/completions", seedBody, HeaderDelayMS, "1"); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
}

// TestChunksArriveBeforeTheEnd reads the first events of a stream whose
// later events are a minute apart: they can only have arrived if the stub
// flushes each event as it goes. Closing the body ends the handler.
func TestChunksArriveBeforeTheEnd(t *testing.T) {
	srv := httptest.NewServer(New(Options{}))
	defer srv.Close()
	for _, tc := range endpointCases {
		if tc.name == "embeddings" {
			continue
		}
		body := strings.TrimSuffix(tc.body, "}") + `,"stream":true}`
		req, err := http.NewRequest("POST", srv.URL+tc.path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(HeaderChunkDelayMS, "60000")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !(strings.HasPrefix(line, "data: {") || strings.HasPrefix(line, "event: ")) {
			t.Fatalf("%s: first line %q, %v", tc.name, line, err)
		}
		resp.Body.Close()
	}
}

func TestReply(t *testing.T) {
	if len(replyPattern)%TokenBytes != 0 {
		t.Fatalf("replyPattern is %d bytes, not a whole number of tokens", len(replyPattern))
	}
	for _, n := range []int64{0, 1, 18, 19, 20, 100} {
		if got := Reply(n); got != strings.Repeat(replyPattern, 6)[:n*TokenBytes] {
			t.Errorf("Reply(%d) = %q", n, got)
		}
	}
	p := plan{completion: 200, text: Reply(200)}
	pieces := p.pieces()
	if len(pieces) != 50 || strings.Join(pieces, "") != p.text {
		t.Fatalf("200 tokens in %d pieces", len(pieces))
	}
	for _, piece := range pieces {
		if len(piece)%TokenBytes != 0 {
			t.Fatalf("piece %q is not whole tokens", piece)
		}
	}
	// X-Stub-Pieces: at most that many deltas of equal whole tokens.
	for _, c := range []struct{ completion, asked, want int64 }{{1000, 1000, 1000}, {10, 3, 3}, {10, 100, 10}, {200, 64, 50}} {
		p := plan{completion: c.completion, deltas: c.asked, text: Reply(c.completion)}
		if got := p.pieces(); int64(len(got)) != c.want || strings.Join(got, "") != p.text {
			t.Errorf("%d tokens in %d pieces asked: %d pieces", c.completion, c.asked, len(got))
		}
	}
}

func TestAppendString(t *testing.T) {
	got := string(appendString(nil, "a\"\\\n\x01é\xff"))
	if want := `"a\"\\\n\u0001é\ufffd"`; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

// TestConcurrentRequests runs requests in parallel against one stub (run
// with -race).
func TestConcurrentRequests(t *testing.T) {
	s := New(Options{History: 4})
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 20; i++ {
				do(t, s, "POST", "/v1/chat/completions", seedBody)
				s.Requests()
				s.Last()
			}
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
	if s.Served() != 160 || len(s.Requests()) != 4 {
		t.Fatalf("served %d, remembered %d", s.Served(), len(s.Requests()))
	}
}
