package filter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestFallback: a request a budget with a fallback would refuse is served
// by the fallback model (the body's model rewritten, X-Tt-Fallback on the
// answer, the row naming the limit and the model, the caller's model kept
// as asked); the fallback model's own limits are judged for it, and when
// they refuse too the original refusal is answered, as it is when the
// key's model scope does not allow the fallback model.
func TestFallback(t *testing.T) {
	lims := `{"id":"gpt4o_day","attach":{"level":"team"},"type":"budget_usd","amount_usd":1,"period":"day","match":{"model":"gpt-4o"},"fallback":{"model":"gpt-4o-mini"}},
		{"id":"mini_quota","attach":{"level":"user"},"type":"quota_requests","amount":2,"period":"day","match":{"model":"gpt-4o-mini"}}`
	scoped := newTestKey("vk_scopedscoped", "org:acme/team:ml/user:dev2").withScopes(`{"models":["gpt-4o"]}`)
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key, scoped}, accountant: true})
	spent := "gpt4o_day|budget_usd|org:acme/team:ml|model=gpt-4o|day|"
	mini := "mini_quota|quota_requests|org:acme/team:ml/user:dev1|model=gpt-4o-mini|day|"
	r.acct.setSnapshot("s1", syncwire.Entry{ID: spent, PeriodStart: dayStart(), Value: 1_000_000_000})
	r.sync()

	resp := r.chat(dev1Key, chatBody("gpt-4o", germany, `,"max_tokens":20`))
	mustStatus(t, resp, 200)
	if got := resp.Headers.Get("X-Tt-Fallback"); got != "gpt4o_day;model=gpt-4o-mini" {
		t.Errorf("X-Tt-Fallback %q: %v", got, resp.Headers)
	}
	body := r.lastBody()
	if got := gjson.Get(body, "model").String(); got != "gpt-4o-mini" || gjson.Get(body, "max_tokens").Int() != 20 || !strings.Contains(body, germany) {
		t.Errorf("the upstream saw %s", body)
	}
	if got := r.metric("tokentriage.fallback"); got != 1 {
		t.Errorf("tokentriage.fallback %d", got)
	}
	r.step(time.Second)
	rows := r.acct.ledger()
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	if row := rows[0]; row.Model != "gpt-4o" || row.Fallback == nil || row.Fallback.LimitID != "gpt4o_day" || row.Fallback.Model != "gpt-4o-mini" || row.Sent() != "gpt-4o-mini" || row.RefusedBy != nil {
		t.Errorf("row: model %q fallback %+v refused_by %+v", row.Model, row.Fallback, row.RefusedBy)
	}

	// The fallback model's own quota is judged for it: spent, the
	// original refusal is answered.
	r.acct.setSnapshot("s2", syncwire.Entry{ID: spent, PeriodStart: dayStart(), Value: 1_000_000_000},
		syncwire.Entry{ID: mini, PeriodStart: dayStart(), Value: 2})
	r.sync()
	resp = r.chat(dev1Key, chatBody("gpt-4o", germany))
	mustStatus(t, resp, 429)
	if resp.Headers.Get("X-Tt-Refused-By") != "gpt4o_day" || resp.Headers.Get("X-Tt-Fallback") != "" || !strings.Contains(string(resp.Body), `"type":"budget_exceeded"`) {
		t.Errorf("the fallback refused too: %v %s", resp.Headers, resp.Body)
	}
	// A call for the mini model itself meets its quota.
	resp = r.chat(dev1Key, chatBody("gpt-4o-mini", germany))
	if resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "mini_quota" {
		t.Errorf("gpt-4o-mini past its quota: %d %v", resp.Status, resp.Headers)
	}
	// A key whose scope allows gpt-4o only is not moved to gpt-4o-mini.
	resp = r.chat(scoped, chatBody("gpt-4o", germany))
	if resp.Status != 429 || resp.Headers.Get("X-Tt-Refused-By") != "gpt4o_day" {
		t.Errorf("a key scoped to gpt-4o: %d %v %s", resp.Status, resp.Headers, resp.Body)
	}
	if got := r.metric("tokentriage.fallback"); got != 1 {
		t.Errorf("tokentriage.fallback %d after the refusals, want 1", got)
	}
	if got := r.metric("tokentriage.refused.budget_usd"); got != 2 {
		t.Errorf("tokentriage.refused.budget_usd %d, want the 2 refusals answered", got)
	}
	r.step(time.Second)
	for _, row := range r.acct.ledger()[1:] {
		if row.Fallback != nil {
			t.Errorf("a refused request's row names a fallback: %+v", row.Fallback)
		}
	}
}
