// Package feed is a compacted change feed held in memory: the latest
// state of each item by key, each with the sequence number of its last
// change, served in pages after a cursor (shared/syncwire.Page). The
// accountant keeps the spend snapshot's feed in one: a counter that moved
// is one change, however many counters there are.
//
// Removed items are remembered as tombstones, up to a bound; past it the
// oldest are forgotten and the feed's floor rises to the newest of them.
// A cursor below the floor may have missed a removal, so it is answered
// from the start with Reset set, as is a cursor of another feed (another
// id: the accountant restarted) or one ahead of the feed.
package feed

import (
	"slices"
	"sort"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// DefaultMaxGone bounds the tombstones a Log keeps.
const DefaultMaxGone = 1 << 16

// Log is a compacted change feed of values V by string key. It is not
// safe for concurrent use.
type Log[V comparable] struct {
	id      string
	seq     uint64
	floor   uint64
	maxGone int
	gone    int
	items   map[string]*item[V]
	pass    uint64 // the current Mark pass
	// order lists changes by ascending sequence number; a slot whose
	// item has changed since (or was forgotten) is stale and skipped.
	order []slot
}

type item[V comparable] struct {
	v    V
	seq  uint64
	gone bool
	mark uint64 // the Mark pass that last saw it (Sweep)
}

type slot struct {
	key string
	seq uint64
}

// New returns an empty feed named id (a cursor of another id starts
// over). maxGone bounds the tombstones kept (DefaultMaxGone when 0).
func New[V comparable](id string, maxGone int) *Log[V] {
	if maxGone <= 0 {
		maxGone = DefaultMaxGone
	}
	return &Log[V]{id: id, maxGone: maxGone, items: map[string]*item[V]{}}
}

// Put sets the value of key; a value equal to the one held is no change.
func (l *Log[V]) Put(key string, v V) {
	it := l.items[key]
	switch {
	case it == nil:
		it = &item[V]{}
		l.items[key] = it
	case !it.gone && it.v == v:
		it.mark = l.pass
		return
	case it.gone:
		l.gone--
	}
	it.mark = l.pass
	it.v, it.gone = v, false
	l.bump(key, it)
}

// Remove removes key, remembering that it did.
func (l *Log[V]) Remove(key string) {
	it := l.items[key]
	if it == nil || it.gone {
		return
	}
	var zero V
	it.v, it.gone = zero, true
	l.gone++
	l.bump(key, it)
	if l.gone > l.maxGone {
		l.forget()
	}
}

// Mark starts a pass over every item the feed should hold: Put (or
// Keep) each, then Sweep removes those the pass did not name. It avoids a
// set of the names on the side.
func (l *Log[V]) Mark() { l.pass++ }

// Keep notes that key stays, unchanged, in the current pass.
func (l *Log[V]) Keep(key string) {
	if it := l.items[key]; it != nil {
		it.mark = l.pass
	}
}

// Sweep removes every item the current pass did not name.
func (l *Log[V]) Sweep() {
	for k, it := range l.items {
		if !it.gone && it.mark != l.pass {
			l.Remove(k)
		}
	}
}

// Retain removes every key keep says no to.
func (l *Log[V]) Retain(keep func(key string) bool) {
	for k, it := range l.items {
		if !it.gone && !keep(k) {
			l.Remove(k)
		}
	}
}

// Len is the number of items held (tombstones not counted).
func (l *Log[V]) Len() int { return len(l.items) - l.gone }

// Cursor is the cursor of a copy that holds every change.
func (l *Log[V]) Cursor() string { return syncwire.FormatCursor(l.id, l.seq) }

func (l *Log[V]) bump(key string, it *item[V]) {
	l.seq++
	it.seq = l.seq
	l.order = append(l.order, slot{key, l.seq})
	if len(l.order) > 2*len(l.items)+1024 {
		l.compact()
	}
}

// compact drops the stale slots of order.
func (l *Log[V]) compact() {
	out := l.order[:0]
	for _, s := range l.order {
		if it := l.items[s.key]; it != nil && it.seq == s.seq {
			out = append(out, s)
		}
	}
	clear(l.order[len(out):])
	l.order = out
}

// forget drops the oldest half of the tombstones and raises the floor to
// the newest of them.
func (l *Log[V]) forget() {
	var gone []slot
	for k, it := range l.items {
		if it.gone {
			gone = append(gone, slot{k, it.seq})
		}
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i].seq < gone[j].seq })
	drop := gone[:len(gone)-l.maxGone/2]
	for _, s := range drop {
		delete(l.items, s.key)
	}
	l.gone -= len(drop)
	if n := len(drop); n > 0 {
		l.floor = max(l.floor, drop[n-1].seq)
	}
	l.compact()
}

// Change is one item of a page: its key and value, or Gone.
type Change[V comparable] struct {
	Key   string
	Value V
	Gone  bool
}

// Page returns the changes after cursor, in sequence order, until size
// (the bytes each change takes on the wire) adds up to maxBytes (at least
// one change), with the page's cursor, whether it starts the feed over
// (reset) and whether more follows. A page that starts over leaves
// tombstones out: a copy built from the start never held those items.
func (l *Log[V]) Page(cursor string, maxBytes int, size func(Change[V]) int) (out []Change[V], page syncwire.Page) {
	id, after, ok := syncwire.ParseCursor(cursor)
	if !ok || id != l.id || after > l.seq || after < l.floor {
		after, page.Reset = 0, true
	}
	i, _ := slices.BinarySearchFunc(l.order, after+1, func(s slot, seq uint64) int {
		switch {
		case s.seq < seq:
			return -1
		case s.seq > seq:
			return 1
		}
		return 0
	})
	total := 0
	for ; i < len(l.order) && total < maxBytes; i++ {
		s := l.order[i]
		after = s.seq
		it := l.items[s.key]
		if it == nil || it.seq != s.seq || it.gone && page.Reset {
			continue
		}
		c := Change[V]{Key: s.key, Value: it.v, Gone: it.gone}
		out = append(out, c)
		total += size(c)
	}
	if i == len(l.order) {
		after = l.seq
	}
	page.Cursor = syncwire.FormatCursor(l.id, after)
	page.More = after < l.seq
	return out, page
}
