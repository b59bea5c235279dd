package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/internal/devserver"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// dev1Tenants is a tree of one user, dev1 of team ml, whose calls need a
// key.
const dev1Tenants = `governance:
  enabled: true
  require_key: true
  tenants:
    - org: acme
      teams: [ml]
      users: { ml: [dev1] }
`

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
	r, err := doHTTP(ctx, method, url, key, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// meRow is limit's entry of /tt/v1/me at path (which may carry a query)
// asked with key and headers (name, value pairs).
func meRow(ctx context.Context, t *testing.T, s *devserver.Server, path, key, limit string, headers ...string) gjson.Result {
	t.Helper()
	me := send(ctx, t, s, http.MethodGet, path, key, "", headers...)
	return gjson.Get(me.body, `limits.#(limit_id=="`+limit+`")`)
}

// doHTTP is httpDo for goroutines other than the test's: the error is
// returned.
func doHTTP(ctx context.Context, method, url, key, body string, headers ...string) (reply, error) {
	resp, b, err := roundTrip(ctx, method, url, body, append([]string{"Authorization", "Bearer " + key}, headers...)...)
	if resp == nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// roundTrip sends one request of method to url with body as JSON (none if
// "") and headers (name, value pairs), and reads the whole answer: the
// response is nil when there is none, and the error also says when the
// answer could not be read to its end.
func roundTrip(ctx context.Context, method, url, body string, headers ...string) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
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
		row := meRow(ctx, t, s, "/tt/v1/me?model=claude-3-5-haiku-latest", key, "model_inflight")
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

// TestPolicyCustomersAndTags: through dev, a SaaS backend with one key
// names its customers and tags: the headers never reach the upstream,
// the per-customer budget counts each customer apart (from the header or
// the body's user field), the tag budget counts the tagged calls, the
// spend report groups by customer and tag, /tt/v1/me shows the caller's
// customer, and a key restricted to a customer pattern serves no other.
func TestPolicyCustomersAndTags(t *testing.T) {
	ctx := testContext(t)
	s := startPolicies(t, "", `    - { id: customer_daily, attach: { level: user }, type: quota_requests, amount: 2, period: day, match: { customer: "*" } }
    - { id: batch_daily, attach: { level: team }, type: quota_requests, amount: 3, period: day, match: { tag: batch } }
`)
	key := mint(ctx, t, s, dev1)
	for i, c := range []struct{ customer, body string }{{"cus_a", chatJSON("gpt-4o-mini", "hi")}, {"", chatJSON("gpt-4o-mini", "hi", `,"user":"cus_a"`)}} {
		hs := []string{"X-Tt-Tags", "batch,eu"}
		if c.customer != "" {
			hs = append(hs, "X-Tt-Customer", c.customer)
		}
		if r := gw(ctx, t, s, key, c.body, hs...); r.status != 200 {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	// cus_a has used its two: once the accountant has folded them, the
	// third is refused; cus_b is not.
	eventually(ctx, t, "cus_a's counter at 2", func() (bool, string) {
		row := meRow(ctx, t, s, "/tt/v1/me", key, "customer_daily", "X-Tt-Customer", "cus_a")
		return row.Get("observed").Int() == 2 && row.Get("customer").String() == "cus_a", row.Raw
	})
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "hi"), "X-Tt-Customer", "cus_a"); r.status != 429 || r.get("error.refused_by.limit_id").String() != "customer_daily" {
		t.Errorf("cus_a's third call: %d %s", r.status, r.body)
	}
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "hi"), "X-Tt-Customer", "cus_b", "X-Tt-Tags", "batch"); r.status != 200 {
		t.Errorf("cus_b: %d %s", r.status, r.body)
	}
	// Three batch calls: the tag's quota is spent for everyone.
	waitObserved(ctx, t, s, key, "batch_daily", 3)
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "hi"), "X-Tt-Customer", "cus_c", "X-Tt-Tags", "batch"); r.status != 429 || r.get("error.refused_by.limit_id").String() != "batch_daily" {
		t.Errorf("a fourth batch call: %d %s", r.status, r.body)
	}
	// A bad customer id is a 400 naming the bound.
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "hi"), "X-Tt-Customer", "John Doe"); r.status != 400 || !strings.Contains(r.get("error.message").String(), "outside the charset of a customer") {
		t.Errorf("bad customer: %d %s", r.status, r.body)
	}
	// The spend report groups by customer and by tag.
	eventually(ctx, t, "the report by customer", func() (bool, string) {
		rep := sendAccountant(ctx, t, s, "/tt/api/v1/spend?group_by=customer")
		a := gjson.Get(rep.body, `groups.#(key.customer=="cus_a").total.requests`).Int()
		b := gjson.Get(rep.body, `groups.#(key.customer=="cus_b").total.requests`).Int()
		return a == 3 && b == 1, rep.body
	})
	rep := sendAccountant(ctx, t, s, "/tt/api/v1/spend?group_by=tag")
	if n := gjson.Get(rep.body, `groups.#(key.tag=="batch,eu").total.requests`).Int(); n != 2 {
		t.Errorf("group_by=tag: batch,eu has %d requests: %s", n, rep.body)
	}
	// Every row carrying batch: four calls, the refused one included.
	eventually(ctx, t, "the report of tag=batch", func() (bool, string) {
		rep := sendAccountant(ctx, t, s, "/tt/api/v1/spend?tag=batch")
		return gjson.Get(rep.body, "total.requests").Int() == 4, rep.body
	})
	// A key restricted to acme-* customers.
	scoped, err := s.MintKey(ctx, dev1, vkey.Scopes{Customers: []string{"acme-*"}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the scoped key at the gateway", func() (bool, string) {
		r := gw(ctx, t, s, scoped.Key, chatJSON("gpt-4o-mini", "hi"), "X-Tt-Customer", "acme-1")
		return r.status == 200, r.body
	})
	if r := gw(ctx, t, s, scoped.Key, chatJSON("gpt-4o-mini", "hi"), "X-Tt-Customer", "globex"); r.status != 403 {
		t.Errorf("scoped key, another customer: %d %s", r.status, r.body)
	}
}

// TestPolicyFitAndMetric: through dev, "2,000 tokens an hour per user"
// (tpm with fit) serves a call that sets no max_tokens with its output
// lowered to what the window holds, and an output-token quota with fit
// counts output only and lowers the next call to what the day holds.
func TestPolicyFitAndMetric(t *testing.T) {
	ctx := testContext(t)
	s := startPolicies(t, "", `    - { id: user_tph, attach: { level: user }, type: tpm, amount: 2000, period: 1h, fit: true }
    - { id: output_daily, attach: { level: user }, type: quota_tokens, amount: 600, period: day, metric: output, fit: true, min_output: 50 }
`)
	key := mint(ctx, t, s, dev1)
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "Say hi")); r.status != 200 {
		t.Fatalf("first call: %d %s", r.status, r.body)
	}
	sent := s.Stub().Requests()
	if got := gjson.GetBytes(sent[len(sent)-1].Body, "max_completion_tokens").Int(); got != 600 {
		// The quota holds 600 output tokens, less than the 1,998 the
		// window would: the tighter one lowers it.
		t.Errorf("max_completion_tokens %d, want 600: %s", got, sent[len(sent)-1].Body)
	}
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "Say hi"), "X-Stub-Completion-Tokens", "500"); r.status != 200 {
		t.Fatalf("second call: %d %s", r.status, r.body)
	}
	// 520 output tokens counted (20 + 500): 80 left, once folded.
	eventually(ctx, t, "output_daily at 520", func() (bool, string) {
		row := meRow(ctx, t, s, "/tt/v1/me", key, "output_daily")
		return row.Get("observed").Int() == 520 && row.Get("metric").String() == "output", row.Raw
	})
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "Say hi")); r.status != 200 {
		t.Fatalf("third call: %d %s", r.status, r.body)
	}
	sent = s.Stub().Requests()
	if got := gjson.GetBytes(sent[len(sent)-1].Body, "max_completion_tokens").Int(); got != 80 {
		t.Errorf("max_completion_tokens %d, want the 80 left", got)
	}
	waitObserved(ctx, t, s, key, "output_daily", 540)
	// 60 left, over min_output: served; then 40, under it: refused.
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "Say hi")); r.status != 200 {
		t.Fatalf("fourth call: %d %s", r.status, r.body)
	}
	waitObserved(ctx, t, s, key, "output_daily", 560)
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "Say hi")); r.status != 429 || r.get("error.type").String() != "quota_cost_unfittable" {
		t.Errorf("a call with 40 left, under min_output 50: %d %s", r.status, r.body)
	}
}

// TestPolicyPeriodsAndZones: through dev, a quarterly team budget in New
// York and a rolling 7-day quota count what is spent and refuse with the
// end of the quarter in New York, or the moment the window falls under
// its amount, as resets_at.
func TestPolicyPeriodsAndZones(t *testing.T) {
	ctx := testContext(t)
	s := startPolicies(t, "  timezone: America/New_York\n", `    - { id: team_quarter, attach: { level: team }, type: budget_usd, amount_usd: 0.00002, period: quarter }
    - { id: weekly, attach: { level: user }, type: quota_requests, amount: 2, period: 7d, timezone: UTC }
`)
	key := mint(ctx, t, s, dev1)
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "hi", `,"max_tokens":4`)); r.status != 200 {
		t.Fatalf("first call: %d %s", r.status, r.body)
	}
	var refusal reply
	eventually(ctx, t, "team_quarter refusing", func() (bool, string) {
		refusal = gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "hi", `,"max_tokens":4`))
		return refusal.status == 429, refusal.body
	})
	ny, _ := calendar.LoadZone("America/New_York")
	now := time.Now()
	want := calendar.EndIn(calendar.Quarter, now, ny).Format(time.RFC3339)
	if by := refusal.get("error.refused_by.limit_id").String(); by == "team_quarter" {
		if got := refusal.get("error.refused_by.resets_at").String(); got != want {
			t.Errorf("team_quarter resets_at %s, want the quarter's end in New York %s", got, want)
		}
	} else if by != "weekly" {
		t.Fatalf("refused by %q: %s", by, refusal.body)
	}
	row := meRow(ctx, t, s, "/tt/v1/me", key, "team_quarter")
	if row.Get("resets_at").String() != want || row.Get("timezone").String() != "America/New_York" || row.Get("period").String() != "quarter" {
		t.Errorf("/tt/v1/me team_quarter: %s (want resets_at %s)", row.Raw, want)
	}
	// The rolling week counts every served call: both are in today's
	// bucket, so it is full, and stays so for a week.
	eventually(ctx, t, "weekly at 2", func() (bool, string) {
		row := meRow(ctx, t, s, "/tt/v1/me", key, "weekly")
		return row.Get("observed").Int() >= 2, row.Raw
	})
	resets, err := time.Parse(time.RFC3339, meRow(ctx, t, s, "/tt/v1/me", key, "weekly").Get("resets_at").String())
	if err != nil || resets.Before(now.Add(6*24*time.Hour)) || resets.After(now.Add(8*24*time.Hour)) {
		t.Errorf("weekly resets_at %v (%v): want about a week on, when today's bucket slides out", resets, err)
	}
}

// TestPolicyFallback: through dev, a per-model budget with a fallback
// serves gpt-4o calls it would refuse with gpt-4o-mini (X-Tt-Fallback on
// the answer, the spend reported under the model sent), until the
// fallback model's own quota refuses too: then the budget's refusal is
// answered.
func TestPolicyFallback(t *testing.T) {
	ctx := testContext(t)
	s := startPolicies(t, "", `    - { id: gpt4o_day, attach: { level: user }, type: budget_usd, amount_usd: 0.00001, period: day, match: { model: gpt-4o }, fallback: { model: gpt-4o-mini } }
    - { id: mini_day, attach: { level: user }, type: quota_requests, amount: 2, period: day, match: { model: gpt-4o-mini } }
`)
	key := mint(ctx, t, s, dev1)
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o", "hi", `,"max_tokens":4`)); r.status != 200 || r.header.Get("X-Tt-Fallback") != "" {
		t.Fatalf("first call: %d %v %s", r.status, r.header, r.body)
	}
	eventually(ctx, t, "a gpt-4o call served by gpt-4o-mini", func() (bool, string) {
		r := gw(ctx, t, s, key, chatJSON("gpt-4o", "hi", `,"max_tokens":4`))
		return r.status == 200 && r.header.Get("X-Tt-Fallback") == "gpt4o_day;model=gpt-4o-mini" && r.get("model").String() == "gpt-4o-mini", fmt.Sprint(r.status, r.header, r.body)
	})
	var refused reply
	eventually(ctx, t, "the budget's refusal once gpt-4o-mini's quota is spent", func() (bool, string) {
		refused = gw(ctx, t, s, key, chatJSON("gpt-4o", "hi", `,"max_tokens":4`))
		return refused.status == 429, refused.body
	})
	if refused.get("error.refused_by.limit_id").String() != "gpt4o_day" || refused.get("error.type").String() != "budget_exceeded" || refused.header.Get("X-Tt-Fallback") != "" {
		t.Errorf("refusal: %v %s", refused.header, refused.body)
	}
	eventually(ctx, t, "the spend of the fallback calls under gpt-4o-mini", func() (bool, string) {
		rep := sendAccountant(ctx, t, s, "/tt/api/v1/spend?group_by=model")
		return gjson.Get(rep.body, `groups.#(key.model=="gpt-4o-mini").total.requests`).Int() >= 2, rep.body
	})
}

// TestSaaSExample serves examples/saas.yaml through dev: a customer's call
// is counted under its own customer_daily counter, /tt/v1/me shows the
// example's limits for that customer (the quarter in New York, the
// output-token quota), and a batch-tagged call counts in batch_monthly.
func TestSaaSExample(t *testing.T) {
	ctx := testContext(t)
	s := startDev(t, filepath.Join("..", "examples", "saas.yaml"), "")
	key := mint(ctx, t, s, "org:saas/team:app/user:backend")
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o-mini", "hi"), "X-Tt-Customer", "cus_1"); r.status != 200 {
		t.Fatalf("a customer's call: %d %s", r.status, r.body)
	}
	if r := gw(ctx, t, s, key, chatJSON("gpt-4o", "hi", `,"max_tokens":8`), "X-Tt-Customer", "cus_2", "X-Tt-Tags", "batch"); r.status != 200 {
		t.Fatalf("a batch call: %d %s", r.status, r.body)
	}
	ny, _ := calendar.LoadZone("America/New_York")
	eventually(ctx, t, "cus_1's counters in /tt/v1/me", func() (bool, string) {
		me := send(ctx, t, s, http.MethodGet, "/tt/v1/me", key, "", "X-Tt-Customer", "cus_1")
		cus := gjson.Get(me.body, `limits.#(limit_id=="customer_daily")`)
		q := gjson.Get(me.body, `limits.#(limit_id=="team_quarter")`)
		out := gjson.Get(me.body, `limits.#(limit_id=="output_daily")`)
		ok := cus.Get("observed_usd.usd").Float() > 0 && cus.Get("customer").String() == "cus_1" && q.Get("timezone").String() == "America/New_York" &&
			q.Get("resets_at").String() == calendar.EndIn(calendar.Quarter, time.Now(), ny).Format(time.RFC3339) &&
			out.Get("metric").String() == "output" && out.Get("observed").Int() > 0
		return ok, me.body
	})
	eventually(ctx, t, "the batch call in batch_monthly", func() (bool, string) {
		me := send(ctx, t, s, http.MethodGet, "/tt/v1/me", key, "", "X-Tt-Tags", "batch")
		return gjson.Get(me.body, `limits.#(limit_id=="batch_monthly").observed_usd.usd`).Float() > 0, me.body
	})
}
