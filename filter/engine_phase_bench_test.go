package filter

import (
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/vkey"
)

// devLimits are e2e/testdata/bench.yaml's limits (examples/tokentriage.yaml's
// with amounts no run reaches): what a `tokentriage dev` request passes.
var devLimits = strings.Join([]string{
	`{"id":"acme_month","attach":{"level":"org"},"type":"budget_usd","amount_usd":1000000,"period":"month"}`,
	`{"id":"ml_daily","attach":{"node":"org:acme/team:ml"},"type":"budget_usd","amount_usd":100000,"period":"day"}`,
	`{"id":"team_monthly_tokens","attach":{"level":"team"},"type":"quota_tokens","amount":1000000000000,"period":"month"}`,
	`{"id":"user_daily_requests","attach":{"level":"user"},"type":"quota_requests","amount":1000000000,"period":"day"}`,
	`{"id":"user_rpm","attach":{"level":"user"},"type":"rpm","amount":100000000,"period":"1m"}`,
	`{"id":"team_rpm","attach":{"level":"team"},"type":"rpm","amount":100000000,"period":"1m","posture":{"mode":"shadow"}}`,
	`{"id":"global_rpm","attach":{"node":"__global"},"type":"rpm","amount":100000000,"period":"1m"}`,
	`{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":100000000000,"period":"1m","match":{"model":"gpt-*"}}`,
	`{"id":"user_concurrency","attach":{"level":"user"},"type":"concurrency","amount":10000}`,
}, ",")

// devAnswer is the stub upstream's answer to devBody.
const (
	devBody   = `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"What is the capital of Germany?"}]}`
	devAnswer = `{"id":"chatcmpl-stub22irivxbs9d7t","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"This stub upstream replies with deterministic text at four bytes","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":8,"completion_tokens":16,"total_tokens":24,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_stub"}`
)

// BenchmarkDevPhases drives the Engine through a `tokentriage dev` request
// (both gates over bench.yaml's nine limits, a JSON answer, settlement and
// its ledger row) over the in-memory fakes, and reports each phase's time.
// It is the filter's own work without the wasm tax; BenchmarkFull measures
// the same request through filter.wasm.
func BenchmarkDevPhases(b *testing.B) {
	cfg := `{"governance":{"enabled":true,"require_key":true,"tenants":[{"org":"acme","teams":["ml","search"],"users":{"ml":["dev1","dev2"]}}],"limits":[` + devLimits + `]},
		"keys":[{"kid":"vk_FEKZdMs2UQRi","sha256":"` + vkey.Hash(benchKey) + `","owner":"org:acme/team:ml/user:dev1"}],"accountant":{"cluster":"a"}}`
	store := newMemStore()
	clock := &manualClock{t: nativeT0}
	e := testEngines(b, 1, store, clock, cfg)[0]
	e.host.Log = func(LogLevel, string) {}
	caller := &fakeCaller{}
	e.host.Caller = caller
	e.Tick()
	for _, call := range caller.take() {
		if strings.HasPrefix(call.path, "/tt/internal/v1/sync") {
			call.cb(200, []byte(`{"plan":{"version":"p"},"runtime":{"cursor":"db.0","reset":true},
				"snapshot":{"cursor":"s.2","reset":true,"generated_at":"2026-08-09T20:44:50Z","entries":[
				{"id":"acme_month|budget_usd|org:acme||month|","period_start":"2026-08-01T00:00:00Z","value":42},
				{"id":"ml_daily|budget_usd|org:acme/team:ml||day|","period_start":"2026-08-09T00:00:00Z","value":42}]},"replicas":1}`))
		}
	}
	e.refresh(clock.Now())
	if e.snapshotAt().IsZero() {
		b.Fatal("no snapshot")
	}
	head := RequestHead{Method: "POST", Path: "/v1/chat/completions", Authorization: "Bearer " + benchKey}
	body, answer := []byte(devBody), []byte(devAnswer)
	var phases [5]time.Duration
	one := func(timed bool) {
		t0 := time.Now()
		s := e.NewStream()
		if v := e.RequestHeaders(s, &head); v.Action != ActContinue {
			b.Fatalf("refused at gate 1: %+v", v.Reply)
		}
		t1 := time.Now()
		if v := e.RequestBody(s, len(body), true, bytesBody(body)); v.Action != ActContinue {
			b.Fatalf("refused at gate 2: %s", v.Reply.Body)
		}
		t2 := time.Now()
		e.ResponseHeaders(s, 200, "application/json", "")
		t3 := time.Now()
		e.ResponseBody(s, answer, true)
		t4 := time.Now()
		e.Done(s)
		e.Release(s)
		t5 := time.Now()
		if timed {
			phases[0] += t1.Sub(t0)
			phases[1] += t2.Sub(t1)
			phases[2] += t3.Sub(t2)
			phases[3] += t4.Sub(t3)
			phases[4] += t5.Sub(t4)
		}
		if e.rows.lag() >= batchRows {
			e.Tick() // send the batch and acknowledge it
			for _, call := range caller.take() {
				call.cb(200, []byte(`{}`))
			}
		}
	}
	one(false)
	ops0 := store.ops
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		one(true)
	}
	n := float64(b.N)
	for i, name := range []string{"gate1", "gate2", "resphead", "respbody", "settle"} {
		b.ReportMetric(float64(phases[i].Nanoseconds())/n, name+"-ns")
	}
	b.ReportMetric(float64(store.ops-ops0)/n, "shareddata/req")
}
