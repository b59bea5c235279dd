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
//	n u8 | n × (vm u32, lag u32, dropped u64, expires i64 unix ns)
//
// and a refusal sums the live entries (one shared-data read, on the
// refusal path only).
const (
	teeKey       = "tt/tee"
	teeEntrySize = 24
)

func (e *Engine) teeChanged() bool {
	return e.rows.lag() != e.teeLag || e.rows.dropped != e.teeDropped
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
		b[0] = byte(n + 1)
		e.buf = b
		ok, err := e.cells.setNew(teeKey, b, cas, found)
		if err != nil {
			return
		}
		if ok {
			e.teeLag, e.teeDropped = lag, dropped
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
