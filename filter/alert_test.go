package filter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestGateThresholdAlerts: posture.thresholds on rpm, tpm and concurrency
// raise an alert (a warning in the gateway's log and the
// tokentriage.threshold_alerts metric) when an admission carries the
// instance to the fraction, once per window across the VMs.
func TestGateThresholdAlerts(t *testing.T) {
	limits := strings.Join([]string{
		`{"id":"alert_rpm","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"rpm","amount":4,"period":"1m","algorithm":"fixed_window","posture":{"thresholds":[0.5]}}`,
		`{"id":"alert_tpm","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"tpm","amount":20000,"period":"1m","posture":{"thresholds":[0.5]}}`,
		`{"id":"alert_conc","attach":{"node":"org:acme/team:ml/user:dev1"},"type":"concurrency","amount":2,"posture":{"thresholds":[0.5,0.9]}}`,
	}, ",")
	r := accountantRig(t, limits)
	alerts := func() map[string]int {
		n := map[string]int{}
		for _, l := range r.h.Logs() {
			if i := strings.Index(l.Message, "threshold alert: limit "); i >= 0 {
				id, _, _ := strings.Cut(l.Message[i+len("threshold alert: limit "):], " ")
				n[id]++
			}
		}
		return n
	}
	// One request: the tpm reserve (16,391 of 20,000) and the lease (1 of
	// 2) cross 0.5; the rpm window holds 1 of 4.
	mustStatus(t, r.do(req{path: "/v1/chat/completions", key: dev1Key, vm: 1, body: chatGermany}), 200)
	if got := alerts(); got["alert_tpm"] != 1 || got["alert_conc"] != 1 || got["alert_rpm"] != 0 {
		t.Fatalf("after one request: %v", got)
	}
	// The tick hands them to the accountant, which posts them to its
	// alert webhook with its own.
	r.step(500 * time.Millisecond)
	r.acct.mu.Lock()
	sent := append([]syncwire.GateAlert(nil), r.acct.alerts...)
	r.acct.mu.Unlock()
	if len(sent) != 2 {
		t.Fatalf("the accountant received %d alerts, want 2: %+v", len(sent), sent)
	}
	for _, g := range sent {
		switch g.LimitID {
		case "alert_tpm":
			if g.LimitType != "tpm" || g.Window != "1m0s" || g.Observed != 16391 || g.Limit != 20000 || g.Threshold != 0.5 || g.Node != "org:acme/team:ml/user:dev1" {
				t.Errorf("tpm alert: %+v", g)
			}
		case "alert_conc":
			if g.LimitType != "concurrency" || g.Window != "" || g.Observed != 1 || g.Limit != 2 {
				t.Errorf("concurrency alert: %+v", g)
			}
		default:
			t.Errorf("unexpected alert %+v", g)
		}
	}
	// The rpm window reaches 2 of 4 on another VM: its alert, once.
	r.step(61 * time.Second)
	for i := 0; i < 4; i++ {
		r.do(req{path: "/v1/chat/completions", key: dev1Key, vm: 1 + i%3, body: `{"model":"gpt-4o","max_tokens":1,"messages":[]}`})
	}
	if got := alerts(); got["alert_rpm"] != 1 {
		t.Fatalf("after a window of four: %v", got)
	}
	if got := r.metric("tokentriage.threshold_alerts"); got < 3 {
		t.Errorf("tokentriage.threshold_alerts = %d, want at least 3", got)
	}
	// The next window raises it again.
	r.step(61 * time.Second)
	for i := 0; i < 2; i++ {
		r.do(req{path: "/v1/chat/completions", key: dev1Key, vm: 2, body: `{"model":"gpt-4o","max_tokens":1,"messages":[]}`})
	}
	if got := alerts(); got["alert_rpm"] != 2 {
		t.Fatalf("in the next window: %v", got)
	}
}
