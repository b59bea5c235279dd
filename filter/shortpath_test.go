package filter_test

import (
	"strings"
	"testing"
)

// TestPathOneV1ShortSaysSo: a client whose base URL lacks /v1
// (@ai-sdk/anthropic given the gateway's bare address calls /messages) is
// refused naming the path with /v1 and what to change; another path a key
// may not pass through is refused as before.
func TestPathOneV1ShortSaysSo(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamRPM, `,"require_key":true`), keys: []testKey{dev1Key}})
	for _, c := range []struct{ method, path, v1 string }{
		{"POST", "/messages", "/v1/messages"},
		{"POST", "/chat/completions", "/v1/chat/completions"},
		{"POST", "/messages/count_tokens", "/v1/messages/count_tokens"},
		{"GET", "/models", "/v1/models"},
	} {
		resp := r.do(req{method: c.method, path: c.path, key: dev1Key, body: messagesBody("claude-3-5-haiku-latest", "hi")})
		want := `may not call \"` + c.path + `\": it is not a governed provider endpoint and the key's allow_passthrough scope is false; call a governed endpoint or use a key that allows passthrough; \"` + c.v1 + `\" is a provider endpoint: the client's base URL is one /v1 short`
		if resp.Status != 403 || !strings.Contains(string(resp.Body), want) {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.Status, resp.Body)
		}
	}
	resp := r.do(req{method: "POST", path: "/v1/files", key: dev1Key, body: `{}`})
	if resp.Status != 403 || strings.Contains(string(resp.Body), "one /v1 short") {
		t.Errorf("POST /v1/files: %d %s", resp.Status, resp.Body)
	}
}
