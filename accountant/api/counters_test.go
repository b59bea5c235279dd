package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestCounters: GET governance/counters answers the snapshot with its age
// and lag (admin token only), and 503 when the accountant publishes none.
func TestCounters(t *testing.T) {
	f := newFixture(t, overridesConfig)
	f.wantError("GET", Prefix+"governance/counters", adminToken, nil, http.StatusServiceUnavailable, "unavailable",
		"this accountant does not publish its counters")

	published := t0.Add(-1500 * time.Millisecond)
	f.h.(*handler).Counters = func() (LiveCounters, error) {
		return LiveCounters{
			Plan:        "abc",
			GeneratedAt: published,
			Counters:    []syncwire.Entry{{ID: "team_daily_requests|quota_requests|org:acme/team:ml||day|", PeriodStart: time.Date(2026, 8, 14, 0, 0, 0, 0, time.UTC), Value: 3}},
			Lag:         CountersLag{DroppedRows: 2, ReplicasLive: 1},
		}, nil
	}
	got := f.must(http.StatusOK, "GET", Prefix+"governance/counters", adminToken, nil, nil)
	want := `{"plan":"abc","generated_at":"2026-08-14T08:59:58.5Z","read_at":"2026-08-14T09:00:00Z","snapshot_age_s":1.5,` +
		`"lag":{"unfolded_rows":0,"dropped_rows":2,"replicas_live":1,"note":"` + CountersLagNote + `"},` +
		`"counters":[{"id":"team_daily_requests|quota_requests|org:acme/team:ml||day|","period_start":"2026-08-14T00:00:00Z","value":3}]}` + "\n"
	if string(got) != want {
		t.Errorf("GET governance/counters\n%s\nwant\n%s", got, want)
	}
	ml, _ := f.delegate("org:acme/team:ml")
	if code, b := f.do("GET", Prefix+"governance/counters", ml, nil); code != http.StatusForbidden {
		t.Errorf("a delegated admin: %d %s, want 403", code, b)
	}
}
