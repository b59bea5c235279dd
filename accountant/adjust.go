package accountant

import (
	"context"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// adjusted is the counter store the core folds into, with the runtime
// plane's resets and credits (runtime.Adjustment) applied as the counters
// are read. What it stores is untouched: every row stays counted, so the
// store's totals (a fleet's published ones included, which only grow
// within a period) and the ledger's replay agree, and the adjustments,
// kept in governance.db, are taken off again after a restart. Current
// serves each counter adjusted in its current period less what was taken
// off (never below zero), with an entry id+syncwire.CreditSuffix beside
// it saying how much; Add answers the counters the same way, so a
// threshold alert is judged on what the gate counts. Every accountant of
// a fleet holds the same adjustments (they travel with the runtime plane)
// and serves the same fleet totals, so the fleet sees one value.
type adjusted struct {
	store.Store
	mu     sync.RWMutex
	credit map[store.Key]int64
}

var _ store.Store = (*adjusted)(nil)

func newAdjusted(st store.Store) *adjusted {
	return &adjusted{Store: st, credit: map[store.Key]int64{}}
}

// set replaces the adjustments; it reports whether the credits changed.
func (a *adjusted) set(adjs []runtime.Adjustment) bool {
	m := make(map[store.Key]int64, len(adjs))
	for _, x := range adjs {
		u, ok := calendar.ParseUnit(x.Period)
		if !ok {
			continue
		}
		k := store.Key{ID: x.Counter, Unit: u, Start: x.PeriodStart.Unix()}
		m[k] = addSat(m[k], x.Amount)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	changed := len(m) != len(a.credit)
	for k, v := range m {
		if a.credit[k] != v {
			changed = true
		}
	}
	a.credit = m
	return changed
}

// creditOf is what was taken off counter k.
func (a *adjusted) creditOf(k store.Key) int64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.credit[k]
}

// Add implements store.Store: the values are the counters less their
// credits, never below zero.
func (a *adjusted) Add(ctx context.Context, deltas []store.Delta, out []int64) ([]int64, error) {
	n := len(out)
	out, err := a.Store.Add(ctx, deltas, out)
	if err != nil || len(out) != n+len(deltas) {
		return out, err
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if len(a.credit) == 0 {
		return out, nil
	}
	for i, d := range deltas {
		if c := a.credit[d.Key]; c > 0 {
			out[n+i] = max(0, out[n+i]-c)
		}
	}
	return out, nil
}

// Current implements store.Store: the counters, and a credit entry beside
// each counter adjusted in its current period.
func (a *adjusted) Current(ctx context.Context, now time.Time) ([]store.Counter, error) {
	cs, err := a.Store.Current(ctx, now)
	if err != nil {
		return nil, err
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if len(a.credit) == 0 {
		return cs, nil
	}
	out := make([]store.Counter, len(cs), len(cs)+len(a.credit))
	copy(out, cs)
	for i := range out {
		if c := a.credit[out[i].Key]; c > 0 {
			out[i].Value = max(0, out[i].Value-c)
		}
	}
	for k, v := range a.credit {
		if v > 0 && calendar.Start(k.Unit, now).Unix() == k.Start {
			out = append(out, store.Counter{Key: store.Key{ID: k.ID + syncwire.CreditSuffix, Unit: k.Unit, Start: k.Start}, Value: v})
		}
	}
	return out, nil
}

// fleetRead publishes this accountant's totals and reads the others' from
// the fleet's Redis now (no-op without one), so what a reset or credit
// takes off is the fleet's counter as it stands.
func (s *Server) fleetRead() {
	if s.fleet == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.fleet.Publish(ctx); err != nil {
		s.log.Warn("counter adjustment: publishing this accountant's totals", "err", err)
	}
	if s.fleet.Refresh(ctx) {
		s.mu.Lock()
		s.core.Touch(s.now())
		s.mu.Unlock()
	}
}
