package filter

import (
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// tpmEngine is one native engine with one key under a team tpm limit too
// large to refuse anything, and a fake accountant.
func tpmEngine(t *testing.T) (key string, e *Engine) {
	key = "tt-vk_FEKZdMs2UQRi-3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4oP"
	cfg := `{"governance":{"enabled":true,"tenants":[{"org":"acme","teams":["ml"],"users":{"ml":["dev1"]}}],"limits":[
		{"id":"t_tpm","attach":{"level":"team"},"type":"tpm","amount":100000000,"period":"1m"}]},
		"keys":[{"kid":"vk_FEKZdMs2UQRi","sha256":"` + vkey.Hash(key) + `","owner":"org:acme/team:ml/user:dev1","scopes":{}}],
		"accountant":{"cluster":"a"}}`
	e = testEngines(t, 1, newMemStore(), &manualClock{t: nativeT0}, cfg)[0]
	e.host.Caller = &fakeCaller{}
	return key, e
}

// settleRow ends s and returns the row it queued.
func settleRow(t *testing.T, e *Engine, s *Stream) ledger.Row {
	t.Helper()
	e.Done(s)
	e.Release(s)
	rows, err := ledger.ParseJSONL(e.rows.data[e.rows.start(len(e.rows.ends)-1):], nil)
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %v %v", rows, err)
	}
	return rows[0]
}

// TestImplausibleUsageIsClamped: usage past what the request could have
// produced (input past the model's context bound, output past its output
// maximum times its choices, a total past both) is held to the bound,
// marked estimated and flagged on the row, counted, and logged naming the
// upstream; usage within it is kept as reported, and a total short of
// input + output is mended.
func TestImplausibleUsageIsClamped(t *testing.T) {
	key, e := tpmEngine(t)
	var logs []string
	e.host.Log = func(_ LogLevel, msg string) { logs = append(logs, msg) }
	e.host.Upstream = func() string { return "10.1.2.3:443" }
	metrics := e.host.Metrics.(*countMetrics)
	const chat = `{"model":"gpt-4o","max_tokens":100,"n":2,"messages":[{"role":"user","content":"hi"}]}`
	const msgs = `{"model":"claude-3-5-haiku-latest","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	for i, c := range []struct {
		path, body, usage string
		want              ledger.Usage
		est               ledger.Estimated
		clamped           bool
	}{
		{"/v1/chat/completions", chat, `{"prompt_tokens":1e12,"completion_tokens":5,"total_tokens":1e12}`,
			ledger.Usage{Input: 256_000, Output: 5, Total: 256_005}, ledger.Estimated{Input: true}, true},
		{"/v1/chat/completions", chat, `{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807}`,
			ledger.Usage{Input: 256_000, Output: 200, Total: 256_200}, ledger.Estimated{Input: true, Output: true}, true},
		{"/v1/chat/completions", chat, `{"prompt_tokens":1e308,"completion_tokens":201,"prompt_tokens_details":{"cached_tokens":1e308}}`,
			ledger.Usage{Input: 256_000, Output: 200, CachedInput: 256_000, Total: 256_200}, ledger.Estimated{Input: true, Output: true}, true},
		{"/v1/chat/completions", chat, `{"prompt_tokens":10,"completion_tokens":200,"total_tokens":1000000000}`,
			ledger.Usage{Input: 10, Output: 200, Total: 210}, ledger.Estimated{}, true},
		{"/v1/chat/completions", chat, `{"prompt_tokens":100000,"completion_tokens":200,"total_tokens":100200}`,
			ledger.Usage{Input: 100_000, Output: 200, Total: 100_200}, ledger.Estimated{}, false},
		{"/v1/chat/completions", chat, `{"prompt_tokens":10,"completion_tokens":20,"total_tokens":1}`,
			ledger.Usage{Input: 10, Output: 20, Total: 30}, ledger.Estimated{}, false},
		{"/v1/messages", msgs, `{"input_tokens":10,"cache_read_input_tokens":1e15,"output_tokens":51}`,
			ledger.Usage{Input: 2_000_000, Output: 50, CachedInput: 2_000_000, Total: 2_000_050}, ledger.Estimated{Input: true, Output: true}, true},
	} {
		before := metrics.get(MetricUsageClamped)
		logs = logs[:0]
		s := e.NewStream()
		v := e.RequestHeaders(s, &RequestHead{Method: "POST", Path: c.path, Authorization: "Bearer " + key, Authority: "gw.example"})
		if v.Action == ActContinue {
			v = e.RequestBody(s, len(c.body), true, bytesBody(c.body))
		}
		if v.Action != ActContinue {
			t.Fatalf("step %d: refused: %s", i, v.Reply.Body)
		}
		e.ResponseHeaders(s, 200, "application/json", "")
		e.ResponseBody(s, []byte(`{"model":"m","usage":`+c.usage+`}`), true)
		r := settleRow(t, e, s)
		if r.Usage != c.want || r.Estimated != c.est || r.UsageClamped != c.clamped {
			t.Errorf("step %d: usage %+v estimated %+v clamped %v\nwant  %+v estimated %+v clamped %v", i, r.Usage, r.Estimated, r.UsageClamped, c.want, c.est, c.clamped)
		}
		counted := metrics.get(MetricUsageClamped) - before
		logged := strings.Join(logs, "\n")
		if c.clamped && (counted != 1 || !strings.Contains(logged, "the upstream 10.1.2.3:443") || !strings.Contains(logged, `authority "gw.example"`)) {
			t.Errorf("step %d: clamped but counted %d, logged %q", i, counted, logged)
		}
		if !c.clamped && (counted != 0 || strings.Contains(logged, "usage_clamped")) {
			t.Errorf("step %d: not clamped but counted %d, logged %q", i, counted, logged)
		}
	}
}
