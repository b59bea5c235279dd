package filter

import (
	"encoding/binary"
	"time"
)

// Cells live in shared data under their counter identity (govern.Identity):
// a limit id starts every identity and no limit id contains '/', so the
// filter's own keys, all under "tt/", never collide with a counter.
const (
	lockKey    = "tt/lock"
	lockHold   = time.Second // a lock older than this was lost with its VM
	emptyValue = "\x00"      // what a freshly created cell holds
)

// cells is the compare-and-swap layer over Store shared by every limit
// class. One per VM; not safe for concurrent use (a VM is single-threaded).
type cells struct {
	store   Store
	vm      uint32
	scratch []byte
	retries uint64            // CAS retries, for the metric
	held    map[string]uint32 // leases this VM holds, per gauge key
}

// create makes key exist without ever overwriting a value another VM wrote.
//
// Shared data has no set-if-absent: a set on a missing key succeeds whatever
// its cas, so two VMs that both find a key missing and both create it could
// each wipe the other's first update. Creation therefore happens under a
// lock cell, itself created when the VM starts (see RATIONALE.md, "Why a
// creation lock for shared-data cells?"). It runs once per counter per host
// process.
func (c *cells) create(key string, now time.Time) error {
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		lv, lcas, found, err := c.store.Get(lockKey)
		if err != nil {
			return err
		}
		if !found {
			if _, err := c.store.Set(lockKey, lockValue(c.scratch[:0], 0, 0), 0); err != nil {
				return err
			}
			continue
		}
		holder, until := decodeLock(lv)
		if holder != 0 && holder != c.vm && now.UnixNano() < until {
			c.retries++
			continue
		}
		c.scratch = lockValue(c.scratch[:0], c.vm, now.Add(lockHold).UnixNano())
		swapped, err := c.store.Set(lockKey, c.scratch, lcas)
		if err != nil {
			return err
		}
		if !swapped {
			c.retries++
			continue
		}
		_, _, exists, err := c.store.Get(key)
		if err == nil && !exists {
			_, err = c.store.Set(key, []byte(emptyValue), 0)
		}
		// Release: we hold the lock, so an unconditional set cannot clobber
		// another holder.
		if _, rerr := c.store.Set(lockKey, lockValue(c.scratch[:0], 0, 0), 0); err == nil {
			err = rerr
		}
		return err
	}
	return errContention
}

// ensureLock creates the lock cell when the VM starts, before any request.
func (c *cells) ensureLock() error {
	_, _, found, err := c.store.Get(lockKey)
	if err != nil || found {
		return err
	}
	_, err = c.store.Set(lockKey, lockValue(c.scratch[:0], 0, 0), 0)
	return err
}

func lockValue(dst []byte, vm uint32, until int64) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, vm)
	return binary.LittleEndian.AppendUint64(dst, uint64(until))
}

func decodeLock(b []byte) (vm uint32, until int64) {
	if len(b) != 12 {
		return 0, 0
	}
	return binary.LittleEndian.Uint32(b), int64(binary.LittleEndian.Uint64(b[4:]))
}
