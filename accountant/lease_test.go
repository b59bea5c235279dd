package accountant

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/redisstore"
	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestLeaseCallChecks: a malformed lease is a 400 naming what is wrong; an
// accountant without Redis answers suspended, for the filter to decide
// within its share.
func TestLeaseCallChecks(t *testing.T) {
	f := newFixture(t, `governance:
  enabled: true
  limits: []
`)
	for _, c := range []struct{ body, want string }{
		{`{"leases":[{"kind":"rate","id":"r","alg":"gcra","amount":10,"period_ns":1000}]}`, "names its replica"},
		{`{"replica":"r1","leases":[{"kind":"rate","id":"r","alg":"token_bucket","amount":10,"period_ns":1000}]}`, "algorithm Redis runs"},
		{`{"replica":"r1","leases":[{"kind":"spend","id":"s","unit":"fortnight","amount":10}]}`, "calendar unit"},
		{`{"replica":"r1","leases":[{"kind":"spend","id":"s","unit":"day","amount":10,"need":1,"least":2}]}`, "least cost"},
		{`{"replica":"r1","leases":[{"kind":"hold","id":"s"}]}`, "unknown kind"},
		{`{"replica":"r1","leases":[{"kind":"slots","id":"c","need":-1}]}`, "0 or more"},
	} {
		code, body := f.do(t, http.MethodPost, syncwire.LeasePath, []byte(c.body))
		if code != http.StatusBadRequest || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s; want 400 naming %q", c.body, code, body, c.want)
		}
	}
	code, body := f.do(t, http.MethodPost, syncwire.LeasePath,
		[]byte(`{"replica":"r1","leases":[{"kind":"slots","id":"c","amount":3,"need":1}]}`))
	if code != 200 || !strings.Contains(string(body), `"suspended":"this accountant has no shared Redis`) {
		t.Errorf("without Redis: %d %s; want suspended", code, body)
	}
}

// redisFixture starts an accountant whose shared state is the Redis r,
// with limits (the YAML after governance.limits:, from its newline, or
// " []").
func redisFixture(t *testing.T, r *redistest.Server, limits string) *fixture {
	t.Helper()
	return newFixture(t, fmt.Sprintf("governance:\n  enabled: true\n  shared_state:\n    redis: { addr: %q, timeout: \"2s\" }\n  limits:", r.Addr)+limits)
}

// TestWarmLeaseRunsTheLeaseScript: the warm-up run when Redis is reached
// is a lease call that goes through Redis (the first real one then finds
// every step done once) and that a limit's cells never see.
func TestWarmLeaseRunsTheLeaseScript(t *testing.T) {
	r := redistest.Start(t)
	f := redisFixture(t, r, `
    - id: user_rpm
      attach: { node: __global }
      type: rpm
      amount: 5
      period: 1m
      store: redis
`)
	leases := func() float64 {
		t.Helper()
		mfs, err := f.s.metrics.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0.0
		for _, mf := range mfs {
			if mf.GetName() != "tt_accountant_redis_operations_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "op" && l.GetValue() == "lease" {
						n += m.GetCounter().GetValue()
					}
				}
			}
		}
		return n
	}
	// The warm-up Redis's first answer set off.
	for leases() < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	before := leases()
	f.s.warmLeases()
	if got := leases(); got != before+1 {
		t.Errorf("lease operations %v after the warm-up, want %v", got, before+1)
	}
	keys, err := r.Do("KEYS", "*user_rpm*")
	if err != nil || keys != "" {
		t.Errorf("the warm-up touched user_rpm's cell: %q %v", keys, err)
	}
}

// TestLeaseAfterRedisLostItsData: a lease call that finds Redis's data
// gone (a new epoch replaced the one the accountant knew) grants nothing
// and answers suspended until every accountant and replica had the time
// to count their totals and leases again; a replica's lot is counted again
// into the fresh cell once however often it renews; then leases are exact
// again.
func TestLeaseAfterRedisLostItsData(t *testing.T) {
	r := redistest.Start(t)
	f := redisFixture(t, r, ` []
`)
	for !f.s.redis.Up() {
		time.Sleep(10 * time.Millisecond)
	}
	ctx := context.Background()
	ask := func(need, granted int64, anchor string) syncwire.LeaseAnswer {
		t.Helper()
		a, err := f.s.Lease(ctx, syncwire.LeaseRequest{Replica: "r1", Wait: true, Leases: []syncwire.Lease{{Kind: syncwire.LeaseRate,
			ID: "w|rpm|__global||1h0m0s|fixed_window", Alg: "fixed_window", Amount: 30, PeriodNS: int64(time.Hour),
			Need: need, Granted: granted, Anchor: anchor}}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	first := ask(20, 0, "")
	if first.Suspended != "" || first.Leases[0].Granted != 20 {
		t.Fatalf("the first lease: %+v", first)
	}
	anchor := first.Leases[0].Anchor
	if _, err := r.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	lost := ask(20, 20, anchor)
	if lost.Suspended == "" || !strings.Contains(lost.Suspended, "lost its data") {
		t.Fatalf("the first lease after Redis lost its data: %+v; want suspended, rebuilding", lost)
	}
	// Renewals during the rebuild count the lot again, once.
	for i := 0; i < 3; i++ {
		if a := ask(0, 20, anchor); a.Suspended == "" {
			t.Fatalf("a renewal during the rebuild: %+v; want suspended", a)
		}
	}
	// The fixture's clock passes the grace.
	f.clock.Set(f.clock.Now().Add(redisstore.RebuildGrace + time.Second))
	if !f.s.fleet.Rebuilding().IsZero() {
		t.Fatal("still rebuilding past the grace")
	}
	a := ask(20, 20, anchor)
	if a.Suspended != "" || a.Leases[0].Allowed || a.Leases[0].Granted != 10 {
		t.Fatalf("after the rebuild: %+v; want the 10 the lot left (20 of 30 counted again, once)", a)
	}
}
