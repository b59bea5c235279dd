package filter

import (
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// A limit that keeps one counter per value of a dim (a model, customer or
// tag pattern) keeps at most max_distinct of them per instance; the values
// past the bound share one overflow counter (govern.Overflow). See
// RATIONALE.md#why-do-values-past-max_distinct-share-an-overflow-counter.
//
// Spend and quota counters are the accountant's: it decides, as it folds,
// which values have a counter of their own this period, and publishes how
// many an instance has (<base>#distinct); a value without a counter while
// the instance is full is judged by the overflow counter.
//
// Rate windows, gauges and reserves are the gateway's own cells in the
// host's shared data, where nothing can be deleted. So a per-value
// instance's cells live in a table of max_distinct slots: a value is hashed
// to a slot and takes the first of slotProbes slots from there that is its
// own, free, or held by a value whose cells have drained (a full window, no
// lease, a reserve of an ended period), which it takes over; with none, the
// value is counted in the overflow slot. The table never holds more than
// max_distinct + 1 cells per instance, whatever the values callers send,
// and a slot comes back to the next value as soon as its value is idle.
//
//	tt/vd|<base>|<i>   the slot's owner: the identity of its value
//	tt/v|<base>|<i>    the slot's cells (rate window, gauge, ...); <i> is
//	                   "*" for the overflow slot
//
// <base> is govern.DistinctBase: the identity up to its first per-value
// dim.

// slotProbes is how many slots a value tries from its home slot.
const slotProbes = 16

// slotHash places an identity in the table: FNV-1a, the same in every VM
// of a host.
func slotHash(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return h
}

func slotDir(base string, i int64) string  { return "tt/vd|" + base + "|" + strconv.FormatInt(i, 10) }
func slotCell(base string, i int64) string { return "tt/v|" + base + "|" + strconv.FormatInt(i, 10) }
func overflowCell(base string) string      { return "tt/v|" + base + "|" + govern.Overflow }

// ownCells reports whether in's limit keeps cells of its own at the
// gateway (a rate window, a gauge, a reserve): what the slot table bounds.
func ownCells(l *govern.Limit) bool {
	switch l.Type {
	case govern.RPM, govern.TPM, govern.Concurrency:
		return true
	}
	return l.Reserve && l.Type.Class() == govern.LedgerSettled && l.Mode == govern.ModeOn
}

// bindValues gives the per-value instances of a gate their counters: a
// slot for the gateway's own cells (Instance.Cell), and the overflow
// counter for a value past the bound (the identity of a spend or quota
// counter the accountant holds none of while the instance is full). Each
// limit that counts the request in its overflow is noted on the stream
// (its row's overflow).
func (e *Engine) bindValues(s *Stream, insts []govern.Instance, now time.Time) {
	for i := range insts {
		in := &insts[i]
		l := in.Limit
		if !l.PerValue() || in.Unresolved {
			continue
		}
		over := false
		if ownCells(l) {
			cell, full, err := e.valueSlot(in, now, true)
			if err != nil {
				e.logf(LogWarn, "finding the cells of %s among its %d: %v (counted in its overflow cell)", in.ID, l.MaxDistinct, err)
			}
			in.Cell, over = cell, full
		}
		if l.Type.Class() == govern.LedgerSettled && e.settledFull(in, now) {
			in.ID, over = govern.OverflowIdentity(l, in.Node), true
		}
		if over && !contains(s.overflow, l.ID) {
			s.overflow = append(s.overflow, l.ID)
			e.host.Metrics.Add(MetricOverflow, 1)
		}
	}
}

// settledFull reports whether a spend or quota instance counts the
// request's value in its overflow counter: the accountant holds no counter
// of the value this period, and as many counters of the instance as its
// bound.
func (e *Engine) settledFull(in *govern.Instance, now time.Time) bool {
	if e.snapValue(in.ID, in, now) > 0 {
		return false
	}
	return e.snapValue(govern.DistinctBase(in.Limit, in.Node)+distinctSuffix, in, now) >= in.Limit.MaxDistinct
}

// distinctSuffix names the snapshot entry that says how many counters of
// their own an instance's values have this period.
const distinctSuffix = syncwire.DistinctSuffix

// valueSlot finds the slot of in's value: its own, or one it takes (claim:
// free, or held by a drained value); the overflow cell when the value has
// none within slotProbes. Without claim it only looks (for /tt/v1/me): a
// value that has no slot yet but would get one is given a cell nothing
// writes, which reads as fresh.
func (e *Engine) valueSlot(in *govern.Instance, now time.Time, claim bool) (cell string, overflow bool, err error) {
	l := in.Limit
	base := govern.DistinctBase(l, in.Node)
	n := l.MaxDistinct
	if n <= 0 {
		return in.ID, false, nil
	}
	home := int64(slotHash(in.ID) % uint64(n))
	room := false // without claim: a slot the value would take
	for p := int64(0); p < min(slotProbes, n); p++ {
		i := (home + p) % n
		dir := slotDir(base, i)
		for attempt := 0; attempt < maxCASRetries; attempt++ {
			owner, cas, found, err := e.cells.store.Get(dir)
			if err != nil {
				return overflowCell(base), true, err
			}
			switch {
			case found && string(owner) == in.ID:
				return slotCell(base, i), false, nil
			case found && !e.drained(l, slotCell(base, i), now):
				attempt = maxCASRetries // another value's, in use
				continue
			case !claim:
				room = true
				attempt = maxCASRetries // look on for its own
				continue
			}
			swapped, err := e.cells.setNew(dir, []byte(in.ID), cas, found)
			if err != nil {
				return overflowCell(base), true, err
			}
			if swapped {
				if found {
					e.clearLeases(l, slotCell(base, i))
				}
				return slotCell(base, i), false, nil
			}
			e.cells.retries++ // another VM took it first: read it again
		}
	}
	if room {
		return "tt/v|" + base + "|unclaimed", false, nil
	}
	return overflowCell(base), true, nil
}

// drained reports whether the cells at key hold nothing a new value
// would inherit: a rate window back at its full burst, a gauge with no
// lease, a reserve-mode spend cell of an earlier period (or none).
func (e *Engine) drained(l *govern.Limit, key string, now time.Time) bool {
	if e.leasedLimit(l) && !e.leaseDrained(l, key, now) {
		return false
	}
	switch l.Type {
	case govern.RPM, govern.TPM:
		// The window as the instance's own numbers see it: with a burst
		// of b, b units free is a fresh window.
		res, _, err := e.cells.ratePeek(key, l.Algorithm, now, e.rateParams(&govern.Instance{Limit: l, Amount: l.Amount}))
		return err == nil && res.Remaining >= res.Limit
	case govern.Concurrency:
		live, err := e.cells.gaugeRead(key, now)
		return err == nil && live == 0
	}
	val, _, found, err := e.cells.store.Get(spendKey(key))
	if err != nil {
		return false
	}
	if !found {
		return true
	}
	cell, ok := decodeSpend(val)
	return ok && cell.start != l.Period.Start(now).Unix()
}
