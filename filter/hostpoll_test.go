package filter_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/wasmtest"
)

// workload runs the filter through what a gateway asks of it: served and
// streamed calls, a 429, /tt/v1/me, syncs with the accountant, bodies large
// enough to make its heap grow and collect.
func workload(t *testing.T, r *rig) {
	t.Helper()
	r.sync()
	big := strings.Repeat("a long prompt ", 5000) // 70 KB
	for i := range 60 {
		body := chatBody("gpt-4o-mini", fmt.Sprintf("%d %s", i, big))
		if i%3 == 0 {
			body = chatBody("gpt-4o-mini", "hi", `,"stream":true`)
		}
		resp := r.chat(dev1Key, body)
		if resp.Status != 200 && resp.Status != 429 {
			t.Fatalf("request %d: %d %s", i, resp.Status, resp.Body)
		}
		if i%10 == 0 {
			r.step(time.Second)
		}
	}
	mustStatus(t, r.me(dev1Key), 200)
	r.step(time.Minute)
	mustStatus(t, r.chat(dev1Key, chatGermany), 200)
}

// TestFilterRunsUnderEitherPollAnswer: the filter works whether the host
// answers poll_oneoff ENOSYS (Envoy through cpp-host PR #427) or success
// with no event (current cpp-host): it never sleeps or waits on a timer in
// an export, which under ENOSYS would kill its VM. The rig's cleanup fails
// the test on any trap.
func TestFilterRunsUnderEitherPollAnswer(t *testing.T) {
	for name, mode := range map[string]wasmtest.PollMode{"ENOSYS": wasmtest.PollENOSYS, "no events": wasmtest.PollNoEvents} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, rigOptions{governance: gov(limTeamRPM), keys: []testKey{dev1Key}, accountant: true, poll: mode})
			workload(t, r)
		})
	}
}
