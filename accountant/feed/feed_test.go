package feed

import (
	"fmt"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

func pageAll(l *Log[int], cursor string, maxBytes int) (out []Change[int], pages []syncwire.Page) {
	for {
		cs, p := l.Page(cursor, maxBytes, func(Change[int]) int { return 10 })
		out = append(out, cs...)
		pages = append(pages, p)
		if !p.More {
			return out, pages
		}
		cursor = p.Cursor
	}
}

// TestLogPages: a first read brings every item once, in pages; then only
// what changed after the cursor comes, a removal as gone; a value put
// again unchanged is no change.
func TestLogPages(t *testing.T) {
	l := New[int]("a", 0)
	for i := range 100 {
		l.Put(fmt.Sprint(i), i)
	}
	all, pages := pageAll(l, "", 100)
	if len(all) != 100 || len(pages) != 10 || !pages[0].Reset || pages[1].Reset {
		t.Fatalf("first read: %d changes in %d pages", len(all), len(pages))
	}
	for i, c := range all {
		if c.Key != fmt.Sprint(i) || c.Value != i || c.Gone {
			t.Fatalf("change %d: %+v", i, c)
		}
	}
	held := pages[len(pages)-1].Cursor
	if held != l.Cursor() {
		t.Errorf("cursor %s after the last page, feed at %s", held, l.Cursor())
	}
	l.Put("7", 7) // unchanged
	l.Put("8", 80)
	l.Remove("9")
	l.Put("8", 81) // twice: once in the feed
	got, _ := pageAll(l, held, 1000)
	want := []Change[int]{{Key: "9", Gone: true}, {Key: "8", Value: 81}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the changes: %+v, want %+v", got, want)
	}
	// Read from the start again: the removed item is left out.
	again, _ := pageAll(l, "", 10_000)
	if len(again) != 99 || l.Len() != 99 {
		t.Errorf("a new copy gets %d items (the feed holds %d), want 99", len(again), l.Len())
	}
	for _, c := range again {
		if c.Gone {
			t.Errorf("a new copy got a removal: %+v", c)
		}
	}
}

// TestLogForgetsRemovals: past its bound of removals the feed forgets the
// oldest, and a cursor from before them starts over; a recent cursor
// still gets the removals it missed.
func TestLogForgetsRemovals(t *testing.T) {
	l := New[int]("a", 10)
	for i := range 100 {
		l.Put(fmt.Sprint(i), i)
	}
	old := l.Cursor()
	for i := range 9 {
		l.Remove(fmt.Sprint(i))
	}
	recent := l.Cursor()
	for i := 9; i < 30; i++ {
		l.Remove(fmt.Sprint(i))
	}
	if _, p := l.Page(old, 1<<20, func(Change[int]) int { return 1 }); !p.Reset {
		t.Errorf("a cursor from before forgotten removals did not start over")
	}
	got, p := l.Page(recent, 1<<20, func(Change[int]) int { return 1 })
	if p.Reset {
		// The floor may pass it too; then it starts over, which is safe.
		t.Logf("the recent cursor started over")
	} else if len(got) != 21 {
		t.Errorf("a recent cursor got %d removals, want 21", len(got))
	}
	if l.gone > 10 || len(l.items) > 100 {
		t.Errorf("%d tombstones and %d items held after 30 removals with a bound of 10", l.gone, len(l.items))
	}
	if _, p := l.Page("b.5", 1<<20, func(Change[int]) int { return 1 }); !p.Reset {
		t.Error("another feed's cursor did not start over")
	}
}

// TestSnapshotFeed: a snapshot diffed into the feed sends only the
// counters that moved, the removed ones as removed, and the fullest of a
// per-model limit's counters at each node.
func TestSnapshotFeed(t *testing.T) {
	start := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	e := func(id string, v int64) syncwire.Entry { return syncwire.Entry{ID: id, PeriodStart: start, Value: v} }
	perModel := func(id string) (string, bool) { return "model=", id == "pm" }
	f := NewSnapshot("s")
	f.Update(syncwire.Snapshot{Version: "1", Entries: []syncwire.Entry{
		e("b|budget_usd|org:acme||month|", 5),
		e("pm|budget_usd|org:acme|model=a|month|", 3),
		e("pm|budget_usd|org:acme|model=b|month|", 9),
		e("pm|budget_usd|org:acme|model=b|month|#unpriced", 1),
	}}, perModel)
	first := f.Page("", 1<<20)
	fullest := "pm|budget_usd|org:acme|model=" + syncwire.FullestSuffix
	if len(first.Entries) != 5 || first.Entries[4].ID != fullest || first.Entries[4].Value != 9 {
		t.Fatalf("first page: %+v", first.Entries)
	}
	f.Update(syncwire.Snapshot{Version: "2", Entries: []syncwire.Entry{
		e("b|budget_usd|org:acme||month|", 5),
		e("pm|budget_usd|org:acme|model=a|month|", 12),
		e("pm|budget_usd|org:acme|model=b|month|", 9),
	}}, perModel)
	next := f.Page(first.Cursor, 1<<20)
	if fmt.Sprint(next.Removed) != "[pm|budget_usd|org:acme|model=b|month|#unpriced]" || len(next.Entries) != 2 ||
		next.Entries[0].Value != 12 || next.Entries[1].ID != fullest || next.Entries[1].Value != 12 {
		t.Errorf("second page: %+v removed %v", next.Entries, next.Removed)
	}
	if again := f.Page(next.Cursor, 1<<20); len(again.Entries)+len(again.Removed) != 0 {
		t.Errorf("nothing moved, yet: %+v", again)
	}
}

// BenchmarkSnapshotUpdate is what a snapshot of 200,000 counters costs the
// accountant each time it moves (a hundred counters moved): the diff
// into the feed, and the page a current filter then gets.
//
//	go test ./accountant/feed -run '^$' -bench SnapshotUpdate
func BenchmarkSnapshotUpdate(b *testing.B) {
	start := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	entries := make([]syncwire.Entry, 200_000)
	for i := range entries {
		entries[i] = syncwire.Entry{ID: fmt.Sprintf("pm|budget_usd|org:acme/team:t0|model=m-%d|month|", i), PeriodStart: start, Value: int64(i)}
	}
	f := NewSnapshot("s")
	perValue := func(id string) (string, bool) { return "model=", id == "pm" }
	f.Update(syncwire.Snapshot{Version: "0", Entries: entries}, perValue)
	cursor := f.Page("", 1<<30).Cursor
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range 100 {
			entries[(i*100+j)%len(entries)].Value++
		}
		f.Update(syncwire.Snapshot{Version: fmt.Sprint(i + 1), Entries: entries}, perValue)
		p := f.Page(cursor, 256<<10)
		if len(p.Entries) < 100 {
			b.Fatalf("%d entries moved, want 100 and the fullest", len(p.Entries))
		}
		cursor = p.Cursor
	}
}
