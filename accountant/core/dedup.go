package core

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// requestKey is a request id packed into 17 bytes (the 26 base32
// characters after "tt_", 5 bits each: the packing is exact, so two ids
// never share a key) and, in the last byte, the class of row it keys
// (keyEnd, keyStart, keyClose): a request is recorded once as each of its
// start, its close and its end.
type requestKey [18]byte

// The classes of row a request id is deduplicated in.
const (
	keyEnd   byte = iota // a finished request, or a summary (its own id)
	keyStart             // an admitted call's start
	keyClose             // the accountant's estimated close
)

// classOf is the dedup class of a row kind.
func classOf(k ledger.Kind) byte {
	switch k {
	case ledger.KindStart:
		return keyStart
	case ledger.KindClose:
		return keyClose
	}
	return keyEnd
}

// as returns k keying the class c of the same request.
func (k requestKey) as(c byte) requestKey { k[17] = c; return k }

// errRequestID marks a malformed request id.
var errRequestID = errors.New("request_id")

// parseRequestID checks the request id grammar (tt_ + 26 lowercase base32
// characters, no padding) and packs it.
func parseRequestID(id string) (requestKey, error) {
	var k requestKey
	if len(id) != 29 || id[:3] != "tt_" {
		return k, fmt.Errorf("%w %q is not tt_ followed by 26 lowercase base32 characters", errRequestID, truncate(id))
	}
	var bit uint
	for i := 3; i < len(id); i++ {
		c := id[i]
		var v byte
		switch {
		case c >= 'a' && c <= 'z':
			v = c - 'a'
		case c >= '2' && c <= '7':
			v = c - '2' + 26
		default:
			return k, fmt.Errorf("%w %q is not tt_ followed by 26 lowercase base32 characters", errRequestID, truncate(id))
		}
		for b := 4; b >= 0; b-- {
			if v>>uint(b)&1 == 1 {
				k[bit/8] |= 1 << (7 - bit%8)
			}
			bit++
		}
	}
	return k, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// dedup remembers the request ids of recorded rows so a retried batch never
// counts twice.
//
// Retention: the ids of every row whose end time is at or after the
// horizon, where the horizon is the earlier of (now − Window) and the
// start of the earliest current calendar period (this month's or this ISO
// week's start), rounded down to the hour. So a row is deduplicated against
// everything within Window of now (48 h by default) and everything in the
// current day, week and month. Memory is bounded by MaxIDs: when more ids
// than that are held, whole hours are forgotten oldest first and the
// horizon moves forward. A row that ended before the horizon cannot be
// checked and is rejected with its reason, never counted blindly.
type dedup struct {
	ids   map[requestKey]seen
	hours map[int64]*[]requestKey // hour of the row's end → ids
	// last caches the list of the hour inserted into last.
	last     *[]requestKey
	lastHour int64
	horizon  int64 // Unix hour; rows ending before it are too old
	maxIDs   int
}

type seen struct {
	tag  uint64 // the durable-commit sequence the row was written under
	hour int64
}

func newDedup(maxIDs int) *dedup {
	return &dedup{ids: map[requestKey]seen{}, hours: map[int64]*[]requestKey{}, maxIDs: maxIDs}
}

func hourOf(t time.Time) int64 { return floorDiv(t.Unix(), 3600) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// lookup reports whether k was recorded, and under which tag.
func (d *dedup) lookup(k requestKey) (uint64, bool) {
	s, ok := d.ids[k]
	return s.tag, ok
}

// tooOld reports whether a row ending at end lies before the horizon.
func (d *dedup) tooOld(end time.Time) bool { return hourOf(end) < d.horizon }

func (d *dedup) insert(k requestKey, end time.Time, tag uint64) {
	h := hourOf(end)
	d.ids[k] = seen{tag: tag, hour: h}
	if d.last == nil || d.lastHour != h {
		l, ok := d.hours[h]
		if !ok {
			l = &[]requestKey{}
			d.hours[h] = l
		}
		d.last, d.lastHour = l, h
	}
	*d.last = append(*d.last, k)
}

// forget drops k when it was recorded under tag (a commit that failed);
// its hour list keeps a stale entry, which prune skips.
func (d *dedup) forget(k requestKey, tag uint64) {
	if s, ok := d.ids[k]; ok && s.tag == tag {
		delete(d.ids, k)
	}
}

// prune forgets the hours before horizon (a Unix hour), then, while more
// than maxIDs ids are held, the oldest hours before keep (the cap never
// forgets the last two hours, which retries need most). It returns the
// horizon in force afterwards.
func (d *dedup) prune(horizon, keep int64) int64 {
	if horizon > d.horizon {
		d.horizon = horizon
	}
	hours := make([]int64, 0, len(d.hours))
	for h := range d.hours {
		hours = append(hours, h)
	}
	sort.Slice(hours, func(i, j int) bool { return hours[i] < hours[j] })
	for _, h := range hours {
		if h >= d.horizon && (d.maxIDs <= 0 || len(d.ids) <= d.maxIDs || h >= keep) {
			break
		}
		for _, k := range *d.hours[h] {
			if s, ok := d.ids[k]; ok && s.hour == h {
				delete(d.ids, k)
			}
		}
		delete(d.hours, h)
		if d.lastHour == h {
			d.last = nil
		}
		if h+1 > d.horizon {
			d.horizon = h + 1
		}
	}
	return d.horizon
}

func (d *dedup) len() int { return len(d.ids) }
