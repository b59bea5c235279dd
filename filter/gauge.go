package filter

import (
	"encoding/binary"
	"time"
)

// A concurrency gauge is a shared-data cell holding, per VM that holds
// leases on it, the VM id, its lease count and when that entry expires:
//
//	n u8 | n × (vm u32, count u32, expires i64 unix ns)
//
// The gauge is the sum of the live entries. A VM refreshes the expiry of its
// entries while it holds leases (on tick), so an entry outlives its VM by at
// most the lease TTL: leases held by a VM that trapped or was torn down come
// back on their own (seed 003's reservation expiry, DESIGN "Beyond the
// seeds"). Entries are bounded by the number of VMs in the host process.
const gaugeEntrySize = 16

type gaugeEntry struct {
	vm      uint32
	count   uint32
	expires int64
}

// gaugeOthers sums the live entries of other VMs in a gauge cell at now;
// this VM's own leases are its local tally, added by the caller. It never
// allocates; an unreadable cell reads as empty and is rewritten clean.
func gaugeOthers(v []byte, vm uint32, now int64) (live int64) {
	if len(v) == 0 || len(v) != 1+int(v[0])*gaugeEntrySize {
		return 0
	}
	for i := 0; i < int(v[0]); i++ {
		if e := decodeGaugeEntry(v, i); e.vm != vm && e.expires > now {
			live += int64(e.count)
		}
	}
	return live
}

func decodeGaugeEntry(v []byte, i int) gaugeEntry {
	b := v[1+i*gaugeEntrySize:]
	return gaugeEntry{
		vm:      binary.LittleEndian.Uint32(b),
		count:   binary.LittleEndian.Uint32(b[4:]),
		expires: int64(binary.LittleEndian.Uint64(b[8:])),
	}
}

// gaugeRewrite writes the cell with this VM's entry set to count (the
// VM's own tally of the leases it holds, which is the truth about them) and
// its expiry refreshed, dropping expired entries of other VMs and entries
// with no leases.
func gaugeRewrite(dst, v []byte, vm uint32, count uint32, now, expires int64) []byte {
	dst = append(dst[:0], 0)
	n := 0
	if len(v) > 0 && len(v) == 1+int(v[0])*gaugeEntrySize {
		for i := 0; i < int(v[0]) && n < 254; i++ {
			e := decodeGaugeEntry(v, i)
			if e.vm == vm || e.expires <= now || e.count == 0 {
				continue
			}
			dst = appendGaugeEntry(dst, e)
			n++
		}
	}
	if count > 0 {
		dst = appendGaugeEntry(dst, gaugeEntry{vm: vm, count: count, expires: expires})
		n++
	}
	dst[0] = byte(n)
	return dst
}

func appendGaugeEntry(dst []byte, e gaugeEntry) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, e.vm)
	dst = binary.LittleEndian.AppendUint32(dst, e.count)
	return binary.LittleEndian.AppendUint64(dst, uint64(e.expires))
}

// gaugeAcquire takes one lease on the gauge at key when the live gauge is
// below limit (or unconditionally with force). It returns whether the lease
// was taken and the live gauge it saw before taking it. Uncontended it is
// one get and one set, the first lease on a gauge included; a refusal
// writes nothing.
func (c *cells) gaugeAcquire(key string, limit int64, force bool, now time.Time, ttl time.Duration) (taken bool, live int64, h *gaugeHold, err error) {
	ns := now.UnixNano()
	h = c.held[key]
	if h == nil {
		h = &gaugeHold{key: key}
		c.held[key] = h
	}
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		v, cas, found, err := c.store.Get(key)
		if err != nil {
			return false, 0, nil, err
		}
		live = gaugeOthers(v, c.vm, ns) + int64(h.count)
		if live >= limit && !force {
			return false, live, nil, nil
		}
		c.scratch = gaugeRewrite(c.scratch, v, c.vm, h.count+1, ns, ns+int64(ttl))
		swapped, err := c.setNew(key, c.scratch, cas, found)
		if err != nil {
			return false, live, nil, err
		}
		if swapped {
			h.count++
			return true, live, h, nil
		}
		c.retries++
	}
	return false, 0, nil, errContention
}

// gaugeHold is this VM's tally of the leases it holds on one gauge. A
// lease keeps a pointer to it, so releasing needs no map lookup; holds
// stay in the map while the VM lives (one per gauge it has used), and a
// hold at zero costs nothing on the tick.
type gaugeHold struct {
	key   string
	count uint32
}

// gaugeRelease returns one lease this VM holds on the gauge h tallies.
func (c *cells) gaugeRelease(h *gaugeHold, now time.Time, ttl time.Duration) error {
	if h == nil || h.count == 0 {
		return nil // nothing held: a double release frees nothing
	}
	h.count--
	return c.gaugeWrite(h.key, h.count, now, ttl)
}

// gaugeRefreshAll pushes forward the expiry of this VM's entry on every
// gauge it holds leases on. Called from the tick.
func (c *cells) gaugeRefreshAll(now time.Time, ttl time.Duration) {
	for key, h := range c.held {
		if h.count > 0 {
			_ = c.gaugeWrite(key, h.count, now, ttl)
		}
	}
}

// holding reports how many gauges this VM holds leases on.
func (c *cells) holding() int {
	n := 0
	for _, h := range c.held {
		if h.count > 0 {
			n++
		}
	}
	return n
}

// gaugeWrite sets this VM's entry on the gauge at key to count.
func (c *cells) gaugeWrite(key string, count uint32, now time.Time, ttl time.Duration) error {
	ns := now.UnixNano()
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		v, cas, found, err := c.store.Get(key)
		if err != nil {
			return err
		}
		if !found && count == 0 {
			return nil
		}
		c.scratch = gaugeRewrite(c.scratch, v, c.vm, count, ns, ns+int64(ttl))
		swapped, err := c.setNew(key, c.scratch, cas, found)
		if err != nil {
			return err
		}
		if swapped {
			return nil
		}
		c.retries++
	}
	return errContention
}

// gaugeRead returns the live gauge at key.
func (c *cells) gaugeRead(key string, now time.Time) (int64, error) {
	v, _, found, err := c.store.Get(key)
	if err != nil {
		return 0, err
	}
	var mine int64
	if h := c.held[key]; h != nil {
		mine = int64(h.count)
	}
	if !found {
		return mine, nil
	}
	return gaugeOthers(v, c.vm, now.UnixNano()) + mine, nil
}
