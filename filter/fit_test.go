package filter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// lastBody is the body of the last request the stub upstream saw.
func (r *rig) lastBody() string {
	r.t.Helper()
	q := r.stub.Requests()
	if len(q) == 0 {
		r.t.Fatal("the upstream saw no request")
	}
	return string(q[len(q)-1].Body)
}

// TestTPMFit: "2,000 tokens an hour per user" compiles with fit: true and
// serves calls that set no max_tokens: each call's output maximum is
// lowered to what the window holds; a call for which less than min_output
// is left waits (rate_limited, with the wait until it fits), and one whose
// prompt alone leaves no room in a full window never fits.
func TestTPMFit(t *testing.T) {
	lim := `{"id":"user_tph","attach":{"level":"user"},"type":"tpm","amount":2000,"period":"1h","fit":true}`
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), keys: []testKey{dev1Key}})
	// 31 bytes of prompt: 7 tokens reserved for it, 1,993 left for output.
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	if got := gjson.Get(r.lastBody(), "max_completion_tokens").Int(); got != 1993 {
		t.Errorf("the first call's max_completion_tokens %d, want 1993: %s", got, r.lastBody())
	}
	// It used 28 (8 in, 20 out): 1,972 left; this one uses 1,500 more.
	mustStatus(t, r.chat(dev1Key, chatGermany, "X-Stub-Completion-Tokens", "1500"), 200)
	if got := gjson.Get(r.lastBody(), "max_completion_tokens").Int(); got != 1972-7 {
		t.Errorf("the second call's max_completion_tokens %d, want %d", got, 1972-7)
	}
	// 1,972 - 1,508 = 464 left: a call asking for 1,000 gets 457.
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany, `,"max_tokens":1000`), "X-Stub-Completion-Tokens", "300"), 200)
	if got := gjson.Get(r.lastBody(), "max_tokens").Int(); got != 457 {
		t.Errorf("max_tokens lowered to %d, want 457: %s", got, r.lastBody())
	}
	// 464 - 308 = 156 left, under 7 + 256: it waits.
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	if resp.Headers.Get("X-Tt-Refusal-Type") != "rate_limited" || resp.Headers.Get("Retry-After") == "" {
		t.Errorf("a call with less than min_output left: %v %s", resp.Headers, resp.Body)
	}
	// A call that asks for less than min_output needs only that.
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany, `,"max_tokens":100`)), 200)
	// A prompt of 8,000 bytes (2,000 tokens) leaves no room in any window.
	resp = r.chat(dev1Key, chatBody("gpt-4o-mini", strings.Repeat("x", 8000)))
	mustStatus(t, resp, 429)
	if resp.Headers.Get("X-Tt-Refusal-Type") != "quota_cost_unfittable" || !strings.Contains(string(resp.Body), `"cost":2256,"burst":2000`) {
		t.Errorf("a prompt larger than the window: %v %s", resp.Headers, resp.Body)
	}
	// An hour later the window is full again.
	r.step(time.Hour)
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	if got := gjson.Get(r.lastBody(), "max_completion_tokens").Int(); got != 1993 {
		t.Errorf("after the window: max_completion_tokens %d", got)
	}
}

// TestTPMMetric: a tpm counting input reserves the prompt's estimate and
// settles to the reported input; one counting output reserves the output
// maximum and settles to the reported output.
func TestTPMMetric(t *testing.T) {
	lims := `{"id":"in_tpm","attach":{"level":"user"},"type":"tpm","amount":1000,"period":"1m","metric":"input"},
		{"id":"out_tpm","attach":{"level":"user"},"type":"tpm","amount":20000,"period":"1m","metric":"output"}`
	r := newRig(t, rigOptions{governance: gov(lims, `,"require_key":true`), keys: []testKey{dev1Key}})
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany, `,"max_tokens":50`), "X-Stub-Completion-Tokens", "30"), 200)
	if got := r.meLimit(dev1Key, "in_tpm")["observed"]; got != float64(8) {
		t.Errorf("in_tpm counted %v, want the 8 input tokens", got)
	}
	if got := r.meLimit(dev1Key, "out_tpm")["observed"]; got != float64(30) {
		t.Errorf("out_tpm counted %v, want the 30 output tokens", got)
	}
	if got := r.meLimit(dev1Key, "out_tpm")["metric"]; got != "output" {
		t.Errorf("/tt/v1/me metric %v", got)
	}
	// 1,000 input tokens a minute: a prompt of 4,000 bytes is refused.
	resp := r.chat(dev1Key, chatBody("gpt-4o-mini", strings.Repeat("y", 4000)))
	mustStatus(t, resp, 429)
	if got := resp.Headers.Get("X-Tt-Refused-By"); got != "in_tpm" {
		t.Errorf("refused by %q", got)
	}
}

// TestQuotaTokensFit: an output-token quota with fit lowers a call's
// output to what the day still holds, and refuses quota_cost_unfittable,
// naming its reset, when less than min_output is left.
func TestQuotaTokensFit(t *testing.T) {
	lim := `{"id":"output_daily","attach":{"level":"user"},"type":"quota_tokens","amount":1000,"period":"day","metric":"output","fit":true,"min_output":64}`
	r := accountantRig(t, lim)
	id := "output_daily|quota_tokens:output|org:acme/team:ml/user:dev1||day|"
	r.acct.setSnapshot("s1", syncwire.Entry{ID: id, PeriodStart: dayStart(), Value: 900})
	r.sync()
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
	if got := gjson.Get(r.lastBody(), "max_completion_tokens").Int(); got != 100 {
		t.Errorf("max_completion_tokens %d, want the 100 left", got)
	}
	r.acct.setSnapshot("s2", syncwire.Entry{ID: id, PeriodStart: dayStart(), Value: 950})
	r.sync()
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	body := string(resp.Body)
	for _, want := range []string{`"type":"quota_cost_unfittable"`, `"limit_type":"quota_tokens"`, `"resets_at":"2026-08-10T00:00:00Z"`, `"cost":64,"observed":950,"limit":1000`, `the limit has 50 left this day`} {
		if !strings.Contains(body, want) {
			t.Errorf("refusal lacks %s: %s", want, body)
		}
	}
	if resp.Headers.Get("Retry-After") == "" {
		t.Errorf("no Retry-After: the day's reset makes it fit: %v", resp.Headers)
	}
	// A call that asks for 40 fits in the 50.
	mustStatus(t, r.chat(dev1Key, chatBody("gpt-4o-mini", germany, `,"max_tokens":40`)), 200)
	r.acct.setSnapshot("s3", syncwire.Entry{ID: id, PeriodStart: dayStart(), Value: 1000})
	r.sync()
	resp = r.chat(dev1Key, chatBody("gpt-4o-mini", germany, `,"max_tokens":40`))
	if resp.Status != 429 || resp.Headers.Get("X-Tt-Refusal-Type") != "quota_exhausted" {
		t.Errorf("a spent quota: %d %v %s", resp.Status, resp.Headers, resp.Body)
	}
}

// TestFitRefusalInARollingWindow: a fit quota_tokens refused as
// unfittable in a rolling window resets when the window falls under its
// amount (the accountant's #resets entry), as every other refusal of a
// rolling window does; it named the end of the day's bucket.
func TestFitRefusalInARollingWindow(t *testing.T) {
	lim := `{"id":"output_weekly","attach":{"level":"user"},"type":"quota_tokens","amount":1000,"period":"7d","metric":"output","fit":true,"min_output":64}`
	r := accountantRig(t, lim)
	id := "output_weekly|quota_tokens:output|org:acme/team:ml/user:dev1||7d|"
	day := time.Date(2026, 8, 9, 0, 0, 0, 0, time.UTC)
	resets := time.Date(2026, 8, 11, 6, 0, 0, 0, time.UTC)
	r.acct.setSnapshot("s1",
		syncwire.Entry{ID: id, PeriodStart: day, Value: 950},
		syncwire.Entry{ID: id + "#resets", PeriodStart: day, Value: resets.Unix()})
	r.sync()
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	for _, want := range []string{`"type":"quota_cost_unfittable"`, `"resets_at":"2026-08-11T06:00:00Z"`, `"observed":950,"limit":1000`} {
		if !strings.Contains(string(resp.Body), want) {
			t.Errorf("refusal lacks %s: %s", want, resp.Body)
		}
	}
}
