package e2e

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/internal/fleettest"
	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

const countersFleetConfig = dev1Tenants + `  limits:
    - id: team_requests
      attach: { level: team }
      type: quota_requests
      amount: 4
      period: day
`

// TestFleetCounterReset runs two `tokentriage dev` replicas sharing one
// Redis and one runtime plane: a day's quota spent over both refuses on
// both; a reset asked of the mirror (forwarded to the owner, recorded in
// the plane) serves on both again, and a replica restarted afterwards
// (its ledger replayed, every row counted again) still counts from the
// reset.
func TestFleetCounterReset(t *testing.T) {
	ctx := testContext(t)
	r := redistest.Start(t)
	f := fleettest.Start(t, fleettest.Options{Replicas: 2, Config: writeConfig(t, countersFleetConfig), Redis: r.Addr})
	k, err := (&api.Client{BaseURL: f.Owner().AccountantURL, Token: f.AdminToken}).MintKey(ctx, "org:acme/team:ml/user:dev1", vkey.Scopes{})
	if err != nil {
		t.Fatal(err)
	}
	// Spend the quota over both replicas until both refuse it.
	for _, rep := range f.Replicas() {
		eventually(ctx, t, "the quota spent, as replica "+rep.URL+" sees it", func() (bool, string) {
			a, err := chat(ctx, rep.URL, k.Key)
			if err != nil {
				t.Fatal(err)
			}
			return a.status == http.StatusTooManyRequests && a.refusedBy == "team_requests", a.body
		})
	}
	// Rows a gateway has not flushed, or an accountant not yet published,
	// are in no counter a reset can see: wait until both accountants
	// count the same.
	counted := func(rep *fleettest.Replica) int64 {
		c, err := (&api.Client{BaseURL: rep.AccountantURL, Token: f.AdminToken}).Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range c.Counters {
			if e.ID == "team_requests|quota_requests|org:acme/team:ml||day|" {
				return e.Value
			}
		}
		return 0
	}
	eventually(ctx, t, "both accountants count the same", func() (bool, string) {
		a, b := counted(f.Replica(0)), counted(f.Replica(1))
		return a == b && a >= 4, fmt.Sprintf("%d and %d", a, b)
	})
	mirror := &api.Client{BaseURL: f.Replica(1).AccountantURL, Token: f.AdminToken}
	out, err := mirror.ResetCounter(ctx, api.CounterRequest{LimitID: "team_requests", Node: "org:acme/team:ml"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Kind != "reset" || out.After != "0" || out.Taken == "0" {
		t.Fatalf("reset answer %+v", out)
	}
	for _, rep := range f.Replicas() {
		eventually(ctx, t, "served again after the reset on "+rep.URL, func() (bool, string) {
			a, err := chat(ctx, rep.URL, k.Key)
			if err != nil {
				t.Fatal(err)
			}
			c, _ := (&api.Client{BaseURL: rep.AccountantURL, Token: f.AdminToken}).Counters(ctx)
			return a.status == http.StatusOK, fmt.Sprintf("%d %s; counters %+v", a.status, a.body, c.Counters)
		})
	}

	// A restarted replica counts every row of its ledger again and takes
	// the reset off again: the requests since the reset (one per replica,
	// at most four in all) still leave room.
	f.Stop(1)
	f.Restart(1)
	a, err := chat(ctx, f.Replica(1).URL, k.Key)
	if err != nil {
		t.Fatal(err)
	}
	if a.status != http.StatusOK {
		t.Fatalf("after a restart: %d %s", a.status, a.body)
	}
}
