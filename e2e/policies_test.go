package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/internal/devserver"
)

// policyTenants is the tree of the policy tests' configs.
const policyTenants = `governance:
  enabled: true
  require_key: true
  tenants:
    - org: acme
      teams: [ml, search]
      users: { ml: [dev1, dev2] }
`

// startPolicies starts dev on a config of policyTenants and limits (YAML
// list items, indented under governance.limits), with extra lines of the
// governance block before them.
func startPolicies(t *testing.T, extra, limits string) *devserver.Server {
	t.Helper()
	cfg := policyTenants + extra + "  limits:\n" + limits
	path := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return startDev(t, path, "")
}

// reply is one gateway answer as the policy tests read it.
type reply struct {
	status int
	header http.Header
	body   string
}

func (r reply) get(path string) gjson.Result { return gjson.Get(r.body, path) }

// gw sends a chat completions request with key and headers (name, value
// pairs) to the gateway.
func gw(ctx context.Context, t *testing.T, s *devserver.Server, key, body string, headers ...string) reply {
	t.Helper()
	return send(ctx, t, s, http.MethodPost, "/v1/chat/completions", key, body, headers...)
}

func send(ctx context.Context, t *testing.T, s *devserver.Server, method, path, key, body string, headers ...string) reply {
	t.Helper()
	return httpDo(ctx, t, method, s.URL()+path, key, body, headers...)
}

// httpDo sends one request with the bearer token key and headers (name,
// value pairs), and reads the whole answer.
func httpDo(ctx context.Context, t *testing.T, method, url, key, body string, headers ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func chatJSON(model, content string, extra ...string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"` + content + `"}]` + strings.Join(extra, "") + `}`
}

// TestPolicyPerModelRate: through dev, an rpm and a concurrency limit
// matched by model bind per model at the second gate, and /tt/v1/me and
// the limits API say so.
func TestPolicyPerModelRate(t *testing.T) {
	ctx := testContext(t)
	s := startPolicies(t, "", `    - { id: gpt4o_rpm, attach: { level: key }, type: rpm, amount: 2, period: 1m, match: { model: gpt-4o } }
    - { id: model_inflight, attach: { level: user }, type: concurrency, amount: 1, match: { model: "claude-*" } }
`)
	key := mint(ctx, t, s, dev1)
	for i := 0; i < 2; i++ {
		if r := gw(ctx, t, s, key, chatJSON("gpt-4o", "hi")); r.status != 200 {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	r := gw(ctx, t, s, key, chatJSON("gpt-4o", "hi"))
	if r.status != 429 || r.get("error.refused_by.limit_id").String() != "gpt4o_rpm" {
		t.Fatalf("third gpt-4o call: %d %s", r.status, r.body)
	}
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "hi")); r.status != 200 {
		t.Fatalf("another model: %d %s", r.status, r.body)
	}
	// Concurrency by model: one claude call held by the stub, the next
	// refused, another model served meanwhile.
	held := make(chan reply)
	go func() {
		held <- gw(ctx, t, s, key, chatJSON("claude-3-5-haiku-latest", "hi"), "X-Stub-Delay-Ms", "1500")
	}()
	eventually(ctx, t, "the held call's lease", func() (bool, string) {
		me := send(ctx, t, s, http.MethodGet, "/tt/v1/me?model=claude-3-5-haiku-latest", key, "")
		row := gjson.Get(me.body, `limits.#(limit_id=="model_inflight")`)
		return row.Get("observed").Int() == 1, row.Raw
	})
	if r := gw(ctx, t, s, key, chatJSON("claude-3-5-haiku-latest", "hi")); r.status != 429 || r.get("error.type").String() != "concurrency_exceeded" {
		t.Errorf("second claude call: %d %s", r.status, r.body)
	}
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "hi")); r.status != 200 {
		t.Errorf("another model while held: %d %s", r.status, r.body)
	}
	if r := <-held; r.status != 200 {
		t.Errorf("the held call: %d %s", r.status, r.body)
	}
	me := send(ctx, t, s, http.MethodGet, "/tt/v1/me", key, "")
	if got := gjson.Get(me.body, `limits.#(limit_id=="gpt4o_rpm").evaluated_at`).String(); got != "request_body" {
		t.Errorf("/tt/v1/me: evaluated_at %q: %s", got, me.body)
	}
	lims := sendAccountant(ctx, t, s, "/tt/api/v1/governance/limits")
	if got := gjson.Get(lims.body, `definitions.#(limit_id=="model_inflight").evaluated_at`).String(); got != "request_body" {
		t.Errorf("limits API: evaluated_at %q: %s", got, lims.body)
	}
}

// sendAccountant GETs path from the accountant with the admin token.
func sendAccountant(ctx context.Context, t *testing.T, s *devserver.Server, path string) reply {
	t.Helper()
	return httpDo(ctx, t, http.MethodGet, s.AccountantURL()+path, "e2e-admin-token", "")
}

// TestPolicyShadowNeverPaces: through dev, the rate headers of a served
// call name the enforcing limit, not a tighter shadow one.
func TestPolicyShadowNeverPaces(t *testing.T) {
	ctx := testContext(t)
	s := startPolicies(t, "", `    - { id: shadow_rpm, attach: { level: user }, type: rpm, amount: 1, period: 1m, posture: { mode: shadow } }
    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 50, period: 1m }
`)
	key := mint(ctx, t, s, dev1)
	for i := 0; i < 3; i++ {
		r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "hi", `,"max_tokens":5`))
		if r.status != 200 {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
		if got := r.header.Get("Ratelimit-Policy"); got != `"team_rpm";q=50;w=60` {
			t.Errorf("call %d: Ratelimit-Policy %q", i, got)
		}
		if got := r.header.Get("X-Ratelimit-Remaining-Requests"); got != "4"+string(rune('9'-i)) {
			t.Errorf("call %d: X-Ratelimit-Remaining-Requests %q", i, got)
		}
	}
}
