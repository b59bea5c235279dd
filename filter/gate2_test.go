package filter_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// TestSeedTPMReserve reproduces seed 000's success headers: 'What is the
// capital of Germany?' with no max_tokens reserves 16,391 of a 20,000
// window, so 3,609 remain.
func TestSeedTPMReserve(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}})
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 200)
	for k, want := range map[string]string{
		"Ratelimit-Policy":             `"team_tpm";q=20000;w=60`,
		"X-Ratelimit-Limit-Tokens":     "20000",
		"X-Ratelimit-Remaining-Tokens": "3609",
	} {
		if got := resp.Headers.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	// Settled against the stub's 8 + 20 = 28 tokens: the window holds 28.
	if got := r.meLimit(dev1Key, "team_tpm"); got["observed"] != 28.0 || got["remaining"] != 19972.0 {
		t.Errorf("team_tpm after settlement: %v, want observed 28 remaining 19972", got)
	}
}

// usageCase is one provider shape.
type usageCase struct {
	name, path, body string
	headers          map[string]string
	stream           bool
	want             ledger.Usage
	served           string
}

// TestUsageFromEveryShape: usage reaches the ledger row from the JSON body
// and from the SSE stream, for OpenAI's endpoints and Anthropic's, and the
// tpm cell is reconciled to the reported total.
func TestUsageFromEveryShape(t *testing.T) {
	lim := `{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":1000000,"period":"1m"}`
	r := accountantRig(t, lim)
	// Prompts of 31 bytes: 8 tokens at the stub.
	cases := []usageCase{
		{name: "chat json", path: "/v1/chat/completions", body: chatGermany,
			want: ledger.Usage{Input: 8, Output: 20, Total: 28}, served: "gpt-4o-mini"},
		{name: "chat sse include_usage", path: "/v1/chat/completions", stream: true,
			body: chatBody("gpt-4o", germany, `,"stream":true,"stream_options":{"include_usage":true}`),
			want: ledger.Usage{Input: 8, Output: 20, Total: 28}, served: "gpt-4o"},
		{name: "chat sse injected", path: "/v1/chat/completions", stream: true,
			body:    chatBody("gpt-4o", germany, `,"stream":true,"max_tokens":7`),
			headers: map[string]string{"X-Stub-Cached-Tokens": "4"},
			want:    ledger.Usage{Input: 8, Output: 7, CachedInput: 4, Total: 15}, served: "gpt-4o"},
		{name: "completions json", path: "/v1/completions", body: `{"model":"gpt-4.1","prompt":"What is the capital of Germany?","max_tokens":5}`,
			want: ledger.Usage{Input: 8, Output: 5, Total: 13}, served: "gpt-4.1"},
		{name: "completions sse injected", path: "/v1/completions", stream: true,
			body: `{"model":"gpt-4.1","prompt":"What is the capital of Germany?","stream":true}`,
			want: ledger.Usage{Input: 8, Output: 20, Total: 28}, served: "gpt-4.1"},
		{name: "embeddings", path: "/v1/embeddings", body: `{"model":"text-embedding-3-small","input":"What is the capital of Germany?"}`,
			want: ledger.Usage{Input: 8, Total: 8}, served: "text-embedding-3-small"},
		{name: "responses json", path: "/v1/responses", body: `{"model":"o4-mini","input":"What is the capital of Germany?"}`,
			want: ledger.Usage{Input: 8, Output: 20, Total: 28}, served: "o4-mini"},
		{name: "messages json", path: "/v1/messages", body: messagesBody("claude-sonnet-4-20250514", germany),
			headers: map[string]string{"X-Stub-Completion-Tokens": "12"},
			want:    ledger.Usage{Input: 8, Output: 12, Total: 20}, served: "claude-sonnet-4-20250514"},
		{name: "messages sse", path: "/v1/messages", stream: true, body: messagesBody("claude-3-5-haiku-latest", germany, `,"stream":true`),
			want: ledger.Usage{Input: 8, Output: 20, Total: 28}, served: "claude-3-5-haiku-latest"},
	}
	var total int64
	ids := map[string]usageCase{}
	for _, c := range cases {
		resp := r.do(req{path: c.path, key: dev1Key, body: c.body, headers: c.headers})
		mustStatus(t, resp, 200)
		if c.stream && !strings.HasPrefix(resp.Headers.Get("Content-Type"), "text/event-stream") {
			t.Errorf("%s: content type %q", c.name, resp.Headers.Get("Content-Type"))
		}
		ids[resp.Headers.Get("X-Tt-Request-Id")] = c
		total += c.want.Total
	}
	// The clock has not moved, so the window still holds every settled total.
	if got := r.meLimit(dev1Key, "team_tpm"); got["observed"] != float64(total) {
		t.Errorf("team_tpm observed %v, want the sum of reported totals %d", got["observed"], total)
	}
	r.step(time.Second)
	rows := r.acct.ledger()
	if len(rows) != len(cases) {
		t.Fatalf("%d rows, want %d", len(rows), len(cases))
	}
	for _, row := range rows {
		c := ids[row.RequestID]
		u := row.Usage
		u.Reasoning = 0
		if u != c.want || row.Served != c.served || row.Stream != c.stream || row.Estimated != (ledger.Estimated{}) ||
			row.Decision != ledger.Admitted || row.Status != 200 || row.Endpoint != c.path {
			t.Errorf("%s: row usage %+v served %q stream %v estimated %+v decision %s status %d endpoint %s; want usage %+v served %q",
				c.name, row.Usage, row.Served, row.Stream, row.Estimated, row.Decision, row.Status, row.Endpoint, c.want, c.served)
		}
	}
}

// TestIncludeUsageInjection: a streaming chat request without
// stream_options gets include_usage on its way to the provider, and the
// extra usage chunk is stripped, so the client sees exactly the stream it
// would have seen without the filter; a client that asked for usage keeps
// it.
func TestIncludeUsageInjection(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}})
	body := chatBody("gpt-4o-mini", germany, `,"stream":true,"max_tokens":30`)
	resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body})
	mustStatus(t, resp, 200)
	sent, _ := r.stub.Last()
	if !bytes.Contains(sent.Body, []byte(`"include_usage":true`)) {
		t.Fatalf("the provider got no include_usage: %s", sent.Body)
	}
	if sent.Header.Get("Content-Length") != "" && sent.Header.Get("Content-Length") != fmt.Sprint(len(sent.Body)) {
		t.Errorf("the provider got a stale content-length %s for a %d-byte body", sent.Header.Get("Content-Length"), len(sent.Body))
	}
	// What the stub sends for the rewritten request, minus its usage chunk,
	// is what the client must see.
	full := replay(t, sent)
	want := stripUsageEvent(t, full)
	if bytes.Equal(want, full) {
		t.Fatalf("the stub sent no usage chunk to strip:\n%s", full)
	}
	if !bytes.Equal(resp.Body, want) {
		t.Errorf("client stream differs from the provider's minus its usage chunk\n--- got\n%s\n--- want\n%s", resp.Body, want)
	}
	if resp.Headers.Get("Content-Length") != "" {
		t.Errorf("a stripped stream kept a content-length: %v", resp.Headers)
	}

	// Asked for: untouched.
	body = chatBody("gpt-4o-mini", germany, `,"stream":true,"stream_options":{"include_usage":true}`)
	resp = r.do(req{path: "/v1/chat/completions", key: dev1Key, body: body})
	mustStatus(t, resp, 200)
	sent, _ = r.stub.Last()
	if string(sent.Body) != body {
		t.Errorf("a request that asked for usage was rewritten: %s", sent.Body)
	}
	if full := replay(t, sent); !bytes.Equal(resp.Body, full) {
		t.Errorf("client stream differs from the provider's\n--- got\n%s\n--- want\n%s", resp.Body, full)
	}
	// Not streaming: the body is forwarded byte for byte.
	resp = r.do(req{path: "/v1/chat/completions", key: dev1Key, body: chatGermany})
	mustStatus(t, resp, 200)
	if sent, _ = r.stub.Last(); string(sent.Body) != chatGermany {
		t.Errorf("a JSON request was rewritten: %s", sent.Body)
	}
}

// replay sends a recorded request to a fresh stub and returns its body.
func replay(t testing.TB, rec stub.Recorded) []byte {
	t.Helper()
	q := httptest.NewRequest(rec.Method, rec.URI, bytes.NewReader(rec.Body))
	q.Header = rec.Header.Clone()
	w := httptest.NewRecorder()
	stub.New(stub.Options{}).ServeHTTP(w, q)
	return w.Body.Bytes()
}

// stripUsageEvent removes the OpenAI usage-only chunk (empty choices) from
// an SSE body.
func stripUsageEvent(t testing.TB, b []byte) []byte {
	t.Helper()
	var out []byte
	for _, ev := range bytes.SplitAfter(b, []byte("\n\n")) {
		if bytes.Contains(ev, []byte(`"choices":[]`)) && bytes.Contains(ev, []byte(`"usage":{`)) {
			continue
		}
		out = append(out, ev...)
	}
	return out
}

// TestEstimatedUsage: a stream that reports no usage is settled on the
// prompt estimate and the streamed text, and the row says so; an upstream
// error is settled on the prompt alone.
func TestEstimatedUsage(t *testing.T) {
	// An upstream that streams OpenAI chunks and never reports usage,
	// whatever the request asked.
	noUsage := http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, text := range []string{"Berlin ", "is the ", "capital."} { // 23 bytes: 6 tokens
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", text)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	mux := http.NewServeMux()
	mux.Handle("/v1/chat/completions", noUsage)
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, upstream: mux})
	resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, body: chatBody("gpt-4o", germany, `,"stream":true`)})
	mustStatus(t, resp, 200)
	id := resp.Headers.Get("X-Tt-Request-Id")
	if !bytes.Contains(resp.Body, []byte("capital.")) || !bytes.HasSuffix(resp.Body, []byte("data: [DONE]\n\n")) {
		t.Errorf("client stream: %s", resp.Body)
	}
	observed := r.meLimit(dev1Key, "team_tpm")["observed"]
	r.step(time.Second)
	row, ok := r.acct.row(id)
	if !ok {
		t.Fatal("no row")
	}
	if row.Usage.Input != 8 || row.Usage.Output != 6 || !row.Estimated.Input || !row.Estimated.Output {
		t.Errorf("estimated row: usage %+v estimated %+v, want input 8, output 6, both estimated", row.Usage, row.Estimated)
	}
	if observed != float64(row.Usage.Total) {
		t.Errorf("team_tpm observed %v, want the estimated total %d", observed, row.Usage.Total)
	}
}

// TestConcurrentStreamsSettleExactly: streams from several VMs against one
// tpm limit, each holding its reserve while the others start; once all
// settle, the cell holds exactly the sum of the reported totals.
func TestConcurrentStreamsSettleExactly(t *testing.T) {
	const callers = 16
	// What each stream's provider reports as its output: within the
	// max_tokens the call set, as a provider's always is.
	completion := func(i int) int64 {
		if i%3 == 0 {
			return min(int64(10*(i+1)), int64(100+i))
		}
		return int64(10 * (i + 1))
	}
	lim := `{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":400000,"period":"1m"}`
	up := newGatedUpstream(nil)
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), keys: []testKey{dev1Key, dev2Key}, accountant: true,
		workers: 4, upstream: up})
	up.next = r.stub
	ids := make([]string, callers)
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k := dev1Key
			if i%2 == 1 {
				k = dev2Key
			}
			body := chatBody("gpt-4o", strings.Repeat("w", 4*(i+1)), `,"stream":true`)
			if i%3 == 0 {
				body = chatBody("gpt-4o", strings.Repeat("w", 4*(i+1)), `,"stream":true,"max_tokens":`+fmt.Sprint(100+i))
			}
			resp := r.do(req{path: "/v1/chat/completions", key: k, body: body,
				headers: map[string]string{"X-Stub-Completion-Tokens": fmt.Sprint(completion(i)), "X-Stub-Chunk-Delay-Ms": "1"}})
			if resp.Status != 200 {
				t.Errorf("stream %d: %d %s", i, resp.Status, resp.Body)
			}
			ids[i] = resp.Headers.Get("X-Tt-Request-Id")
		}(i)
	}
	waitFor(t, "every stream holding its reserve", func() bool { return up.inflight.Load() == callers })
	held := r.meLimit(dev1Key, "team_tpm")["observed"].(float64)
	up.open()
	wg.Wait()
	settled := r.meLimit(dev1Key, "team_tpm")
	r.step(time.Second)
	var sum, reserved int64
	for i, id := range ids {
		row, ok := r.acct.row(id)
		if !ok {
			t.Fatalf("stream %d: no row", i)
		}
		want := int64(i+1) + completion(i)
		if row.Usage.Total != want || row.Estimated.Output {
			t.Errorf("stream %d: usage %+v estimated %+v, want total %d reported", i, row.Usage, row.Estimated, want)
		}
		sum += row.Usage.Total
		reserved += int64(i+1) + 16384
		if i%3 == 0 {
			reserved += int64(100+i) - 16384
		}
	}
	if held != float64(reserved) {
		t.Errorf("while all were held the cell held %v, want the sum of reserves %d", held, reserved)
	}
	if settled["observed"] != float64(sum) || settled["remaining"] != float64(400000-sum) {
		t.Errorf("after settlement: %v, want observed %d remaining %d", settled, sum, 400000-sum)
	}
}

// TestResetMidStreamSettles: a client that goes away mid-stream settles
// once: the lease comes back, the reserve is reconciled to what was
// streamed (estimated), and one row is written.
func TestResetMidStreamSettles(t *testing.T) {
	lims := `{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":100000,"period":"1m"},
		{"id":"user_concurrency","attach":{"level":"user"},"type":"concurrency","amount":2}`
	r := accountantRig(t, lims)
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan wasmtest.Response)
		go func() {
			done <- r.do(req{path: "/v1/chat/completions", key: dev1Key, ctx: ctx,
				body:    chatBody("gpt-4o", germany, `,"stream":true`),
				headers: map[string]string{"X-Stub-Chunk-Delay-Ms": "20", "X-Stub-Completion-Tokens": "500"}})
		}()
		waitFor(t, "the stream to start", func() bool {
			return r.meLimit(dev1Key, "user_concurrency")["observed"] == 1.0
		})
		time.Sleep(50 * time.Millisecond)
		cancel()
		<-done
	}
	waitFor(t, "the leases to return", func() bool {
		return r.meLimit(dev1Key, "user_concurrency")["observed"] == 0.0
	})
	observed := r.meLimit(dev1Key, "team_tpm")["observed"]
	r.step(time.Second)
	rows := r.acct.ledger()
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	var sum int64
	for _, row := range rows {
		if row.Usage.Total <= 0 || row.Usage.Total >= 8+500 {
			t.Errorf("a reset stream settled at %+v: want the prompt plus what was streamed", row.Usage)
		}
		sum += row.Usage.Total
	}
	if observed != float64(sum) {
		t.Errorf("team_tpm observed %v, want %d", observed, sum)
	}
}

// jsonRows decodes the rows for a failure message.
func jsonRows(rows []ledger.Row) string {
	b, _ := json.MarshalIndent(rows, "", "  ")
	return string(b)
}

// TestAbsurdUsageIsBounded: a provider that reports more tokens than the
// request could produce is held to the bound (here a total past input +
// output is replaced by their sum): the tpm window is charged that, the
// row carries it flagged usage_clamped, and the team is not locked out.
func TestAbsurdUsageIsBounded(t *testing.T) {
	absurd := http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","model":"gpt-4o","usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":99999999999999999999}}`)
	})
	lim := `{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":100000000,"period":"1m"}`
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true, upstream: absurd})
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 200)
	if got := r.meLimit(dev1Key, "team_tpm")["observed"]; got != float64(2) {
		t.Errorf("team_tpm observed %v, want the bounded total 2", got)
	}
	r.step(time.Second)
	if row, ok := r.acct.row(resp.Headers.Get("X-Tt-Request-Id")); !ok || row.Usage.Total != 2 || !row.UsageClamped {
		t.Errorf("row usage %+v clamped %v: want the total held to input + output, flagged", row.Usage, row.UsageClamped)
	}
	if n := r.metric("tokentriage.usage_clamped"); n != 1 {
		t.Errorf("tokentriage.usage_clamped = %d, want 1", n)
	}
	r.step(10 * time.Second)
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
}

// TestAbandonedBodyIsNotARow: a client that goes away while its body is
// still arriving was never forwarded: its lease comes back, and no row
// reaches the accountant (a row would count as a forwarded request).
func TestAbandonedBodyIsNotARow(t *testing.T) {
	lims := `{"id":"user_concurrency","attach":{"level":"user"},"type":"concurrency","amount":1},
		{"id":"user_daily_requests","attach":{"level":"user"},"type":"quota_requests","amount":100,"period":"day"}`
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true,
		acct: func(a *fakeAccountant) { a.setSnapshot("s0") }})
	r.sync()
	body, feed := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	q := httptest.NewRequest("POST", "/v1/chat/completions", body).WithContext(ctx)
	q.Header.Set("Authorization", "Bearer "+dev1Key.key)
	q.Header.Set("Content-Type", "application/json")
	q.ContentLength = -1
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { recover() }() // the host aborts the handler for a reset stream
		r.h.ServeHTTP(httptest.NewRecorder(), q)
	}()
	feed.Write([]byte(`{"model":"gpt-4o-mini","messages":[`))
	waitFor(t, "the lease", func() bool { return r.meLimit(dev1Key, "user_concurrency")["observed"] == 1.0 })
	cancel()
	feed.CloseWithError(context.Canceled)
	<-done
	waitFor(t, "the lease to come back", func() bool { return r.meLimit(dev1Key, "user_concurrency")["observed"] == 0.0 })
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	r.step(time.Second)
	if rows := r.acct.ledger(); len(rows) != 1 || rows[0].Status != 200 {
		t.Errorf("rows: %s", jsonRows(rows))
	}
}

// TestTrailersDoNotSkipGate2: a body followed by trailers ends on a body
// callback without end of stream; gate 2 runs at the trailers all the same
// (scopes, the tpm reserve, the include_usage rewrite), so trailers are no
// way around it.
func TestTrailersDoNotSkipGate2(t *testing.T) {
	scoped := newTestKey("vk_scopedscoped", "org:acme/team:ml/user:dev2").withScopes(`{"models":["gpt-4o*"]}`)
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{scoped}, extra: []string{`"max_body_bytes":1000`}})
	send := func(body string, chunks ...string) wasmtest.Response {
		q := wasmtest.Request{Method: "POST", Path: "/v1/chat/completions",
			Headers:  http.Header{"Authorization": {"Bearer " + scoped.key}, "Content-Type": {"application/json"}},
			Trailers: http.Header{"X-Checksum": {"1"}}}
		for _, c := range append([]string{body}, chunks...) {
			if c != "" {
				q.BodyChunks = append(q.BodyChunks, []byte(c))
			}
		}
		return r.h.Do(q)
	}
	if resp := send(chatBody("o4-mini", germany)); resp.Status != 403 {
		t.Errorf("a model outside the scope, with trailers: %d %s", resp.Status, resp.Body)
	}
	resp := send(`{"model":"gpt-4o","messages":[{"role":"user",`, `"content":"What is the capital of Germany?"}],"stream":true}`)
	mustStatus(t, resp, 200)
	if got := resp.Headers.Get("X-Ratelimit-Remaining-Tokens"); got != "3609" {
		t.Errorf("tpm reserve with trailers: remaining %q, want 3609", got)
	}
	// The upstream may also have seen the refused request's headers (they
	// go on at gate 1) and its reset, recorded in any order.
	rewritten := false
	for _, q := range r.stub.Requests() {
		rewritten = rewritten || bytes.Contains(q.Body, []byte(`"include_usage":true`))
	}
	if !rewritten {
		t.Errorf("the body with trailers was not rewritten: %q", r.stub.Requests())
	}
	if bytes.Contains(resp.Body, []byte(`"usage":{`)) {
		t.Errorf("the usage chunk the filter asked for reached the client: %s", resp.Body)
	}
	if resp := send(chatBody("gpt-4o", strings.Repeat("z", 2000))); resp.Status != 413 {
		t.Errorf("an oversized body with trailers: %d", resp.Status)
	}
	if resp := send(`{"model":`); resp.Status != 400 {
		t.Errorf("an unreadable body with trailers: %d", resp.Status)
	}
}

// TestCompressionIsNotAsked: a governed request goes to the provider
// without accept-encoding, so its usage comes back readable; an answer
// compressed anyway passes through untouched and settles on an estimate.
func TestCompressionIsNotAsked(t *testing.T) {
	var gzipped []byte
	{
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(`{"id":"x","model":"gpt-4o","usage":{"prompt_tokens":8,"completion_tokens":20,"total_tokens":28}}`))
		zw.Close()
		gzipped = b.Bytes()
	}
	st := stub.New(stub.Options{})
	mux := http.NewServeMux()
	mux.Handle("/", st)
	mux.HandleFunc("/v1/completions", func(w http.ResponseWriter, q *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gzipped)
	})
	key := dev1Key.withScopes(`{"allow_passthrough":true}`)
	r := newRig(t, rigOptions{governance: gov(limTeamTPM, `,"require_key":true`), keys: []testKey{key}, accountant: true, upstream: mux})
	resp := r.do(req{path: "/v1/chat/completions", key: key, body: chatGermany, headers: map[string]string{"Accept-Encoding": "gzip, br"}})
	mustStatus(t, resp, 200)
	if last, _ := st.Last(); last.Header.Get("Accept-Encoding") != "" {
		t.Errorf("a governed request reached the provider with Accept-Encoding %q", last.Header.Get("Accept-Encoding"))
	}
	mustStatus(t, r.do(req{method: "GET", path: "/v1/models", key: key, headers: map[string]string{"Accept-Encoding": "gzip"}}), 200)
	if last, _ := st.Last(); last.Header.Get("Accept-Encoding") != "gzip" {
		t.Errorf("a passthrough request lost its Accept-Encoding: %q", last.Header.Get("Accept-Encoding"))
	}
	resp = r.do(req{path: "/v1/completions", key: key, body: `{"model":"gpt-4o","prompt":"What is the capital of Germany?"}`})
	mustStatus(t, resp, 200)
	if !bytes.Equal(resp.Body, gzipped) {
		t.Errorf("the compressed answer was changed on its way to the client")
	}
	r.step(time.Second)
	row, ok := r.acct.row(resp.Headers.Get("X-Tt-Request-Id"))
	if !ok || !row.Estimated.Output || row.Usage.Input != 8 {
		t.Errorf("compressed answer's row: %+v", row)
	}
}

// TestTooLargeByContentLength: a request whose content-length is over
// max_body_bytes is answered 413 at once, before gate 1 counts an arrival;
// one sent chunked, without a length, is refused when the buffered body
// passes the cap, after gate 1 (its rpm arrival stays counted).
func TestTooLargeByContentLength(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamRPM, `,"require_key":true`), keys: []testKey{dev1Key},
		extra: []string{`"max_body_bytes":1024`}})
	big := chatBody("gpt-4o", strings.Repeat("x", 2000))
	for i := 0; i < 4; i++ {
		resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, body: big})
		mustStatus(t, resp, 413)
		if got := resp.Headers.Get("X-Tt-Refusal-Type"); got != "request_too_large" {
			t.Errorf("refusal type %q, want request_too_large", got)
		}
	}
	if got := r.meLimit(dev1Key, "team_rpm"); got["observed"] != 0.0 {
		t.Errorf("team_rpm after four 413s by content-length: observed %v, want 0", got["observed"])
	}
	resp := r.h.Do(wasmtest.Request{Method: "POST", Path: "/v1/chat/completions", Chunked: true,
		Headers:    http.Header{"Authorization": {"Bearer " + dev1Key.key}, "Content-Type": {"application/json"}},
		BodyChunks: [][]byte{[]byte(big[:1000]), []byte(big[1000:])}})
	mustStatus(t, resp, 413)
	if got := r.meLimit(dev1Key, "team_rpm"); got["observed"] != 1.0 {
		t.Errorf("team_rpm after a chunked 413: observed %v, want 1", got["observed"])
	}
}

// TestResetBeforeAnswer: a client that goes away after its request was
// forwarded and before the provider answered leaves a call the provider
// may still bill. A non-streamed one is charged the most output it could
// produce (its max_tokens, at most 16,384); a stream, which stops with its
// reader, its prompt. Both rows say they are estimated.
func TestResetBeforeAnswer(t *testing.T) {
	r := accountantRig(t, limTeamTPM)
	for _, body := range []string{
		chatBody("gpt-4o", germany, `,"max_tokens":300`),
		chatBody("gpt-4o", germany, `,"stream":true,"max_tokens":300`),
	} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan wasmtest.Response)
		seen := len(r.stub.Requests())
		go func() {
			done <- r.do(req{path: "/v1/chat/completions", key: dev1Key, ctx: ctx, body: body,
				headers: map[string]string{"X-Stub-Delay-Ms": "2000"}})
		}()
		waitFor(t, "the request to reach the stub", func() bool { return len(r.stub.Requests()) > seen })
		cancel()
		<-done
	}
	r.step(time.Second)
	rows := r.acct.ledger()
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %s", len(rows), jsonRows(rows))
	}
	if rows[0].Stream {
		rows[0], rows[1] = rows[1], rows[0] // the VMs send their rows in either order
	}
	prompt := int64(8) // ceil(31/4)
	if u := rows[0].Usage; rows[0].Stream || u.Input != prompt || u.Output != 300 || !rows[0].Estimated.Output {
		t.Errorf("non-streamed, reset before the answer: %s, want input %d output 300 estimated", jsonRows(rows[:1]), prompt)
	}
	if u := rows[1].Usage; !rows[1].Stream || u.Input != prompt || u.Output != 0 || !rows[1].Estimated.Output {
		t.Errorf("streamed, reset before the answer: %s, want input %d output 0 estimated", jsonRows(rows[1:]), prompt)
	}
}
