package filter_test

import (
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestPassthroughCallsCountAsRequests: a passthrough call (a path no gate
// governs, let through by allow_passthrough) is checked by the
// quota_requests instances it matches, as a governed call is at gate 2,
// and refused 429 once the quota is spent; its row is a passthrough row
// the accountant counts. A free call (the model list) is neither checked
// nor counted: its row says free.
func TestPassthroughCallsCountAsRequests(t *testing.T) {
	pass := dev1Key.withScopes(`{"allow_passthrough":true}`)
	const lim = `{"id":"team_requests","attach":{"level":"team"},"type":"quota_requests","amount":3,"period":"day"}`
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), keys: []testKey{pass}, accountant: true})
	id := "team_requests|quota_requests|org:acme/team:ml||day|"
	r.acct.setSnapshot("s1", syncwire.Entry{ID: id, PeriodStart: dayStart(), Value: 2})
	r.sync()
	files := r.do(req{method: "GET", path: "/v1/files", key: pass})
	mustStatus(t, files, 404) // the stub's answer: the call reached it
	models := r.do(req{method: "GET", path: "/v1/models", key: pass})
	mustStatus(t, models, 200)

	r.acct.setSnapshot("s2", syncwire.Entry{ID: id, PeriodStart: dayStart(), Value: 3})
	r.sync()
	refused := r.do(req{method: "GET", path: "/v1/files", key: pass})
	if refused.Status != 429 || refused.Headers.Get("X-Tt-Refused-By") != "team_requests" {
		t.Fatalf("a passthrough call past the quota: %d %s", refused.Status, refused.Body)
	}
	mustStatus(t, r.do(req{method: "GET", path: "/v1/models", key: pass}), 200)

	r.step(time.Second)
	for _, c := range []struct {
		id       string
		decision string
		free     bool
	}{
		{files.Headers.Get("X-Tt-Request-Id"), "passthrough", false},
		{models.Headers.Get("X-Tt-Request-Id"), "passthrough", true},
		{refused.Headers.Get("X-Tt-Request-Id"), "refused", false},
	} {
		row, ok := r.acct.row(c.id)
		if !ok || string(row.Decision) != c.decision || row.Free != c.free {
			t.Errorf("row %s: %+v (found %v); want decision %s, free %v", c.id, row, ok, c.decision, c.free)
		}
	}
}
