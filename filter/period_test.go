package filter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestPeriodsInZones: a budget per Berlin day, a quota per quarter in New
// York and one per hour refuse with the end of their period in their zone
// as resets_at and Retry-After, and /tt/v1/me says so.
func TestPeriodsInZones(t *testing.T) {
	lims := `{"id":"berlin_day","attach":{"level":"user"},"type":"budget_usd","amount_usd":1,"period":"day","timezone":"Europe/Berlin"},
		{"id":"ny_quarter","attach":{"level":"team"},"type":"quota_requests","amount":100,"period":"quarter","timezone":"America/New_York"},
		{"id":"hourly","attach":{"level":"org"},"type":"quota_requests","amount":10,"period":"hour"}`
	r := accountantRig(t, lims)
	// t0 is 2026-08-09 20:44:50 UTC: 22:44:50 in Berlin, whose day
	// started at 22:00 UTC the day before; 16:44:50 in New York.
	berlinDay := time.Date(2026, 8, 8, 22, 0, 0, 0, time.UTC)
	nyQuarter := time.Date(2026, 7, 1, 4, 0, 0, 0, time.UTC)
	hour := time.Date(2026, 8, 9, 20, 0, 0, 0, time.UTC)
	r.acct.setSnapshot("s1",
		syncwire.Entry{ID: "berlin_day|budget_usd|org:acme/team:ml/user:dev1||day@Europe/Berlin|", PeriodStart: berlinDay, Value: 2_000_000_000},
		syncwire.Entry{ID: "ny_quarter|quota_requests|org:acme/team:ml||quarter@America/New_York|", PeriodStart: nyQuarter, Value: 50},
		syncwire.Entry{ID: "hourly|quota_requests|org:acme||hour|", PeriodStart: hour, Value: 3})
	r.sync()
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	body := string(resp.Body)
	if !strings.Contains(body, `"limit_id":"berlin_day"`) || !strings.Contains(body, `"period":"day","resets_at":"2026-08-09T22:00:00Z","retry_after_s":4510`) {
		t.Errorf("the Berlin day's refusal: %s", body)
	}
	if got := resp.Headers.Get("Retry-After"); got != "4510" {
		t.Errorf("Retry-After %q, want 4510 (to Berlin's midnight)", got)
	}
	me := r.me(dev1Key)
	for _, want := range []string{
		`"limit_id":"berlin_day","type":"budget_usd","class":"spend","unit":"usd","node":"org:acme/team:ml/user:dev1","period":"day","resets_at":"2026-08-09T22:00:00Z"`,
		`"limit_id":"ny_quarter","type":"quota_requests","class":"count","unit":"requests","node":"org:acme/team:ml","period":"quarter","resets_at":"2026-10-01T04:00:00Z"`,
		`"timezone":"America/New_York"`,
		`"limit_id":"hourly","type":"quota_requests","class":"count","unit":"requests","node":"org:acme","period":"hour","resets_at":"2026-08-09T21:00:00Z"`,
	} {
		if !strings.Contains(string(me.Body), want) {
			t.Errorf("/tt/v1/me lacks %s:\n%s", want, me.Body)
		}
	}
	// An entry of the Berlin day before counts nothing now.
	r.acct.setSnapshot("s2", syncwire.Entry{ID: "berlin_day|budget_usd|org:acme/team:ml/user:dev1||day@Europe/Berlin|", PeriodStart: berlinDay.Add(-24 * time.Hour), Value: 2_000_000_000})
	r.sync()
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
}

// TestRollingWindow: a 7-day rolling quota counts its full day buckets
// and the share of the oldest still in the window, which falls as the day
// goes on; its refusal names when the accountant says the window falls
// under its amount.
func TestRollingWindow(t *testing.T) {
	lim := `{"id":"weekly","attach":{"level":"user"},"type":"quota_requests","amount":10,"period":"7d"}`
	r := accountantRig(t, lim)
	id := "weekly|quota_requests|org:acme/team:ml/user:dev1||7d|"
	day := time.Date(2026, 8, 9, 0, 0, 0, 0, time.UTC)
	resets := time.Date(2026, 8, 10, 8, 0, 0, 0, time.UTC)
	// 9 in the full buckets and 4 in the oldest: at 20:44:50, 3h15m10s of
	// the day is left, so ceil(4 × 11710/86400) = 1 of them counts: 10.
	r.acct.setSnapshot("s1",
		syncwire.Entry{ID: id, PeriodStart: day, Value: 9},
		syncwire.Entry{ID: id + "#slide", PeriodStart: day, Value: 4},
		syncwire.Entry{ID: id + "#resets", PeriodStart: day, Value: resets.Unix()})
	r.sync()
	resp := r.chat(dev1Key, chatGermany)
	mustStatus(t, resp, 429)
	if !strings.Contains(string(resp.Body), `"period":"7d","resets_at":"2026-08-10T08:00:00Z"`) || !strings.Contains(string(resp.Body), `"observed":10,"limit":10`) {
		t.Errorf("refusal: %s", resp.Body)
	}
	if got := r.meLimit(dev1Key, "weekly")["observed"]; got != float64(10) {
		t.Errorf("/tt/v1/me observed %v, want 10", got)
	}
	// An hour later the oldest bucket's share is 1 still (ceil); at
	// 23:00 it is ceil(4 × 3600/86400) = 1; past midnight a snapshot of
	// the day before counts its whole (9 + 4: it overstates, never
	// understates) until the accountant's next one.
	r.step(3*time.Hour + 20*time.Minute)
	mustStatus(t, r.chat(dev1Key, chatGermany), 429)
	// With 8 in the full buckets, the window holds 9: one more call.
	r.acct.setSnapshot("s2",
		syncwire.Entry{ID: id, PeriodStart: day.Add(24 * time.Hour), Value: 8},
		syncwire.Entry{ID: id + "#slide", PeriodStart: day.Add(24 * time.Hour), Value: 1})
	r.sync()
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
}
