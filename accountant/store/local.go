package store

import (
	"context"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/sat"
)

// Local is the in-memory store of one accountant (store: local). It is
// rebuilt from the ledger at start; a restart loses nothing the ledger holds.
type Local struct {
	mu sync.RWMutex
	m  map[Key]int64
}

var _ Store = (*Local)(nil)

// NewLocal returns an empty local store.
func NewLocal() *Local { return &Local{m: map[Key]int64{}} }

// Add implements Store. It never fails.
func (l *Local) Add(_ context.Context, deltas []Delta, out []int64) ([]int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range deltas {
		v := sat.Add(l.m[d.Key], d.N)
		l.m[d.Key] = v
		out = append(out, v)
	}
	return out, nil
}

// Value is the counter k, and whether it has one.
func (l *Local) Value(k Key) (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	v, ok := l.m[k]
	return v, ok
}

// Current implements Store.
func (l *Local) Current(_ context.Context, now time.Time) ([]Counter, error) {
	starts := currentStarts(now)
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]Counter, 0, len(l.m))
	for k, v := range l.m {
		if k.IsCurrent(now, starts) {
			out = append(out, Counter{Key: k, Value: v})
		}
	}
	return out, nil
}

// Replace implements Store.
func (l *Local) Replace(_ context.Context, counters []Counter) error {
	m := make(map[Key]int64, len(counters))
	for _, c := range counters {
		m[c.Key] = sat.Add(m[c.Key], c.Value)
	}
	l.mu.Lock()
	l.m = m
	l.mu.Unlock()
	return nil
}

// Expire implements Store.
func (l *Local) Expire(_ context.Context, t time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.m {
		if !k.PeriodEnd().After(t) {
			delete(l.m, k)
		}
	}
	return nil
}

func currentStarts(now time.Time) [calendar.Month + 1]int64 { return CurrentStarts(now) }
