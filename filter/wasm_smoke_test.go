package filter_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/internal/testwasm"
	"github.com/tokentriage/tokentriage/wasmtest"
)

func TestWasmSmoke(t *testing.T) {
	clock := wasmtest.NewManualClock(time.Date(2026, 8, 10, 12, 0, 0, 0, time.UTC))
	cfg := `{"governance":{"enabled":true,"limits":[{"id":"g_rpm","attach":{"node":"__global"},"type":"rpm","amount":2,"period":"1m"}]}}`
	h, err := wasmtest.New(context.Background(), wasmtest.Config{
		Module:       testwasm.Filter(t),
		PluginConfig: []byte(cfg),
		Workers:      2,
		Clock:        clock,
		Upstream:     wasmtest.Cluster{Handler: stub.New(stub.Options{})},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i := 0; i < 3; i++ {
		resp := h.Do(wasmtest.Request{Method: "POST", Path: "/v1/chat/completions",
			Headers:    http.Header{"Content-Type": {"application/json"}},
			BodyChunks: [][]byte{[]byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What is the capital of Germany?"}]}`)}})
		t.Logf("%d: %d %v %s", i, resp.Status, resp.Headers, resp.Body)
	}
	for _, l := range h.Logs() {
		t.Log(l)
	}
}
