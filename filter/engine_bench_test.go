package filter

import (
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/vkey"
)

// The native benchmarks run the same gate as BenchmarkGate1 and
// BenchmarkFull (bench_test.go), with the Engine driven directly over the
// in-memory fakes: the difference is the wasm tax (the binding, the host
// calls, wazero).

const benchKey = "tt-vk_FEKZdMs2UQRi-3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4oP"

// BenchGate1Limits: rpm and concurrency at org, team and user, six gate-1
// instances for dev1's key, with amounts nothing reaches (the wasm
// benchmarks of bench_test.go run the same chain).
var BenchGate1Limits = strings.Join([]string{
	`{"id":"org_rpm","attach":{"level":"org"},"type":"rpm","amount":1000000000,"period":"1m"}`,
	`{"id":"team_rpm","attach":{"level":"team"},"type":"rpm","amount":1000000000,"period":"1m"}`,
	`{"id":"user_rpm","attach":{"level":"user"},"type":"rpm","amount":1000000000,"period":"1m"}`,
	`{"id":"org_conc","attach":{"level":"org"},"type":"concurrency","amount":100000}`,
	`{"id":"team_conc","attach":{"level":"team"},"type":"concurrency","amount":100000}`,
	`{"id":"user_conc","attach":{"level":"user"},"type":"concurrency","amount":100000}`,
}, ",")

func benchEngine(b *testing.B, limits, extra string) (*Engine, *memStore) {
	cfg := `{"governance":{"enabled":true,"require_key":true,"tenants":[{"org":"acme","teams":["ml"],"users":{"ml":["dev1"]}}],"limits":[` + limits + `]},
		"keys":[{"kid":"vk_FEKZdMs2UQRi","sha256":"` + vkey.Hash(benchKey) + `","owner":"org:acme/team:ml/user:dev1","scopes":{"allow_passthrough":true}}]` + extra + `}`
	store := newMemStore()
	clock := &manualClock{t: nativeT0}
	e := testEngines(b, 1, store, clock, cfg)[0]
	e.host.Log = func(LogLevel, string) {}
	return e, store
}

// benchPerRequest runs one request once to warm up, then b.N times, and
// reports the shared-data operations per request.
func benchPerRequest(b *testing.B, store *memStore, one func()) {
	one()
	ops0 := store.ops
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		one()
	}
	b.ReportMetric(float64(store.ops-ops0)/float64(b.N), "shareddata/req")
}

// BenchmarkGate1Native: gate 1 (six instances), the response headers and
// settlement of a passthrough request, natively.
func BenchmarkGate1Native(b *testing.B) {
	e, store := benchEngine(b, BenchGate1Limits, "")
	head := RequestHead{Method: "GET", Path: "/v1/models", Authorization: "Bearer " + benchKey, EndOfStream: true}
	one := func() {
		s := e.NewStream()
		if v := e.RequestHeaders(s, &head); v.Action != ActContinue {
			b.Fatalf("refused: %+v", v.Reply)
		}
		e.ResponseHeaders(s, 200, "application/json", "")
		e.Done(s)
		e.Release(s)
	}
	benchPerRequest(b, store, one)
}

// BenchmarkFullNative: the whole governed request natively: both gates,
// the stub's SSE answer (with the usage chunk stripped) and settlement.
func BenchmarkFullNative(b *testing.B) {
	limits := BenchGate1Limits + `,{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":1000000000,"period":"1m"}`
	e, store := benchEngine(b, limits, "")
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What is the capital of Germany?"}],"stream":true}`)
	head := RequestHead{Method: "POST", Path: "/v1/chat/completions", Authorization: "Bearer " + benchKey}
	events := sseEvents()
	one := func() {
		s := e.NewStream()
		if v := e.RequestHeaders(s, &head); v.Action != ActContinue {
			b.Fatalf("refused at gate 1: %+v", v.Reply)
		}
		if v := e.RequestBody(s, len(body), true, bytesBody(body)); v.Action != ActContinue {
			b.Fatalf("refused at gate 2: %s", v.Reply.Body)
		}
		e.ResponseHeaders(s, 200, "text/event-stream", "")
		for i, ev := range events {
			e.ResponseBody(s, ev, i == len(events)-1)
		}
		e.Done(s)
		e.Release(s)
	}
	benchPerRequest(b, store, one)
}

// sseEvents is a chat stream of 20 content chunks and the usage chunk the
// filter asked for, one event per body callback.
func sseEvents() [][]byte {
	var out [][]byte
	for i := 0; i < 20; i++ {
		out = append(out, []byte(`data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"abcd"},"finish_reason":null}]}`+"\n\n"))
	}
	out = append(out, []byte(`data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":20,"total_tokens":28}}`+"\n\n"))
	out = append(out, []byte("data: [DONE]\n\n"))
	return out
}
