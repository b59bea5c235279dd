package filter

import (
	"encoding/binary"
	"time"

	"github.com/tokentriage/tokentriage/shared/wire"
)

// The bound of a LedgerSettled 429 says what its number may be missing:
// rows not yet acknowledged by the accountant (tee_lag_rows) and rows
// dropped on overflow (dropped_rows), across every VM of the host. Each VM
// publishes its own figures in one shared cell on tick:
//
//	n u8 | n × (vm u32, lag u32, dropped u64, expires i64 unix ns,
//	            last drop i64 unix ns, 0 for none)
//
// and a refusal sums the live entries (one shared-data read, on the
// refusal path only). The last drop of every VM is read on tick too: a
// host that dropped a row within dropTrust cannot vouch for its spend
// counters (rowsDistrust).
const (
	teeKey       = "tt/tee"
	teeEntrySize = 32
	// dropTrust is how long after a dropped row the host's spend and
	// quota limits stay uncheckable: the snapshot's own trust window.
	dropTrust = snapshotTrust
	// dropLogEvery bounds how often a VM logs the rows it dropped.
	dropLogEvery = 10 * time.Second
)

func (e *Engine) teeChanged() bool {
	return e.rows.lag() != e.teeLag || e.rows.dropped != e.teeDropped || e.rows.droppedAt != e.teeDropAt
}

// readDrops notes the latest row dropped by any VM of the host, from the
// tee cell (tick).
func (e *Engine) readDrops(now time.Time) {
	v, _, found, err := e.host.Store.Get(teeKey)
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
	}
}

// rowsDistrust says why this host's rows cannot vouch for the spend
// snapshot (a VM dropped ledger rows within dropTrust: spend it served is
// missing from the counters), or "" when they can.
func (e *Engine) rowsDistrust(now time.Time) string {
	last := max(e.rows.droppedAt, e.hostDropAt)
	if last == 0 || now.UnixNano()-last >= int64(dropTrust) {
		return ""
	}
	ago := time.Duration(now.UnixNano() - last).Round(time.Millisecond)
	return "this gateway dropped ledger rows " + ago.String() + " ago (its queue to the accountant was full: " + itoa(int64(maxUnacked)) +
		" rows per VM unacknowledged), so spend it served is missing from the counters; it trusts them again " + dropTrust.String() + " after the last drop"
}

// logDrops logs, at most once per dropLogEvery, how many rows this VM
// dropped since it last said so (tick).
func (e *Engine) logDrops(now time.Time) {
	n := e.rows.dropped - e.dropLogged
	if n == 0 || now.Before(e.dropLogNext) {
		return
	}
	e.logf(LogError, "ledger: dropped %d rows since the last report (%d in all): this VM holds %d rows the accountant has not acknowledged, the most it keeps; spend and quota counters miss the dropped ones, and fail: closed + hard spend limits answer 503 until %s after the last drop",
		n, e.rows.dropped, e.rows.lag(), dropTrust)
	e.dropLogged = e.rows.dropped
	e.dropLogNext = now.Add(dropLogEvery)
}

func (e *Engine) publishTee(now time.Time) {
	lag, dropped := e.rows.lag(), e.rows.dropped
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
		b = binary.LittleEndian.AppendUint32(b, uint32(lag))
		b = binary.LittleEndian.AppendUint64(b, dropped)
		b = binary.LittleEndian.AppendUint64(b, uint64(ns+int64(e.leaseTTL)))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.rows.droppedAt))
		b[0] = byte(n + 1)
		e.buf = b
		ok, err := e.cells.setNew(teeKey, b, cas, found)
		if err != nil {
			return
		}
		if ok {
			e.teeLag, e.teeDropped, e.teeDropAt = lag, dropped, e.rows.droppedAt
			return
		}
		e.cells.retries++
	}
}

// bound sums the live tee figures of every VM of the host; this VM's own
// figures are current, the others' as of their last tick.
func (e *Engine) bound(now time.Time) wire.Bound {
	b := wire.Bound{TeeLagRows: int64(e.rows.lag()), DroppedRows: int64(e.rows.dropped)}
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
