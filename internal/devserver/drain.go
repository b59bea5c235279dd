package devserver

import (
	"context"
	"encoding/binary"
	"time"
)

// Each worker VM keeps its ledger rows until the accountant acknowledges
// them and publishes how many it still holds on every tick, in the shared
// cell the filter's 429 bounds are read from (filter/tee.go):
//
//	tt/tee: n u8 | n × (vm u32, lag u32, dropped u64, expires i64 unix ns,
//	                    last drop i64 unix ns, oldest unacked i64 unix ns)
//
// After the gateway has stopped, every VM ticks at least once more (so a
// row queued by the last request is counted), and the drain waits until
// every VM reports none left.
const (
	teeKey       = "tt/tee"
	teeEntrySize = 40
)

// ledgerLag sums the rows the VMs still hold, from the tee cell; ok is
// false when the cell is not in that format.
func ledgerLag(b []byte, now time.Time) (lag int, ok bool) {
	if len(b) == 0 {
		return 0, true
	}
	n := int(b[0])
	if len(b) != 1+n*teeEntrySize {
		return 0, false
	}
	for i := 0; i < n; i++ {
		e := b[1+i*teeEntrySize:]
		if int64(binary.LittleEndian.Uint64(e[16:])) <= now.UnixNano() {
			continue // a VM long gone
		}
		lag += int(binary.LittleEndian.Uint32(e[4:]))
	}
	return lag, true
}

// drain waits until the filters have handed every ledger row to the
// accountant, and returns how many are left when ctx ends first.
func (s *Server) drain(ctx context.Context, stopped time.Time) (int, error) {
	settle := time.NewTimer(time.Until(stopped.Add(2*s.tick + pollEvery)))
	select {
	case <-settle.C:
	case <-ctx.Done():
		settle.Stop()
	}
	lag := 0
	for {
		b, _, found := s.host.SharedData(teeKey)
		n, ok := ledgerLag(b, time.Now())
		if !found || !ok {
			// No VM has published (no request was ever served), or the
			// filter keeps another format: nothing to wait for here.
			return 0, nil
		}
		lag = n
		if lag == 0 {
			return 0, nil
		}
		if err := s.sleep(ctx); err != nil {
			return lag, err
		}
	}
}
