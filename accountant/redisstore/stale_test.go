package redisstore

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStaleSaysWhyOnce: the reason the others' spend is stale reads as a
// sentence whatever the read error says ("the shared Redis is redis is
// down" was the 503 under fail: closed).
func TestStaleSaysWhyOnce(t *testing.T) {
	now := time.Date(2026, 8, 10, 12, 0, 0, 0, time.UTC)
	age := StaleAfter + time.Second
	for _, c := range []struct {
		err  error
		want string
	}{
		{ErrDown, "the other replicas' spend is 6s old: the shared Redis could not be read (redis is down)"},
		{errors.New("dial tcp 10.0.0.5:6379: connection refused"), "the other replicas' spend is 6s old: the shared Redis could not be read (dial tcp 10.0.0.5:6379: connection refused)"},
		{nil, "the other replicas' spend is 6s old: the shared Redis could not be read (unreachable)"},
	} {
		f := &Fleet{now: func() time.Time { return now }, lastRead: now.Add(-age), readErr: c.err}
		if want := strings.Replace(c.want, "6s", age.String(), 1); f.staleLocked(now) != want {
			t.Errorf("%v: %q\nwant %q", c.err, f.staleLocked(now), want)
		}
	}
}
