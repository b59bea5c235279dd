package accountant

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/sat"
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
		k, ok := adjustedKey(x)
		if !ok {
			continue
		}
		m[k] = sat.Add(m[k], x.Amount)
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

// adjustedKey is the store key of the counter adjustment x adjusts. Its
// period is the unit's name, with "@" and the zone for a period in a time
// zone (api.CounterAdjusted): a UTC day, week or month is keyed by its
// unit and start, any other period by its end as well (core's keyOf).
func adjustedKey(x runtime.Adjustment) (store.Key, bool) {
	name, zone, _ := strings.Cut(x.Period, "@")
	u, ok := calendar.ParseUnit(name)
	if !ok {
		return store.Key{}, false
	}
	k := store.Key{ID: x.Counter, Unit: u, Start: x.PeriodStart.Unix()}
	if zone != "" || u != calendar.Day && u != calendar.Week && u != calendar.Month {
		k.End = x.PeriodEnd.Unix()
	}
	return k, true
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

// localResetsFile keeps, on an accountant that mirrors the runtime plane
// without a shared Redis, what each reset took off its own counter.
const localResetsFile = "counter-resets.json"

// localResets adapts the plane's adjustments to an accountant whose
// counters are its own replica's only: a mirror without a shared Redis.
// A reset there takes this accountant's own counter to zero, as it stood
// when the reset reached it (the owner's amount is the owner's count,
// not this one's); the amount is kept in localResetsFile, so a restart
// and the ledger's replay take the same off again. A credit keeps its
// amount: each replica gives that much back of its own count. Elsewhere
// (the owner, or any accountant of a fleet sharing Redis, where every one
// serves the fleet's total) the adjustments are the plane's as they are.
func (s *Server) localResets(adjs []runtime.Adjustment) []runtime.Adjustment {
	if s.mirror == nil || s.redis != nil {
		return adjs
	}
	s.resetsMu.Lock()
	defer s.resetsMu.Unlock()
	if s.resets == nil {
		s.resets = s.readLocalResets()
	}
	now := s.now()
	sort.Slice(adjs, func(i, j int) bool { return adjs[i].Seq < adjs[j].Seq })
	out := make([]runtime.Adjustment, 0, len(adjs))
	taken := map[store.Key]int64{} // what earlier adjustments took, by counter
	keep := map[int64]int64{}
	changed := false
	for _, a := range adjs {
		k, ok := adjustedKey(a)
		if !ok {
			continue
		}
		if a.Kind == runtime.AdjustReset {
			amount, known := s.resets[a.Seq]
			if !known {
				if !s.replayed.Load() {
					continue // measured once the ledger has rebuilt the counter
				}
				amount = max(0, s.ownValue(k, now)-taken[k])
				changed = true
			}
			keep[a.Seq] = amount
			a.Amount = amount
		}
		taken[k] = sat.Add(taken[k], a.Amount)
		out = append(out, a)
	}
	if changed || len(keep) != len(s.resets) {
		s.resets = keep
		if err := s.writeLocalResets(keep); err != nil {
			s.log.Error("counter resets: keeping what this replica's resets took failed; after a restart they are measured again", "err", err)
		}
	}
	return out
}

// ownValue is this accountant's own count of k now.
func (s *Server) ownValue(k store.Key, now time.Time) int64 {
	cs, err := s.adjust.Store.Current(context.Background(), now)
	if err != nil {
		return 0
	}
	for _, c := range cs {
		if c.Key == k {
			return c.Value
		}
	}
	return 0
}

func (s *Server) readLocalResets() map[int64]int64 {
	out := map[int64]int64{}
	b, err := os.ReadFile(filepath.Join(s.opts.DataDir, localResetsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return out
	}
	var m map[string]int64
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		s.log.Error("counter resets: "+localResetsFile+" is unreadable; the resets are measured again", "err", err)
		return out
	}
	for k, v := range m {
		if seq, err := strconv.ParseInt(k, 10, 64); err == nil {
			out[seq] = v
		}
	}
	return out
}

func (s *Server) writeLocalResets(m map[int64]int64) error {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[strconv.FormatInt(k, 10)] = v
	}
	b, _ := json.Marshal(out)
	path := filepath.Join(s.opts.DataDir, localResetsFile)
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// SetPeriods implements store.Periods for the store it wraps.
func (a *adjusted) SetPeriods(periods []store.Key) {
	if p, ok := a.Store.(store.Periods); ok {
		p.SetPeriods(periods)
	}
}
