package feed

import (
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Snapshot is the spend snapshot as a change feed: each full snapshot the
// accountant's core builds is diffed into a Log when its version moves, so
// a poll gets the counters that moved since its cursor, not every counter.
// It is not safe for concurrent use.
type Snapshot struct {
	version string // of the snapshot last diffed
	log     *Log[Counter]
	next    map[string]Counter // scratch, reused
	order   []string
}

// Counter is one counter's period start (Unix seconds) and value.
type Counter struct {
	Start, Value int64
}

// NewSnapshot returns an empty snapshot feed named id.
func NewSnapshot(id string) *Snapshot {
	return &Snapshot{log: New[Counter](id, 0), next: map[string]Counter{}}
}

// PerValue says, for a limit id, whether the limit keeps a counter per
// value (a model, customer or tag pattern) and, if so, the start of its
// counters' dims field that all its values share (what
// govern.DistinctBase adds after the node, e.g. "model=").
type PerValue func(limitID string) (dims string, ok bool)

// Update diffs snap into the feed when its version moved: every entry
// whose value or period moved, and, for each limit perValue says is
// counted per value, the fullest of its counters at each node
// (syncwire.FullestSuffix); what the snapshot no longer has is removed.
func (f *Snapshot) Update(snap syncwire.Snapshot, perValue PerValue) {
	if snap.Version == f.version && f.version != "" {
		return
	}
	f.version = snap.Version
	fullest := f.next // the fullest counter of each per-value instance
	clear(fullest)
	f.order = f.order[:0]
	f.log.Mark()
	// In the snapshot's order (by identity), the fullest entries after
	// the counters: the same snapshot, the same feed.
	for _, e := range snap.Entries {
		c := Counter{Start: e.PeriodStart.Unix(), Value: e.Value}
		f.log.Put(e.ID, c)
		if base, ok := fullestBase(e.ID, perValue); ok {
			if cur, seen := fullest[base]; !seen || c.Value > cur.Value {
				if !seen {
					f.order = append(f.order, base)
				}
				fullest[base] = c
			}
		}
	}
	for _, base := range f.order {
		f.log.Put(base+syncwire.FullestSuffix, fullest[base])
	}
	f.log.Sweep()
}

// Len is the number of entries the feed holds.
func (f *Snapshot) Len() int { return f.log.Len() }

// FullestID is the id of the fullest-value entry the counter id counts
// towards: its instance's govern.DistinctBase (the identity up to its
// node, and its dims field up to the first per-value dim's value), then
// syncwire.FullestSuffix. ok is false for a companion entry (#...) and for
// a limit perValue says is not counted per value.
func FullestID(id string, perValue PerValue) (string, bool) {
	base, ok := fullestBase(id, perValue)
	if !ok {
		return "", false
	}
	return base + syncwire.FullestSuffix, true
}

// fullestBase is FullestID without the suffix: a slice of id.
func fullestBase(id string, perValue PerValue) (string, bool) {
	if perValue == nil || strings.IndexByte(id, '#') >= 0 {
		return "", false
	}
	limit, _, _ := strings.Cut(id, "|")
	dims, ok := perValue(limit)
	if !ok {
		return "", false
	}
	// <id>|<type>|<node>|<dims>|...: the node escapes "|".
	end := 0
	for range 3 {
		i := strings.IndexByte(id[end:], '|')
		if i < 0 {
			return "", false
		}
		end += i + 1
	}
	if !strings.HasPrefix(id[end:], dims) {
		return "", false
	}
	return id[:end+len(dims)], true
}

// Page is the feed's page after cursor, bounded by maxBytes.
func (f *Snapshot) Page(cursor string, maxBytes int) syncwire.SnapshotPage {
	changes, p := f.log.Page(cursor, maxBytes, func(c Change[Counter]) int {
		if c.Gone {
			return len(c.Key) + 3
		}
		return len(c.Key) + 64 // {"id":…,"period_start":"…","value":…}
	})
	out := syncwire.SnapshotPage{Page: p}
	for _, c := range changes {
		if c.Gone {
			out.Removed = append(out.Removed, c.Key)
			continue
		}
		out.Entries = append(out.Entries, syncwire.Entry{ID: c.Key, PeriodStart: time.Unix(c.Value.Start, 0).UTC(), Value: c.Value.Value})
	}
	return out
}
