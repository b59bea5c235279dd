package filter_test

import (
	"encoding/json"
	"testing"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestMeAnonymous: with require_key off, traffic without a key is served
// on the chain [__global]; /tt/v1/me answers it with that chain and the
// caps pinned at __global, not a 401 saying a key is required. With
// require_key on it is the 401.
func TestMeAnonymous(t *testing.T) {
	limits := `{"id":"global_rpm","attach":{"node":"__global"},"type":"rpm","amount":5,"period":"1m"},` + limTeamRPM
	r := newRig(t, rigOptions{governance: gov(limits, `,"require_key":false`), keys: []testKey{dev1Key}})
	mustStatus(t, r.chat(testKey{}, chatGermany), 200)
	resp := r.me(testKey{})
	mustStatus(t, resp, 200)
	var doc struct {
		KID    string           `json:"kid"`
		Node   string           `json:"node"`
		Chain  []string         `json:"chain"`
		Limits []map[string]any `json:"limits"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		t.Fatalf("%v: %s", err, resp.Body)
	}
	if doc.KID != "" || doc.Node != "__global" || len(doc.Chain) != 1 || doc.Chain[0] != "__global" {
		t.Errorf("anonymous /tt/v1/me: %s", resp.Body)
	}
	if len(doc.Limits) != 1 || doc.Limits[0]["limit_id"] != "global_rpm" || doc.Limits[0]["observed"] != 1.0 {
		t.Errorf("anonymous /tt/v1/me limits: want global_rpm alone with one arrival: %s", resp.Body)
	}

	strict := newRig(t, rigOptions{governance: gov(limits, `,"require_key":true`), keys: []testKey{dev1Key}})
	mustStatus(t, strict.me(testKey{}), 401)
}

// TestMeRedisSuspended: an rpm limit on store: redis is answered by the
// replica-local limiter, and every row lists it as suspended; /tt/v1/me
// says so too.
func TestMeRedisSuspended(t *testing.T) {
	limits := `{"id":"fleet_rpm","attach":{"level":"team"},"type":"rpm","amount":5,"period":"1m","store":"redis"},` + limTeamRPM
	r := newRig(t, rigOptions{governance: gov(limits, `,"require_key":true,"shared_state":{"redis":{"addr":"127.0.0.1:6379"}}`), keys: []testKey{dev1Key}})
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	if got := r.meLimit(dev1Key, "fleet_rpm"); got["suspended"] != true || got["observed"] != 1.0 {
		t.Errorf("fleet_rpm on /tt/v1/me: %v, want suspended with one arrival", got)
	}
	if got := r.meLimit(dev1Key, "team_rpm"); got["suspended"] != false {
		t.Errorf("team_rpm on /tt/v1/me: %v, want not suspended", got)
	}
}

// orgBudgetRig runs limOrgBudget, org_monthly_budget, with an accountant;
// dev1Key may call.
func orgBudgetRig(t *testing.T) *rig { return accountantRig(t, limOrgBudget) }

// orgMonth is an entry of the snapshot for org_monthly_budget's counter
// this month: the counter itself (suffix "") or one of its companions.
func orgMonth(suffix string, v int64) syncwire.Entry {
	return syncwire.Entry{ID: "org_monthly_budget|budget_usd|org:acme||month|" + suffix, PeriodStart: monthStart(), Value: v}
}

// TestMeUnpriced: a budget whose counter has UNPRICED rows beside it (the
// snapshot's #unpriced companion entry) shows its dollar figures as
// incomplete on /tt/v1/me; without one they are not.
func TestMeUnpriced(t *testing.T) {
	r := orgBudgetRig(t)
	r.acct.setSnapshot("s1", orgMonth("", 1))
	r.sync()
	if got := r.meLimit(dev1Key, "org_monthly_budget")["observed_usd"].(map[string]any); got["unpriced"] != false || got["usd"] != 0.000000001 {
		t.Errorf("observed_usd without unpriced rows: %v", got)
	}
	r.acct.setSnapshot("s2", orgMonth("", 1), orgMonth(syncwire.UnpricedSuffix, 2))
	r.sync()
	got := r.meLimit(dev1Key, "org_monthly_budget")
	for _, f := range []string{"observed_usd", "remaining_usd"} {
		if u := got[f].(map[string]any); u["unpriced"] != true {
			t.Errorf("%s with two unpriced rows: %v", f, u)
		}
	}
	if u := got["limit_usd"].(map[string]any); u["unpriced"] != false {
		t.Errorf("limit_usd: %v", u)
	}
}

// TestMeMatchedLimits: limits narrowed by match show their real counters
// on /tt/v1/me: one narrowed to an endpoint or provider counts under that
// value; one counted per model shows its fullest model's counter, or the
// model the caller names with ?model=.
func TestMeMatchedLimits(t *testing.T) {
	limits := `{"id":"chat_rpm","attach":{"level":"user"},"type":"rpm","amount":100,"period":"1m","match":{"endpoint":"/v1/chat/completions"}},` +
		`{"id":"claude_tokens","attach":{"level":"team"},"type":"quota_tokens","amount":1000,"period":"day","match":{"model":"claude-3-*"}},` +
		`{"id":"openai_requests","attach":{"level":"team"},"type":"quota_requests","amount":50,"period":"day","match":{"provider":"openai"}}`
	r := accountantRig(t, limits)
	team := "org:acme/team:ml"
	r.acct.setSnapshot("s1",
		syncwire.Entry{ID: "claude_tokens|quota_tokens|" + team + "|model=claude-3-5-haiku|day|", PeriodStart: dayStart(), Value: 1111},
		syncwire.Entry{ID: "claude_tokens|quota_tokens|" + team + "|model=claude-3-opus|day|", PeriodStart: dayStart(), Value: 40},
		syncwire.Entry{ID: "openai_requests|quota_requests|" + team + "|provider=openai|day|", PeriodStart: dayStart(), Value: 7})
	r.sync()
	for i := 0; i < 3; i++ {
		mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	}
	if got := r.meLimit(dev1Key, "chat_rpm"); got["observed"] != 3.0 {
		t.Errorf("chat_rpm: %v, want observed 3", got)
	}
	if got := r.meLimit(dev1Key, "openai_requests"); got["observed"] != 7.0 || got["remaining"] != 43.0 {
		t.Errorf("openai_requests: %v, want observed 7", got)
	}
	if got := r.meLimit(dev1Key, "claude_tokens"); got["observed"] != 1111.0 || got["remaining"] != 0.0 {
		t.Errorf("claude_tokens without a model: %v, want its fullest model's 1111", got)
	}
	resp := r.do(req{method: "GET", path: "/tt/v1/me?model=claude-3-opus", key: dev1Key})
	mustStatus(t, resp, 200)
	var doc struct {
		Limits []map[string]any `json:"limits"`
	}
	json.Unmarshal(resp.Body, &doc)
	found := false
	for _, l := range doc.Limits {
		if l["limit_id"] == "claude_tokens" {
			found = true
			if l["observed"] != 40.0 || l["remaining"] != 960.0 {
				t.Errorf("claude_tokens for claude-3-opus: %v, want observed 40", l)
			}
		}
	}
	if !found {
		t.Errorf("/tt/v1/me?model=claude-3-opus lists no claude_tokens: %s", resp.Body)
	}
}
