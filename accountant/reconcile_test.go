package accountant

import (
	"context"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/redisstore"
	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/shared/rate"
)

// TestReconcileSurvivesRedisAndRestart: a row's tpm reconcile that Redis
// does not take (it is stopped) is kept and committed when Redis is back;
// a restart of the accountant sends the reconciles of the rows whose
// windows are open again, and Redis commits each row's once by request
// id, so nothing is corrected twice.
func TestReconcileSurvivesRedisAndRestart(t *testing.T) {
	r := redistest.Start(t)
	f := redisFixture(t, r, `
    - id: team_tpm
      attach: { node: __global }
      type: tpm
      amount: 20000
      period: 1h
      store: redis
`)
	ctx := context.Background()
	cell := "team_tpm|tpm|__global||1h0m0s|gcra"
	step := redisstore.RateStep{ID: cell, Alg: rate.GCRA, Params: rate.Params{Amount: 20000, Period: time.Hour, Burst: 20000}}
	remaining := func() int64 {
		t.Helper()
		st := step
		st.N = 0
		res, err := f.s.redis.Take(ctx, time.Time{}, []redisstore.RateStep{st})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Remaining
	}
	waitRemaining := func(what string, want func(int64) bool) int64 {
		t.Helper()
		for {
			if f.s.redis.Up() {
				if got := remaining(); want(got) {
					return got
				}
			}
			select {
			case <-time.After(20 * time.Millisecond):
			case <-t.Context().Done():
				t.Fatalf("%s: never", what)
			}
		}
	}
	// A call reserved 16,000 tokens in the fleet's cell.
	take := step
	take.N = 16000
	waitRemaining("Redis answers", func(int64) bool { return true })
	if res, err := f.s.redis.Take(ctx, time.Time{}, []redisstore.RateStep{take}); err != nil || !res[0].Allowed {
		t.Fatalf("the reserve: %v %v", res, err)
	}
	before := remaining()

	// Redis stops (saving its cells); the call's row arrives, used 22
	// tokens: its reconcile (-15,978) cannot be committed now.
	r.Stop(t)
	rw := row(reqID(1), f.clock.Now(), "", "gpt-4o-mini", 10, 12)
	rw.Reconcile = []string{"gcra 20000 3600000000000 20000 -15978 " + cell}
	if ack := f.ingest(t, batch(rw)); ack.Accepted != 1 {
		t.Fatalf("ingest: %+v", ack)
	}
	r.Restart(t, redistest.Saved)
	after := waitRemaining("the reconcile committed once Redis is back", func(n int64) bool { return n > before+15000 })
	// The cell also drains with the clock (5.6 tokens a second): a second
	// correction would add another 15,978.
	const drift = 1000
	if after > before+15978+drift {
		t.Fatalf("remaining %d after the reconcile, from %d: corrected more than once", after, before)
	}

	// The accountant restarts: the row's reconcile is sent again from the
	// ledger, and Redis commits nothing twice.
	f.restart(t)
	waitRemaining("Redis answers the restarted accountant", func(int64) bool { return true })
	// Wait until the replayed reconciles were sent: nothing is kept.
	for {
		f.s.later.Lock()
		n := len(f.s.later.reconciles)
		f.s.later.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal("the replayed reconciles were never sent")
		}
	}
	if got := remaining(); got > after+drift {
		t.Fatalf("remaining %d after a restart, was %d: the reconcile was committed twice", got, after)
	}
}
