package filter

import (
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/vkey"
)

// FuzzEngine drives one request through every engine entry point natively,
// where the fuzzer sees the gate's own coverage: a header block, a body
// in up to three chunks and an upstream answer in up to three chunks. The
// wasm fuzz targets (fuzz_test.go) run the same inputs' shapes through the
// real module; this one finds the inputs.
func FuzzEngine(f *testing.F) {
	key := "tt-vk_FEKZdMs2UQRi-3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4oP"
	for _, s := range []struct {
		path, auth, body, ctype, resp string
	}{
		{"/v1/chat/completions", "Bearer " + key, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`, "text/event-stream",
			"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\ndata: [DONE]\n\n"},
		{"/v1/messages", "Bearer " + key, `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "application/json",
			`{"model":"claude","usage":{"input_tokens":3,"output_tokens":4}}`},
		{"/tt/v1/me", "Bearer " + key, "", "", ""},
		{"/v1/embeddings?x", "bearer tt-vk_", `{"model":"e","input":[[1,2]]}`, "application/json", `{}`},
		{"/v1/responses", "", `{"model":"o","input":"x","max_output_tokens":1}`, "text/event-stream", "event: response.completed\ndata: {}\n\n"},
	} {
		f.Add(s.path, s.auth, []byte(s.body), uint8(0x84), s.ctype, []byte(s.resp), uint8(0x84))
	}
	cfg := `{"governance":{"enabled":true,"tenants":[{"org":"acme","teams":["ml"],"users":{"ml":["dev1"]}}],"limits":[
		{"id":"g_rpm","attach":{"node":"__global"},"type":"rpm","amount":60000,"period":"1s","algorithm":"sliding_window"},
		{"id":"u_conc","attach":{"level":"user"},"type":"concurrency","amount":1000},
		{"id":"t_tpm","attach":{"level":"team"},"type":"tpm","amount":100000000,"period":"1m","match":{"model":"gpt-*"}},
		{"id":"o_budget","attach":{"level":"org"},"type":"budget_usd","amount_usd":1000,"period":"month"}]},
		"keys":[{"kid":"vk_FEKZdMs2UQRi","sha256":"` + vkey.Hash(key) + `","owner":"org:acme/team:ml/user:dev1","scopes":{}}],
		"accountant":{"cluster":"a"},"max_body_bytes":65536}`
	store := newMemStore()
	clock := &manualClock{t: nativeT0}
	e := testEngines(f, 1, store, clock, cfg)[0]
	e.host.Caller = &fakeCaller{}
	e.host.Log = func(LogLevel, string) {}
	f.Fuzz(func(t *testing.T, path, auth string, body []byte, split uint8, ctype string, resp []byte, rsplit uint8) {
		defer clock.Advance(2 * time.Minute)
		s := e.NewStream()
		v := e.RequestHeaders(s, &RequestHead{Method: "POST", Path: path, Authorization: auth, EndOfStream: len(body) == 0})
		if v.Action == ActContinue && len(body) > 0 {
			buffered := 0
			chunks := splitIn3(body, split)
			for i, c := range chunks {
				buffered += len(c)
				v = e.RequestBody(s, buffered, i == len(chunks)-1, bytesBody(body[:buffered]))
				if v.Action != ActPause {
					break
				}
			}
		}
		if v.Action != ActReply && v.Reply == nil {
			h := e.ResponseHeaders(s, 200, ctype, "")
			if h.WantBody {
				chunks := splitIn3(resp, rsplit)
				for i, c := range chunks {
					out, _ := e.ResponseBody(s, c, i == len(chunks)-1)
					if strings.Contains(ctype, "event-stream") && len(out) > len(c)+len(resp) {
						t.Fatalf("a %d-byte chunk became %d bytes", len(c), len(out))
					}
				}
			}
		}
		e.Done(s)
		e.Release(s)
		if n := e.cells.holding(); n != 0 {
			t.Fatalf("%d gauges still hold leases after the request settled", n)
		}
		e.Tick()
	})
}

// splitIn3 cuts b at two points chosen by the nibbles of at.
func splitIn3(b []byte, at uint8) [][]byte {
	n := len(b)
	x, y := int(at&0x0f)*n/16, int(at>>4)*n/16
	if x > y {
		x, y = y, x
	}
	out := make([][]byte, 0, 3)
	for _, c := range [][]byte{b[:x], b[x:y], b[y:]} {
		if len(c) > 0 {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = append(out, nil)
	}
	return out
}
