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
	"time"

	"github.com/tokentriage/tokentriage/shared/calendar"
)

// Key names one counter: a counter identity in one calendar period.
type Key struct {
	ID    string        // govern.Identity of the instance
	Unit  calendar.Unit // the limit's calendar unit
	Start int64         // period start, Unix seconds (UTC)
}

// PeriodStart returns the key's period start as a time.
func (k Key) PeriodStart() time.Time { return time.Unix(k.Start, 0).UTC() }

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
