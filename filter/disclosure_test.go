package filter_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestShadowAndSoftStillDisclose: a shadow or soft rpm or tpm limit that a
// request is over is admitted, and its served answer still advertises the
// limit (seed 002: the shadow limit "still advertised its policy"), with
// what remains (nothing for the rpm).
func TestShadowAndSoftStillDisclose(t *testing.T) {
	lims := `{"id":"shadow_rpm","attach":{"level":"team"},"type":"rpm","amount":1,"period":"1m","posture":{"mode":"shadow"}},
		{"id":"soft_tpm","attach":{"level":"user"},"type":"tpm","amount":20000,"period":"1m","posture":{"enforce":"soft"}}`
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key}})
	first := r.chat(dev1Key, chatGermany, "X-Stub-Completion-Tokens", "16384")
	mustStatus(t, first, 200)
	if got := first.Headers.Get("Ratelimit-Policy"); got != `"shadow_rpm";q=1;w=60, "soft_tpm";q=20000;w=60` {
		t.Fatalf("first request: Ratelimit-Policy %q", got)
	}
	// The second is over both: shadow_rpm would refuse it, soft_tpm's
	// window holds 16,391 + 16,384 of 20,000.
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 200)
	for h, want := range map[string]string{
		"Ratelimit-Policy":               `"shadow_rpm";q=1;w=60, "soft_tpm";q=20000;w=60`,
		"X-Ratelimit-Limit-Requests":     "1",
		"X-Ratelimit-Remaining-Requests": "0",
		"X-Ratelimit-Limit-Tokens":       "20000",
		"X-Ratelimit-Remaining-Tokens":   "3608", // 20,000 less the first call's 16,392
	} {
		if got := resp.Headers.Get(h); got != want {
			t.Errorf("admitted over shadow and soft limits: %s %q, want %q", h, got, want)
		}
	}
}

// TestMeRateTimes: an rpm or tpm row of /tt/v1/me says when the next unit
// frees (retry_after_s, 0 while some remain) and when the window is back at
// its full burst (resets_at).
func TestMeRateTimes(t *testing.T) {
	r := newRig(t, rigOptions{governance: gov(limTeamRPM+","+limTeamTPM, `,"require_key":true`), keys: []testKey{dev1Key}})
	now := r.clock.Now()
	row := r.meLimit(dev1Key, "team_rpm")
	if row["retry_after_s"] != 0.0 || row["resets_at"] != now.Format(time.RFC3339) {
		t.Errorf("an untouched rpm: %v", row)
	}
	for i := 0; i < 3; i++ {
		mustStatus(t, r.chat(dev1Key, chatGermany, "X-Stub-Completion-Tokens", "1"), 200)
	}
	// Three a minute, all three taken at one instant: the next frees in
	// one emission interval (20 s), the cell is drained a minute on.
	row = r.meLimit(dev1Key, "team_rpm")
	if row["remaining"] != 0.0 || row["retry_after_s"] != 20.0 || row["resets_at"] != now.Add(time.Minute).Format(time.RFC3339) {
		t.Errorf("team_rpm after three: %v", row)
	}
	// tpm: the three calls settled to 9 tokens each; tokens remain, so
	// none is waited for, and 27 tokens drain from a 20,000-a-minute
	// window within the next second.
	row = r.meLimit(dev1Key, "team_tpm")
	if row["observed"] != 27.0 || row["retry_after_s"] != 0.0 || row["resets_at"] != now.Add(time.Second).Format(time.RFC3339) {
		t.Errorf("team_tpm: %v", row)
	}
	r.step(5 * time.Second)
	row = r.meLimit(dev1Key, "team_rpm")
	if row["retry_after_s"] != 15.0 || row["resets_at"] != now.Add(time.Minute).Format(time.RFC3339) {
		t.Errorf("team_rpm 5 s on: %v", row)
	}
}

// TestMeEstimated: a budget's dollars are flagged estimated only when some
// of the rows folded into them carried estimated usage (the accountant's
// #estimated companion), not always.
func TestMeEstimated(t *testing.T) {
	r := orgBudgetRig(t)
	r.acct.setSnapshot("s1", orgMonth("", 12_600))
	r.sync()
	got := r.meLimit(dev1Key, "org_monthly_budget")
	for _, f := range []string{"limit_usd", "observed_usd", "remaining_usd"} {
		if u := got[f].(map[string]any); u["estimated"] != false {
			t.Errorf("%s with every row's usage reported: %v", f, u)
		}
	}
	r.acct.setSnapshot("s2", orgMonth("", 12_600), orgMonth(syncwire.EstimatedSuffix, 1))
	r.sync()
	got = r.meLimit(dev1Key, "org_monthly_budget")
	for f, want := range map[string]bool{"limit_usd": false, "observed_usd": true, "remaining_usd": true} {
		if u := got[f].(map[string]any); u["estimated"] != want {
			t.Errorf("%s with one estimated row: %v, want estimated %v", f, u, want)
		}
	}
}

// TestReserveRefusalDisclosure: a budget in reserve mode counts this
// replica's calls as it admits them, so its 429 does not claim the
// in-flight lag of the default class: approximate false on a lone replica,
// with a note saying how it counts, and no bound.
func TestReserveRefusalDisclosure(t *testing.T) {
	r := reserveRig(t)
	id := "dev1_day|budget_usd|org:acme/team:ml/user:dev1||day|"
	r.acct.setSnapshot("s1", syncwire.Entry{ID: id, PeriodStart: dayStart(), Value: 1_000_000})
	r.sync()
	resp := r.do(req{path: "/v1/chat/completions", key: dev1Key, body: chatBody("gpt-4o", germany, `,"max_tokens":20`)})
	mustStatus(t, resp, 429)
	golden(t, "budget_exceeded_reserve", render(t, resp))
	var body struct {
		Error struct {
			Enforcement map[string]any `json:"enforcement"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		t.Fatal(err)
	}
	if e := body.Error.Enforcement; e["approximate"] != false || e["bound"] != nil {
		t.Errorf("reserve-mode enforcement: %v", e)
	}
}
