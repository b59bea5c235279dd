package core

import (
	"time"

	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// Alert is a threshold crossing: an instance's counter reached a
// posture.thresholds fraction of its amount in one period. At most one
// Alert is raised per instance, threshold and period.
type Alert struct {
	LimitID     string
	Type        govern.Type
	Node        string
	ID          string // counter identity
	Threshold   float64
	Unit        calendar.Unit
	PeriodStart time.Time
	// PeriodEnd is when the period ends (resets_at).
	PeriodEnd time.Time
	Value     int64 // the counter after the crossing (nanodollars for budget_usd)
	Amount    int64 // the instance's amount (override applied)
	At        time.Time
}

type alertKey struct {
	id        string
	threshold float64
	start     int64
}

// checkThresholds raises the alerts of the batch just applied (deltas,
// targets and values are parallel).
func (c *Core) checkThresholds(now time.Time, live bool) []Alert {
	var out []Alert
	for i, d := range c.deltas {
		t := c.targets[i]
		if len(t.limit.Thresholds) == 0 {
			continue
		}
		after := c.values[i]
		for _, th := range t.limit.Thresholds {
			if !govern.Crossed(after-d.N, after, t.amount, th) {
				continue
			}
			if a, ok := c.raise(t, th, d.Key, after, now, live); ok {
				out = append(out, a)
			}
		}
	}
	return out
}

// raise records the alert key and returns the alert unless it was raised
// before. When not live (replay at start) the key is recorded and no alert
// returned.
func (c *Core) raise(t target, th float64, key store.Key, value int64, now time.Time, live bool) (Alert, bool) {
	start := key.Start
	k := alertKey{id: t.id, threshold: th, start: start}
	if _, ok := c.fired[k]; ok {
		return Alert{}, false
	}
	c.fired[k] = struct{}{}
	if !live {
		return Alert{}, false
	}
	c.stats.Alerts++
	return Alert{
		LimitID: t.limit.ID, Type: t.limit.Type, Node: t.node, ID: t.id, Threshold: th,
		Unit: key.Unit, PeriodStart: key.PeriodStart(), PeriodEnd: key.PeriodEnd(), Value: value, Amount: t.amount, At: now,
	}, true
}
