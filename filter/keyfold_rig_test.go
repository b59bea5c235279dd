package filter_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// goJSONUpstream answers chat completions as an upstream that decodes
// bodies with Go's encoding/json (Ollama, many self-hosted servers): it
// matches member names without regard to case, and generates as many
// tokens as the max_tokens it read.
type goJSONUpstream struct{ calls atomic.Int64 }

func (u *goJSONUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.calls.Add(1)
	var req struct {
		Model     string `json:"model"`
		MaxTokens *int64 `json:"max_tokens"`
		Messages  []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	out := int64(20)
	if req.MaxTokens != nil {
		out = *req.MaxTokens
	}
	in := 0
	for _, m := range req.Messages {
		in += (len(m.Content) + 3) / 4
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"model":%q,"choices":[{"message":{"role":"assistant","content":"..."}}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, req.Model, in, out, int64(in)+out)
}

// TestFoldedKeysNeverReachAGoJSONUpstream: "MAX_TOKENS", "max_to\u212Aens"
// (the Kelvin sign) and "MODEL" beside the governed keys are read by an
// encoding/json upstream as max_tokens and model: 16,000 tokens served on
// a call the gateway governed (and charged) as 5. Each is refused 400
// naming the key, and never reaches the upstream; the same call spelt once
// is served and charged what the upstream generated.
func TestFoldedKeysNeverReachAGoJSONUpstream(t *testing.T) {
	up := &goJSONUpstream{}
	r := newRig(t, rigOptions{governance: gov(`{"id":"team_tpm","attach":{"level":"team"},"type":"tpm","amount":100000000,"period":"1m"}`),
		keys: []testKey{dev1Key}, accountant: true, upstream: up, workers: 1})
	const msgs = `"messages":[{"role":"user","content":"What is the capital of Germany?"}]`
	for i, c := range []struct{ body, key string }{
		{`{"model":"gpt-4o-mini","max_tokens":5,"MAX_TOKENS":16000,` + msgs + `}`, "MAX_TOKENS"},
		{`{"model":"gpt-4o-mini","max_tokens":5,"max_to\u212Aens":16000,` + msgs + `}`, `max_to\u212aens`},
		{`{"model":"gpt-4o-mini","max_tokens":5,` + msgs + `,"max_to` + "\u212A" + `ens":16000}`, `max_to\u212aens`},
		{`{"model":"gpt-4o-mini","MODEL":"gpt-4o","max_tokens":5,` + msgs + `}`, "MODEL"},
	} {
		resp := r.chat(dev1Key, c.body)
		if resp.Status != 400 || !strings.Contains(string(resp.Body), `the key \"`+strings.ReplaceAll(c.key, `\`, `\\`)+`\"`) {
			t.Errorf("step %d: %d %s; want a 400 naming %s", i, resp.Status, resp.Body, c.key)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
	resp := r.chat(dev1Key, `{"model":"gpt-4o-mini","max_tokens":5,`+msgs+`}`)
	mustStatus(t, resp, 200)
	r.step(time.Second)
	row, ok := r.acct.row(resp.Headers.Get("X-Tt-Request-Id"))
	if !ok || row.Usage.Output != 5 || row.UsageClamped {
		t.Fatalf("row %+v (found %v); want 5 output tokens as served", row, ok)
	}
}
