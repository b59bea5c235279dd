package devserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/testkit"
)

// TestDebugEndpointsTakeOnlyTheAdminToken: the guest profile and Go's
// profiles answer the admin token, and refuse no token, the internal
// token and a wrong one; the guest profile counts the request just served
// under its export.
func TestDebugEndpointsTakeOnlyTheAdminToken(t *testing.T) {
	s := start(t, Options{InternalToken: "test-internal-token"})
	ctx := testContext(t)
	k := mintKey(ctx, t, s, "org:acme/team:ml/user:dev1")
	body := `{"model":"gpt-4o-mini","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+k.Key)
	resp, _ := testkit.Send(t, req)
	if resp.StatusCode != 200 {
		t.Fatalf("chat call: %d", resp.StatusCode)
	}
	get := func(path, token string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.AccountantURL()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, b := testkit.Send(t, req)
		return resp.StatusCode, b
	}
	for _, path := range []string{GuestProfilePath, "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		for _, token := range []string{"", "test-internal-token", "not-a-token"} {
			if code, b := get(path, token); code != 401 {
				t.Errorf("%s with token %q: %d %s, want 401", path, token, code, b)
			}
		}
		if code, b := get(path, "test-admin-token"); code != 200 {
			t.Errorf("%s with the admin token: %d %s", path, code, b)
		}
	}
	code, b := get(GuestProfilePath, "test-admin-token")
	var p guestProfile
	if err := json.Unmarshal(b, &p); code != 200 || err != nil {
		t.Fatalf("guest profile: %d %v: %s", code, err, b)
	}
	for _, e := range p.Exports {
		if e.Export == "proxy_on_request_headers" && e.Calls >= 1 {
			return
		}
	}
	t.Fatalf("the guest profile counts no request-header call after a served request: %s", b)
}
