package filter

import (
	"encoding/binary"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/rate"
)

// Leases (RATIONALE.md, "How do leases keep a fleet limit without a round
// trip per request?"). A fleet limit (store: redis rpm and tpm, a budget
// or quota in reserve mode when the accountant has the fleet's Redis, a
// concurrency limit under store: share) is decided by the replica alone,
// in its shared data, against a lease: a slice of the limit's remaining
// amount its accountant took from Redis, atomically, for it. Every VM of
// the host draws on the lease with compare-and-swap, as on a store: local
// cell; a draw that leaves it low asks for more ahead of need, off the
// request path; a request that finds it empty waits for a refill (at most
// shared_state.redis.timeout and the way to the accountant and back), as
// one call per VM however many requests wait. Redis never leases more than
// it holds, so the fleet never admits more than the amount; what a
// replica does not use goes back at the lot's end, when it idles and when
// it stops, and a lost replica's lease lapses.
//
// With Redis not deciding (down, past its deadline, or counting the
// fleet's leases again after it lost its data) the replica goes on inside
// the lease it holds; past it the limit is uncheckable: fail: closed with
// enforce: hard answers 503, otherwise the replica admits within its share
// (the amount left as it last knew it over the replicas it last knew,
// rounded up) and every such answer says suspended.
//
// A lease cell, one per instance and replica (shared data):
//
//	u8 version | u8 kind | 21 × i64 (leaseCell's fields, in order) | n × (u32 vm, i64 held, i64 expires)
//
// the holds being a spend lease's calls in flight, as in a spend cell.

// Lease cell kinds.
const (
	kindRate  byte = 'r' // store: redis rpm and tpm
	kindSpend byte = 's' // reserve mode with the fleet's Redis
	kindSlots byte = 'c' // concurrency under store: share
)

// leaseKey is the shared-data key of instance id's lease of kind.
func leaseKey(kind byte, id string) string { return "tt/lease/" + string(kind) + "|" + id }

// shareKey is the cell a store: redis rate instance answers from while
// the fleet does not decide: the replica's share of the limit.
func shareKey(id string) string { return "tt/lease/f|" + id }

const leaseCellVersion = 1

// leaseCell is one lease as the replica holds it. Instants are unix ns
// by the filter's clock.
type leaseCell struct {
	kind byte
	// units: rate, the lot's drawable units; spend, what was granted and
	// not given back (G); slots, the slots held.
	units int64
	// expires: rate, until when the lot may be drawn on; spend and slots,
	// until when Redis counts the lease without a renewal.
	expires int64
	// anchor names the rate lot (its window index, or gcra's instant);
	// spend, the period start (unix s).
	anchor int64
	// granted: rate, the units taken into this lot in all; spend, the
	// limit's amount.
	granted int64
	// lotAt: when the lot (rate) or the lease (spend, slots) began.
	lotAt int64
	// drawn: rate, the units drawn from this lot; spend, what this
	// replica's calls settled this period (S).
	drawn    int64
	lastUse  int64
	refillAt int64 // a refill ahead of need is out since
	renewAt  int64 // the lease was last renewed (claimed by one VM)
	// noneUntil: the fleet said nothing is left until then.
	noneUntil int64
	// downSince: Redis has not decided since then (0: it decides).
	downSince int64
	// The fleet's last answer, at seenAt: rate, its cell's limit,
	// remaining and reset (ns); spend, its spend, what is left and what
	// calls in flight hold; slots, the others' slots.
	seenAt         int64
	fleetA, fleetB int64
	fleetC         int64
	replicas       int64 // the fleet's replicas as last answered
	shareUsed      int64 // spend: admitted past the lease while Redis did not decide
	// backUnits of the lot backAnchor go back to Redis with the next
	// lease call (a rate lot replaced or ended with units left).
	backUnits, backAnchor int64
	// lastCost is the last request's cost (the least a refill brings).
	lastCost int64
	// retryAt: when the fleet said what a refused request needs frees
	// (noneUntil is sooner: others give back what they do not use).
	retryAt int64
	holds   []spendHold
}

// answered takes what every decided lease answer says, whatever its kind:
// Redis decides again, an earlier "nothing is left" is cleared (the
// caller sets it anew from this answer), the fleet's replicas as it
// counts them, and a refill ahead of need is no longer out.
func (c *leaseCell) answered(a *leaseAsk, ans leaseAnswer) {
	c.downSince, c.noneUntil = 0, 0
	if ans.replicas > 0 {
		c.replicas = ans.replicas
	}
	if !a.wait {
		c.refillAt = 0
	}
}

const leaseFields = 21

const leaseFixed = 2 + leaseFields*8

func decodeLeaseCell(v []byte) (leaseCell, bool) {
	if len(v) < leaseFixed || v[0] != leaseCellVersion || (len(v)-leaseFixed)%spendHoldSize != 0 {
		return leaseCell{}, false
	}
	c := leaseCell{kind: v[1]}
	f := c.fields()
	p := 2
	for _, x := range f {
		*x = int64(binary.LittleEndian.Uint64(v[p:]))
		p += 8
	}
	p = leaseFixed
	for ; p < len(v); p += spendHoldSize {
		c.holds = append(c.holds, spendHold{
			vm:      binary.LittleEndian.Uint32(v[p:]),
			held:    int64(binary.LittleEndian.Uint64(v[p+4:])),
			expires: int64(binary.LittleEndian.Uint64(v[p+12:])),
		})
	}
	return c, true
}

func (c *leaseCell) appendTo(dst []byte) []byte {
	dst = append(dst, leaseCellVersion, c.kind)
	for _, x := range c.fields() {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(*x))
	}
	for _, h := range c.holds {
		dst = binary.LittleEndian.AppendUint32(dst, h.vm)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(h.held))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(h.expires))
	}
	return dst
}

// fields are the cell's numbers in their order in shared data.
func (c *leaseCell) fields() [leaseFields]*int64 {
	return [leaseFields]*int64{&c.units, &c.expires, &c.anchor, &c.granted, &c.lotAt, &c.drawn, &c.lastUse, &c.refillAt,
		&c.renewAt, &c.noneUntil, &c.downSince, &c.seenAt, &c.fleetA, &c.fleetB, &c.fleetC, &c.replicas, &c.shareUsed,
		&c.backUnits, &c.backAnchor, &c.lastCost, &c.retryAt}
}

// held is what the live holds of a spend lease hold at now.
func (c *leaseCell) held(now int64) int64 {
	n := int64(0)
	for _, h := range c.holds {
		if h.expires > now && h.held > 0 {
			n = addSpend(n, h.held)
		}
	}
	return n
}

// hold adds delta to vm's hold in a spend lease, as spendCell.hold.
func (c *leaseCell) hold(vm uint32, delta int64, now time.Time, ttl time.Duration) {
	sc := spendCell{holds: c.holds}.hold(vm, delta, now, ttl)
	c.holds = sc.holds
}

// leaseGet reads the lease cell at key: its value and cas, or a fresh
// cell of kind when absent or unreadable.
func (e *Engine) leaseGet(key string, kind byte) (leaseCell, uint32, bool, error) {
	v, cas, found, err := e.cells.store.Get(key)
	if err != nil {
		return leaseCell{}, 0, false, err
	}
	c, ok := decodeLeaseCell(v)
	if !found || !ok || c.kind != kind {
		c = leaseCell{kind: kind}
	}
	return c, cas, found, nil
}

// leaseUpdate applies f to the lease cell at key by compare-and-swap, until
// it lands; f returns false to write nothing. It returns the cell as
// written (or as read, when f wrote nothing).
func (e *Engine) leaseUpdate(key string, kind byte, f func(c *leaseCell) bool) (leaseCell, error) {
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		c, cas, found, err := e.leaseGet(key, kind)
		if err != nil {
			return c, err
		}
		if !f(&c) {
			return c, nil
		}
		e.cells.scratch = c.appendTo(e.cells.scratch[:0])
		swapped, err := e.cells.setNew(key, e.cells.scratch, cas, found)
		if err != nil {
			return c, err
		}
		if swapped {
			return c, nil
		}
		e.cells.retries++
	}
	return leaseCell{}, errContention
}

// leased reports whether instance in is decided on a lease.
func (e *Engine) leased(in *govern.Instance) bool { return e.leasedLimit(in.Limit) }

// leasedLimit reports whether the instances of l are decided on leases.
func (e *Engine) leasedLimit(l *govern.Limit) bool {
	if e.host.Caller == nil || l.Mode == govern.ModeOff {
		return false
	}
	switch {
	case l.Store == govern.StoreRedis && (l.Type == govern.RPM || l.Type == govern.TPM):
		return l.Algorithm != rate.TokenBucket
	case l.Type == govern.Concurrency && l.Store == govern.StoreShare:
		return e.fleetStore
	case l.Reserve && l.Type.Class() == govern.LedgerSettled:
		return e.fleetStore
	}
	return false
}

// A per-value instance's lease cells are those of its value's slot
// (distinct.go): the key the slot's cells go by, Instance.CellKey. A slot
// passes to another value only once its leases hold nothing (leaseDrained),
// and the new value starts from empty lease cells (clearLeases), so no unit
// of one value's counter in Redis is ever drawn on, or given back, for
// another's.

// leaseDrained reports whether the lease cells of a slot (cell) hold
// nothing its value could still draw on or give back: no units in a lot
// still open, nothing granted and held, no refill out.
func (e *Engine) leaseDrained(l *govern.Limit, cell string, now time.Time) bool {
	kind := leaseKind(l)
	c, _, found, err := e.leaseGet(leaseKey(kind, cell), kind)
	if err != nil {
		return false
	}
	if !found {
		return true
	}
	ns := now.UnixNano()
	if c.refillAt != 0 && ns-c.refillAt < int64(e.leaseTimeout()) {
		return false
	}
	switch kind {
	case kindRate:
		return (c.units <= 0 || c.expires <= ns) && c.backUnits == 0
	case kindSpend:
		return c.held(ns) == 0 && (c.units <= c.drawn || c.expires <= ns)
	}
	return c.units <= 0 || c.expires <= ns
}

// clearLeases empties the lease cells of a slot another value has just
// taken over (and, for a rate limit, the share it answered from while the
// fleet did not decide and the fleet's last answer): those that exist.
func (e *Engine) clearLeases(l *govern.Limit, cell string) {
	if !e.leasedLimit(l) {
		return
	}
	kind := leaseKind(l)
	keys := []string{leaseKey(kind, cell)}
	if kind == kindRate {
		keys = append(keys, shareKey(cell), fleetSeenKey(cell))
	}
	for _, key := range keys {
		if _, _, found, err := e.cells.store.Get(key); err != nil || !found {
			continue
		}
		if err := e.cells.put(key, nil); err != nil {
			e.logf(LogWarn, "clearing the lease cell %s for the value that took its slot: %v", key, err)
		}
	}
	delete(e.unclaimed, leaseKey(kind, cell))
}

// leaseKind is the kind of lease the instances of l are decided on.
func leaseKind(l *govern.Limit) byte {
	switch {
	case l.Type == govern.Concurrency:
		return kindSlots
	case l.Type.Class() == govern.LedgerSettled:
		return kindSpend
	}
	return kindRate
}

// replicaShare is ceil(left / replicas): what one replica may admit past
// its lease while the fleet does not decide.
func replicaShare(left, replicas int64) int64 {
	if left <= 0 {
		return 0
	}
	n := max(replicas, 1)
	return left/n + min(left%n, 1)
}

// fleetSeenKey is where a replica keeps the fleet's last answer for a
// store: redis instance, as a cell (shared by every VM of the replica).
func fleetSeenKey(id string) string { return "tt/fleet|" + id }

// noteFleetSeen keeps the fleet's answer for instance in, for /tt/v1/me:
// the cell it describes (rate.FromResult), drained to its now. A write
// that fails costs only that page's figure, never the request.
func (e *Engine) noteFleetSeen(in *govern.Instance, res rate.Result, now time.Time) {
	st := rate.FromResult(in.Limit.Algorithm, res, now, e.rateParams(in))
	e.cells.scratch = st.AppendBinary(e.cells.scratch[:0])
	_ = e.cells.put(fleetSeenKey(in.CellKey()), e.cells.scratch)
}
