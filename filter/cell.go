package filter

// Cells live in shared data under their counter identity (govern.Identity):
// a limit id starts every identity and no limit id contains '/', so the
// filter's own keys, all under "tt/", never collide with a counter.

// absentCAS is the compare-and-swap value a creating set carries. Envoy
// (proxy-wasm.md 3.4) stores a set on a missing key whatever its cas, and
// refuses a set on an existing key whose non-zero cas is not the current
// one. Cas values come from one process-wide counter, so a key another VM
// has just created holds the counter's newest value, which is this one only
// at the single moment in each 2^32 sets that the counter passes it. A set
// with absentCAS is therefore "set if absent" (see RATIONALE.md, "Why are
// shared-data cells created with an impossible cas, not under a lock?").
const absentCAS = 0xffff_ffff

// cells is the compare-and-swap layer over Store shared by every limit
// class. One per VM; not safe for concurrent use (a VM is single-threaded).
type cells struct {
	store   Store
	vm      uint32
	scratch []byte
	retries uint64                // CAS retries, for the metric
	held    map[string]*gaugeHold // leases this VM holds, per gauge key
	// strictCAS is set once the host has shown that it refuses a non-zero
	// cas on a missing key (a host whose every set is a strict
	// compare-and-swap, where cas 0 means "absent"): creating sets then
	// carry 0.
	strictCAS bool
}

// createCAS is the cas a set that creates a key carries on this host.
func (c *cells) createCAS() uint32 {
	if c.strictCAS {
		return 0
	}
	return absentCAS
}

// lostCreation is called when a creating set of key came back swapped
// false. Usually another VM created key first, and the caller retries
// against what it wrote. When key is still missing, the host refused the
// creation itself: every set there is a strict compare-and-swap, where cas
// 0 means "absent", and from now on creations carry 0.
func (c *cells) lostCreation(key string) error {
	_, _, found, err := c.store.Get(key)
	if err == nil && !found {
		c.strictCAS = true
	}
	return err
}

// setNew writes value under key, creating it (found false) or replacing the
// version with cas (found true). It reports whether the write happened;
// false means another VM wrote first and the caller reads again.
func (c *cells) setNew(key string, value []byte, cas uint32, found bool) (bool, error) {
	if found {
		return c.store.Set(key, value, cas)
	}
	swapped, err := c.store.Set(key, value, c.createCAS())
	if err == nil && !swapped {
		err = c.lostCreation(key)
	}
	return swapped, err
}

// put replaces the value under key whatever it holds: for the filter's own
// keys (sync parts and records), written off the request path. On Envoy a
// set with cas 0 overwrites, so it is one set; on a host where every set is
// a compare-and-swap, that set fails on an existing key and put falls back
// to reading the key's cas and swapping.
func (c *cells) put(key string, value []byte) error {
	if swapped, err := c.store.Set(key, value, 0); err != nil || swapped {
		return err
	}
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		_, cas, found, err := c.store.Get(key)
		if err != nil {
			return err
		}
		swapped, err := c.setNew(key, value, cas, found)
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
