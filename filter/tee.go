package filter

import (
	"encoding/binary"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// The bound of a LedgerSettled 429 says what its number may be missing:
// requests not yet acknowledged by the accountant (tee_lag_rows: rows
// queued, a summary counted as its requests, and rows folded into totals
// not yet queued), rows dropped (dropped_rows) and, once the oldest of them
// has waited stuckAfter, for how long (unacked_for_s), across every VM of
// the host. Each VM publishes its own figures in one shared cell on tick:
//
//	n u8 | n × (vm u32, lag u32, dropped u64, expires i64 unix ns,
//	            last drop i64 unix ns (0 none), oldest unacked i64 unix ns
//	            (0 none))
//
// and a refusal sums the live entries (one shared-data read, on the
// refusal path only). The last drop and the oldest unacknowledged row of
// every VM are read on tick too: a host that dropped a row within
// dropTrust, or whose queue has not moved for stuckAfter, cannot vouch for
// its spend counters (rowsDistrust).
const (
	teeKey       = "tt/tee"
	teeEntrySize = 40
	// dropTrust is how long after a dropped row the host's spend and
	// quota limits stay uncheckable: the snapshot's own trust window.
	dropTrust = snapshotTrust
	// dropLogEvery bounds how often a VM logs the state of its queue.
	dropLogEvery = 10 * time.Second
)

func (e *Engine) teeChanged() bool {
	return e.lagRequests() != e.teeLag || e.rows.dropped != e.teeDropped || e.rows.droppedAt != e.teeDropAt || e.oldestUnacked() != e.teeOldest
}

// readDrops notes the latest row dropped by any VM of the host, and the
// oldest row any other VM holds unacknowledged, from the tee cell (tick).
func (e *Engine) readDrops(now time.Time) {
	v, _, found, err := e.host.Store.Get(teeKey)
	e.hostOldest = 0
	if err != nil || !found || len(v) == 0 || len(v) != 1+int(v[0])*teeEntrySize {
		return
	}
	ns := now.UnixNano()
	for i := 0; i < int(v[0]); i++ {
		ent := v[1+i*teeEntrySize:]
		if int64(binary.LittleEndian.Uint64(ent[16:])) <= ns {
			continue
		}
		if at := int64(binary.LittleEndian.Uint64(ent[24:])); at > e.hostDropAt {
			e.hostDropAt = at
		}
		if binary.LittleEndian.Uint32(ent) == e.vm {
			continue
		}
		if o := int64(binary.LittleEndian.Uint64(ent[32:])); o != 0 && (e.hostOldest == 0 || o < e.hostOldest) {
			e.hostOldest = o
		}
	}
}

// stuckFor is how long the oldest row the host holds unacknowledged has
// waited (this VM's now, the others' as of the last tick), or 0 when it
// has waited no longer than stuckAfter.
func (e *Engine) stuckFor(now time.Time) time.Duration {
	o := e.oldestUnacked()
	if e.hostOldest != 0 && (o == 0 || e.hostOldest < o) {
		o = e.hostOldest
	}
	if o == 0 || now.UnixNano()-o <= int64(stuckAfter) {
		return 0
	}
	return time.Duration(now.UnixNano() - o)
}

// rowsDistrust says why this host's rows cannot vouch for the spend
// snapshot (a VM dropped ledger rows within dropTrust, or holds rows the
// accountant has not taken for stuckAfter: spend it served is missing
// from the counters), or "" when they can.
func (e *Engine) rowsDistrust(now time.Time) string {
	if d := e.stuckFor(now); d > 0 {
		return "this gateway holds ledger rows the accountant has not taken for " + d.Round(time.Second).String() +
			" (its queue to the accountant is stuck), so spend it served is missing from the counters; it trusts them again once the rows are taken"
	}
	last := max(e.rows.droppedAt, e.hostDropAt)
	if last == 0 || now.UnixNano()-last >= int64(dropTrust) {
		return ""
	}
	ago := time.Duration(now.UnixNano() - last).Round(time.Millisecond)
	return "this gateway dropped ledger rows " + ago.String() + " ago (its queue to the accountant was full, and so were its overflow totals), so spend it served is missing from the counters; it trusts them again " + dropTrust.String() + " after the last drop"
}

// logDrops logs, at most once per dropLogEvery, what the VM's queue did
// since it last said so: rows folded into overflow totals, dropped, cut to
// their bounds, and unauthenticated refusals summed (tick).
func (e *Engine) logDrops(now time.Time) {
	folded, dropped, cut, summed := e.foldedRows-e.foldLogged, e.rows.dropped-e.dropLogged, e.cutRows-e.cutLogged, e.summedRows-e.sumLogged
	if (folded == 0 && dropped == 0 && cut == 0 && summed == 0) || now.Before(e.dropLogNext) {
		return
	}
	if folded > 0 || dropped > 0 {
		level, what := LogWarn, ""
		if dropped > 0 {
			level = LogError
			what = "; " + itoa(int64(dropped)) + " rows were dropped (" + itoa(int64(e.rows.dropped)) +
				" in all): the totals were full too, so spend and quota counters miss them, and fail: closed + hard spend limits answer 503 until " + dropTrust.String() + " after the last drop"
		}
		e.logf(level, "ledger: the queue to the accountant was full (%d rows or %d bytes unacknowledged per VM): %d rows were folded into overflow totals, which reach the accountant as summary rows once it takes rows again%s; now %d requests wait for the accountant (%d queued rows, %d in totals)",
			maxUnacked, maxQueueBytes, folded, what, e.lagRequests(), e.rows.lag(), e.totals.reqs)
	}
	if cut > 0 {
		e.logf(LogWarn, "ledger: %d rows carried members longer than a row keeps (%d bytes a string, %d entries a list) and were cut; their rows name the members in \"cut\"", cut, ledger.MaxFieldBytes, ledger.MaxListItems)
	}
	if summed > 0 {
		e.logf(LogInfo, "ledger: %d unauthenticated refusals past %d a second were summed into summary rows rather than written one each", summed, unauthPerSecond)
	}
	e.dropLogged, e.cutLogged, e.foldLogged, e.sumLogged = e.rows.dropped, e.cutRows, e.foldedRows, e.summedRows
	e.dropLogNext = now.Add(dropLogEvery)
}

func (e *Engine) publishTee(now time.Time) {
	lag, dropped, oldest := e.lagRequests(), e.rows.dropped, e.oldestUnacked()
	ns := now.UnixNano()
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		v, cas, found, err := e.host.Store.Get(teeKey)
		if err != nil {
			return
		}
		b := append(e.buf[:0], 0)
		n := 0
		if len(v) > 0 && len(v) == 1+int(v[0])*teeEntrySize {
			for i := 0; i < int(v[0]) && n < 254; i++ {
				ent := v[1+i*teeEntrySize : 1+(i+1)*teeEntrySize]
				if binary.LittleEndian.Uint32(ent) == e.vm || int64(binary.LittleEndian.Uint64(ent[16:])) <= ns {
					continue
				}
				b = append(b, ent...)
				n++
			}
		}
		b = binary.LittleEndian.AppendUint32(b, e.vm)
		b = binary.LittleEndian.AppendUint32(b, uint32(min(lag, 1<<32-1)))
		b = binary.LittleEndian.AppendUint64(b, dropped)
		b = binary.LittleEndian.AppendUint64(b, uint64(ns+int64(e.leaseTTL)))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.rows.droppedAt))
		b = binary.LittleEndian.AppendUint64(b, uint64(oldest))
		b[0] = byte(n + 1)
		e.buf = b
		ok, err := e.cells.setNew(teeKey, b, cas, found)
		if err != nil {
			return
		}
		if ok {
			e.teeLag, e.teeDropped, e.teeDropAt, e.teeOldest = lag, dropped, e.rows.droppedAt, oldest
			return
		}
		e.cells.retries++
	}
}

// bound sums the live tee figures of every VM of the host; this VM's own
// figures are current, the others' as of their last tick.
func (e *Engine) bound(now time.Time) wire.Bound {
	b := wire.Bound{TeeLagRows: e.lagRequests(), DroppedRows: int64(e.rows.dropped), UnackedFor: e.stuckFor(now)}
	v, _, found, err := e.host.Store.Get(teeKey)
	if err != nil || !found || len(v) == 0 || len(v) != 1+int(v[0])*teeEntrySize {
		return b
	}
	ns := now.UnixNano()
	for i := 0; i < int(v[0]); i++ {
		ent := v[1+i*teeEntrySize:]
		if binary.LittleEndian.Uint32(ent) == e.vm || int64(binary.LittleEndian.Uint64(ent[16:])) <= ns {
			continue
		}
		b.TeeLagRows += int64(binary.LittleEndian.Uint32(ent[4:]))
		b.DroppedRows += int64(binary.LittleEndian.Uint64(ent[8:]))
	}
	return b
}
