// Package store owns where the accountant keeps its LedgerSettled counters:
// one integer per counter identity (govern.Identity) and calendar period.
//
// The interface states what a shared store (Redis, for a fleet of
// accountants) has to make atomic, so the local store and a remote one are
// interchangeable:
//
//   - Add applies every delta of one ingest batch as one atomic step: a
//     concurrent Current sees all of a batch or none of it, and the values
//     Add returns are the counters right after that batch (the threshold
//     check reads them).
//   - Current is one consistent read of every counter of the current
//     periods.
//   - Replace swaps this accountant's whole contribution for a rebuilt one
//     (replay at start, re-derivation after a re-arm) in one step, so no
//     reader sees a half-rebuilt set.
//   - Expire drops the counters of periods that have ended: period rollover
//     needs no write, because a key carries its period start and a new
//     period's key starts absent, which reads as zero.
//
// The ledger is the source of truth; a store is soft state rebuilt from it.
package store

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
)

// Key names one counter: a counter identity in one calendar period.
//
// A UTC day, ISO week or month is named by its unit and start. Any other
// period (an hour, a quarter, a year, a period in a time zone, a day
// bucket of a rolling window) also carries End: when it stops being read
// (the period's end, or for a bucket the end of the last window holding
// it), so a store needs no time zone to tell the current counters and
// the ended ones.
type Key struct {
	ID    string        // govern.Identity of the instance
	Unit  calendar.Unit // the limit's calendar unit (Day for a rolling window's bucket)
	Start int64         // period start, Unix seconds (UTC)
	End   int64         // 0 for a UTC day, week or month; else the Unix second it is no longer read
}

// PeriodStart returns the key's period start as a time.
func (k Key) PeriodStart() time.Time { return time.Unix(k.Start, 0).UTC() }

// PeriodEnd is when the key is no longer read: End, or the end of its UTC
// day, week or month.
func (k Key) PeriodEnd() time.Time {
	if k.End != 0 {
		return time.Unix(k.End, 0).UTC()
	}
	return calendar.End(k.Unit, k.PeriodStart())
}

// IsCurrent reports whether the key is read at now; starts are the
// current starts of the UTC day, week and month (CurrentStarts).
func (k Key) IsCurrent(now time.Time, starts [calendar.Month + 1]int64) bool {
	if k.End != 0 {
		s := now.Unix()
		return k.Start <= s && s < k.End
	}
	return int(k.Unit) < len(starts) && starts[k.Unit] == k.Start
}

// UnitName names the key's period in text (a shared store's key): the
// unit ("day"), and for a key with an End, "~" and the End ("day~1786406400").
func (k Key) UnitName() string {
	if k.End == 0 {
		return k.Unit.String()
	}
	return k.Unit.String() + "~" + strconv.FormatInt(k.End, 10)
}

// ParseUnitName reads UnitName's text.
func ParseUnitName(s string) (calendar.Unit, int64, bool) {
	name, end, hasEnd := strings.Cut(s, "~")
	u, ok := calendar.ParseUnit(name)
	if !ok {
		return 0, 0, false
	}
	if !hasEnd {
		return u, 0, true
	}
	e, err := strconv.ParseInt(end, 10, 64)
	return u, e, err == nil && e > 0
}

// CurrentStarts returns the start of the UTC day, ISO week and month
// containing now, indexed by unit.
func CurrentStarts(now time.Time) [calendar.Month + 1]int64 {
	var s [calendar.Month + 1]int64
	for _, u := range []calendar.Unit{calendar.Day, calendar.Week, calendar.Month} {
		s[u] = calendar.Start(u, now).Unix()
	}
	return s
}

// Periods is implemented by a store that reads other accountants'
// counters by period (a shared store): it is told the current periods of
// the plan beyond the UTC day, week and month (their unit, start and end,
// with an empty ID), so it reads them too.
type Periods interface {
	SetPeriods(periods []Key)
}

// Delta is an increment of one counter.
type Delta struct {
	Key Key
	N   int64
}

// Counter is one counter's value.
type Counter struct {
	Key   Key
	Value int64
}

// Store holds LedgerSettled counters. Implementations are safe for
// concurrent use.
type Store interface {
	// Add applies deltas atomically, all or none, and appends to out the
	// value of each delta's counter after the batch, in order.
	Add(ctx context.Context, deltas []Delta, out []int64) ([]int64, error)
	// Current returns, in one consistent read, every counter whose period
	// contains now (its Start is calendar.Start(Unit, now)).
	Current(ctx context.Context, now time.Time) ([]Counter, error)
	// Replace makes counters exactly this accountant's contribution,
	// atomically.
	Replace(ctx context.Context, counters []Counter) error
	// Expire drops every counter whose period ended at or before t.
	Expire(ctx context.Context, t time.Time) error
}
