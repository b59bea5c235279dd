package filter

import (
	"encoding/binary"
	"time"
)

// A reserve-mode spend cell (spendKey) holds this replica's spend on one
// instance in one calendar period: what its calls settled, and what the
// calls in flight hold, one entry per VM with an expiry, as a concurrency
// gauge does (RATIONALE.md, "Why does each VM keep its own entry in a
// concurrency gauge, with an expiry?"). A VM pushes its entry's expiry
// forward from its tick; a VM that is lost (a trap, a replaced plugin
// configuration) stops doing so, and what its calls held stops counting
// one lease TTL (15 minutes, seed 003's reservation expiry) after its last
// tick, instead of holding the budget until the period ends.
//
//	i64 period start (unix s) | i64 settled (nanodollars) | n × (u32 vm, i64 held, i64 expires unix ns)
//
// A 16-byte cell (the form before holds had owners) reads as settled
// spend.

type spendCell struct {
	start, settled int64
	holds          []spendHold
}

type spendHold struct {
	vm      uint32
	held    int64
	expires int64
}

const spendHoldSize = 4 + 8 + 8

// decodeSpend reads a spend cell; ok false for anything unreadable.
func decodeSpend(v []byte) (spendCell, bool) {
	if len(v) < 16 || (len(v)-16)%spendHoldSize != 0 {
		return spendCell{}, false
	}
	c := spendCell{start: int64(binary.LittleEndian.Uint64(v)), settled: int64(binary.LittleEndian.Uint64(v[8:]))}
	for p := 16; p < len(v); p += spendHoldSize {
		c.holds = append(c.holds, spendHold{
			vm:      binary.LittleEndian.Uint32(v[p:]),
			held:    int64(binary.LittleEndian.Uint64(v[p+4:])),
			expires: int64(binary.LittleEndian.Uint64(v[p+12:])),
		})
	}
	return c, true
}

func (c spendCell) appendTo(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(c.start))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(c.settled))
	for _, h := range c.holds {
		dst = binary.LittleEndian.AppendUint32(dst, h.vm)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(h.held))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(h.expires))
	}
	return dst
}

// total is the replica's spend at now: settled, and what live holds hold.
func (c spendCell) total(now time.Time) int64 {
	t := c.settled
	ns := now.UnixNano()
	for _, h := range c.holds {
		if h.expires > ns && h.held > 0 {
			t = addSpend(t, h.held)
		}
	}
	return t
}

// hold adds delta to vm's entry (dropping it at 0), sets its expiry, and
// drops every expired entry of another VM.
func (c spendCell) hold(vm uint32, delta int64, now time.Time, ttl time.Duration) spendCell {
	ns := now.UnixNano()
	out := c.holds[:0:0]
	mine := int64(0)
	for _, h := range c.holds {
		switch {
		case h.vm == vm:
			mine = h.held
		case h.expires > ns:
			out = append(out, h)
		}
	}
	if mine = max(mine+delta, 0); mine > 0 {
		out = append(out, spendHold{vm: vm, held: mine, expires: ns + int64(ttl)})
	}
	c.holds = out
	return c
}

func addSpend(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
