package filter

import (
	"fmt"
	"strings"
	"testing"
)

// tableRig is one writer and one reader engine over one store.
func tableRig(t *testing.T, store *memStore) (w, r *Engine) {
	t.Helper()
	es := testEngines(t, 2, store, &manualClock{t: nativeT0}, `{"accountant":{"cluster":"a"}}`)
	return es[0], es[1]
}

// nodeTable is tableRig with a writer of the nodes table, generation 1.
func nodeTable(t *testing.T, store *memStore) (w *tableWriter, r *Engine) {
	t.Helper()
	e, r := tableRig(t, store)
	return &tableWriter{e: e, t: tabNodes, l: layout{gen: 1}}, r
}

func tableName(i int) string { return fmt.Sprintf("org:acme/team:t%d/user:u%d", i%97, i) }

// mustFind checks that r finds every name in [from, to) with its value,
// reading table t as l.
func mustFind(t *testing.T, r *Engine, l layout, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		v, found, err := r.probe(tabNodes, l, tableName(i))
		if err != nil || !found || string(v) != fmt.Sprint(i) {
			t.Fatalf("name %d: %q %v %v (layout %+v)", i, v, found, err, l)
		}
	}
}

// TestTableGrowsAndShrinks: a table split as it grows keeps about
// loadFactor names a bucket, every name is found, and a removed name
// leaves its bucket, so the bytes held follow the names held.
func TestTableGrowsAndShrinks(t *testing.T) {
	eachStore(t, func(t *testing.T, store *memStore) {
		w, r := nodeTable(t, store)
		const n = 6000
		for i := 0; i < n; i++ {
			if changed, err := w.put(tableName(i), []byte(fmt.Sprint(i)), false); err != nil || !changed {
				t.Fatalf("put %d: %v %v", i, changed, err)
			}
		}
		if w.l.count != n || w.l.buckets() < n/loadFactor || w.l.buckets() > n/loadFactor+1 {
			t.Fatalf("after %d puts: %+v (%d buckets)", n, w.l, w.l.buckets())
		}
		mustFind(t, r, w.l, 0, n)
		if changed, _ := w.put(tableName(7), []byte("7"), false); changed {
			t.Error("putting the value held changed the table")
		}
		full := bytesUnder(store, "tt/t/n/")
		for i := 0; i < n; i += 3 {
			if changed, err := w.put(tableName(i), nil, true); err != nil || !changed {
				t.Fatalf("remove %d: %v %v", i, changed, err)
			}
		}
		for i := 0; i < n; i++ {
			_, found, _ := r.probe(tabNodes, w.l, tableName(i))
			if found != (i%3 != 0) {
				t.Fatalf("name %d found %v after every third was removed", i, found)
			}
		}
		if got := bytesUnder(store, "tt/t/n/"); got > full*3/4 {
			t.Errorf("%d bytes held after a third of the names left, %d before", got, full)
		}
		if keys := countUnder(store, "tt/t/n/"); keys != int(w.l.buckets()) {
			t.Errorf("%d shared-data entries for %d buckets", keys, w.l.buckets())
		}
	})
}

// TestTableStaleLayout: a VM that read the layout long ago, before many
// splits, still finds every name (the buckets' depths send it on), and
// so does one whose layout is current.
func TestTableStaleLayout(t *testing.T) {
	store := newMemStore()
	w, r := nodeTable(t, store)
	var old []layout
	for i := 0; i < 5000; i++ {
		if _, err := w.put(tableName(i), []byte(fmt.Sprint(i)), false); err != nil {
			t.Fatal(err)
		}
		if i%700 == 0 {
			old = append(old, w.l)
		}
	}
	for _, l := range old {
		mustFind(t, r, l, 0, 5000)
	}
	mustFind(t, r, w.l, 0, 5000)
	before := store.ops
	mustFind(t, r, w.l, 0, 5000)
	if ops := store.ops - before; ops != 5000 {
		t.Errorf("%d reads for 5,000 probes with the current layout, want one each", ops)
	}
}

// TestTableReplayAfterStop: a writer that stopped after writing buckets
// but before saving its layout goes on from the layout it saved last (the
// answer is written again): nothing is lost, however far the layout was
// behind, and splits done twice change nothing.
func TestTableReplayAfterStop(t *testing.T) {
	eachStore(t, func(t *testing.T, store *memStore) {
		w, r := nodeTable(t, store)
		for i := 0; i < 1000; i++ {
			w.put(tableName(i), []byte(fmt.Sprint(i)), false)
		}
		saved := w.l
		for i := 1000; i < 3000; i++ {
			w.put(tableName(i), []byte(fmt.Sprint(i)), false)
		}
		// The layout was lost: the same names again, and more.
		w.l = saved
		for i := 1000; i < 4000; i++ {
			if _, err := w.put(tableName(i), []byte(fmt.Sprint(i)), false); err != nil {
				t.Fatal(err)
			}
		}
		mustFind(t, r, w.l, 0, 4000)
		mustFind(t, r, saved, 0, 4000)
	})
}

// TestTableGenerations: a bucket of another generation reads as empty,
// so a rebuild in the other namespace never shows a VM a mix.
func TestTableGenerations(t *testing.T) {
	store := newMemStore()
	e, r := tableRig(t, store)
	w1 := &tableWriter{e: e, t: tabNodes, l: layout{gen: 1}}
	w3 := &tableWriter{e: e, t: tabNodes, l: layout{gen: 3}} // the same namespace
	for i := 0; i < 100; i++ {
		w1.put(tableName(i), []byte(fmt.Sprint(i)), false)
	}
	w3.put(tableName(5), []byte("five"), false)
	if v, found, _ := r.probe(tabNodes, w3.l, tableName(5)); !found || string(v) != "five" {
		t.Errorf("generation 3: %q %v", v, found)
	}
	for i := 0; i < 100; i++ {
		if _, found, _ := r.probe(tabNodes, w3.l, tableName(i)); found != (i == 5) {
			t.Errorf("generation 3 finds name %d of generation 1: %v", i, found)
		}
	}
}

func bytesUnder(m *memStore, prefix string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, v := range m.data {
		if strings.HasPrefix(k, prefix) {
			n += len(k) + len(v.b)
		}
	}
	return n
}

func countUnder(m *memStore, prefix string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k := range m.data {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}
