package filter

import (
	"encoding/binary"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
)

// What a VM holds of the synced state, and how it learns that it moved.
//
// The version record (tt/sync/ver) is one small entry every VM reads at
// every request and tick: the plan and price versions, the snapshot's
// time, fleet and replica count, the layout of each table (table.go) and
// the sequence number of the last change log record. When it is the bytes
// a VM read last, nothing moved and the request goes on.
//
// A VM keeps a bounded cache of the entries it decoded (keys, node
// records, counters), so a key in steady use costs no probe. The polling
// VM, each time it writes a page of changes, writes one change log record
// naming what it changed (tt/sync/log/<seq mod logRing>) before the
// version record that announces it; a VM that sees the sequence number
// move reads the records it missed and drops those names from its cache,
// so a revoked key or a counter that moved is never served from a cache
// past the VM's next request after the sync that brought it. A VM that
// missed more than the ring holds, or finds a record overwritten, drops
// its whole cache (it refills from shared data as requests come).
const (
	syncLeaseKey  = "tt/sync/lease"
	syncVerKey    = "tt/sync/ver"
	syncPlanKey   = "tt/sync/plan"
	syncPricesKey = "tt/sync/prices"
	syncFeedsKey  = "tt/sync/feeds"
	syncSeedKey   = "tt/sync/seed"
	syncLogPrefix = "tt/sync/log/"
	verFormat     = 3

	// logRing is the number of change log records kept.
	logRing = 64
	// maxLogBytes bounds one change log record; a page that changed more
	// names of a table than fit says "drop the table's cache" instead.
	maxLogBytes = 16 << 10

	// The bounds of a VM's caches, in entries (see RELIABILITY.md for the
	// bytes).
	keyCacheMax     = 4096
	nodeCacheMax    = 4096
	counterCacheMax = 8192
)

// syncVersions is the version record.
type syncVersions struct {
	plan, prices string
	// generatedAt is the spend snapshot's time; zero until a whole
	// snapshot is in the counter table.
	generatedAt time.Time
	replicas    int
	// redis: the accountant has the fleet's shared Redis
	// (syncwire.Sync.Redis).
	redis bool
	// fleet: syncwire.Snapshot.Fleet.
	fleet  string
	logSeq uint64
	tables [numTables]layout
}

// u8 verFormat | u16 len, plan | u16 len, prices | i64 generated_at (unix ns, 0: none)
// | u32 replicas | u8 flags (1: redis) | u16 len, fleet | u64 log seq | numTables × layout
func (v *syncVersions) append(dst []byte) []byte {
	dst = append(dst, verFormat)
	dst = appendStr16(dst, v.plan)
	dst = appendStr16(dst, v.prices)
	var ns int64 // 0: no snapshot (a zero time has no UnixNano)
	if !v.generatedAt.IsZero() {
		ns = v.generatedAt.UnixNano()
	}
	dst = binary.LittleEndian.AppendUint64(dst, uint64(ns))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(v.replicas))
	var flags byte
	if v.redis {
		flags |= 1
	}
	dst = append(dst, flags)
	dst = appendStr16(dst, v.fleet)
	dst = binary.LittleEndian.AppendUint64(dst, v.logSeq)
	for _, l := range v.tables {
		dst = l.append(dst)
	}
	return dst
}

func decodeVersions(b []byte) (syncVersions, bool) {
	var v syncVersions
	r := reader{b: b}
	if r.u8() != verFormat {
		return v, false
	}
	v.plan, v.prices = r.str16(), r.str16()
	if ns := int64(r.u64()); ns != 0 {
		v.generatedAt = time.Unix(0, ns).UTC()
	}
	v.replicas = int(r.u32())
	v.redis = r.u8()&1 != 0
	v.fleet = r.str16()
	v.logSeq = r.u64()
	for t := range v.tables {
		if lb := r.bytes(layoutBytes); lb != nil {
			v.tables[t] = decodeLayout(lb)
		}
	}
	return v, !r.bad && r.p == len(b)
}

// A change log record:
//
//	u8 logFormat | u64 seq | u8 drop (bit t: drop table t's cache)
//	| entries: u8 table | u16 len, name
const logFormat = 1

func logKey(seq uint64) string { return syncLogPrefix + itoa(int64(seq%logRing)) }

// changeLog collects the names a page changed, for its log record.
type changeLog struct {
	drop  byte
	buf   []byte // the entries
	dirty bool   // something changed: a record is due
}

func (c *changeLog) reset() { c.drop, c.buf, c.dirty = 0, c.buf[:0], false }

// note records that name changed in table t.
func (c *changeLog) note(t tableID, name string) {
	c.dirty = true
	if c.drop&(1<<t) != 0 {
		return
	}
	if len(c.buf)+3+len(name) > maxLogBytes || len(name) > maxEntryBytes {
		c.drop |= 1 << t
		return
	}
	c.buf = append(c.buf, byte(t))
	c.buf = appendStr16(c.buf, name)
}

// dropAll records that table t was replaced: every VM drops its cache.
func (c *changeLog) dropAll(t tableID) { c.dirty, c.drop = true, c.drop|1<<t }

func (c *changeLog) record(dst []byte, seq uint64) []byte {
	dst = append(dst, logFormat)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = append(dst, c.drop)
	return append(dst, c.buf...)
}

// caches are what a VM decoded from the tables, bounded.
type caches struct {
	keys     boundedMap[*keyEntry]
	nodes    boundedMap[govern.NodeFacts]
	counters boundedMap[counterValue]
}

// counterValue is one counter as the VM read it; found false: the table
// has none (it reads as zero).
type counterValue struct {
	start, value int64
	found        bool
}

func (c *caches) drop(t tableID) {
	switch t {
	case tabKeys:
		c.keys.clear()
	case tabNodes:
		c.nodes.clear()
	case tabCounters:
		c.counters.clear()
	}
}

func (c *caches) forget(t tableID, name string) {
	switch t {
	case tabKeys:
		c.keys.remove(name)
	case tabNodes:
		c.nodes.remove(name)
	case tabCounters:
		c.counters.remove(name)
	}
}

// boundedMap is a map of at most max entries; adding one more evicts an
// arbitrary one (Go randomizes where iteration starts).
type boundedMap[V any] struct {
	m   map[string]V
	max int
}

func (b *boundedMap[V]) get(k string) (V, bool) {
	v, ok := b.m[k]
	return v, ok
}

func (b *boundedMap[V]) put(k string, v V) {
	if b.m == nil {
		b.m = make(map[string]V, min(b.max, 256))
	}
	if _, ok := b.m[k]; !ok && len(b.m) >= b.max {
		for old := range b.m {
			delete(b.m, old)
			break
		}
	}
	b.m[k] = v
}

func (b *boundedMap[V]) remove(k string) { delete(b.m, k) }

func (b *boundedMap[V]) clear() { clear(b.m) }

func (b *boundedMap[V]) len() int { return len(b.m) }

// applyLog brings the caches to the version record v: a table whose
// generation moved is dropped whole; the names of every change log record
// since the last one read are dropped, or everything when one is missing.
func (e *Engine) applyLog(v *syncVersions) {
	for t := range numTables {
		if v.tables[t].gen != e.tabs[t].gen {
			e.cache.drop(tableID(t))
		}
	}
	defer func() { e.tabs, e.logSeq = v.tables, v.logSeq }()
	if v.logSeq == e.logSeq {
		return
	}
	if e.logSeq == 0 || v.logSeq < e.logSeq || v.logSeq-e.logSeq > logRing {
		e.dropCaches()
		return
	}
	for seq := e.logSeq + 1; seq <= v.logSeq; seq++ {
		b, _, found, err := e.host.Store.Get(logKey(seq))
		r := reader{b: b}
		if err != nil || !found || r.u8() != logFormat || r.u64() != seq {
			e.dropCaches()
			return
		}
		drop := r.u8()
		for t := range numTables {
			if drop&(1<<t) != 0 {
				e.cache.drop(tableID(t))
			}
		}
		for r.p < len(r.b) && !r.bad {
			t := tableID(r.u8())
			name := r.bytes(int(r.u16()))
			if t < numTables && name != nil {
				e.cache.forget(t, unsafeString(name))
			}
		}
		if r.bad {
			e.dropCaches()
			return
		}
	}
}

func (e *Engine) dropCaches() {
	for t := range numTables {
		e.cache.drop(tableID(t))
	}
}

// lookupKey returns the key with kid: from the VM's cache, else its record
// in the key table, else the static table; nil when none has it. A record
// this build cannot read is nil (refused), never the static key.
func (e *Engine) lookupKey(kid string) *keyEntry {
	if k, ok := e.cache.keys.get(kid); ok {
		return k
	}
	v, found, err := e.probe(tabKeys, e.tabs[tabKeys], kid)
	if err == nil && found {
		k, ok := decodeKeyRecord(kid, v)
		if !ok {
			return nil
		}
		e.cache.keys.put(k.kid, k)
		return k
	}
	return e.staticKeys[kid]
}

// chainFacts fills facts with the runtime plane's say on each node of
// chain (parallel to it), or returns nil when the runtime plane has no
// node or override at all.
func (e *Engine) chainFacts(chain []string, facts []govern.NodeFacts) []govern.NodeFacts {
	if e.tabs[tabNodes].count == 0 {
		return nil
	}
	facts = facts[:0]
	for _, n := range chain {
		facts = append(facts, e.nodeFacts(n))
	}
	return facts
}

// nodeFacts is node's record in the node table (zero when it has none),
// cached.
func (e *Engine) nodeFacts(node string) govern.NodeFacts {
	if f, ok := e.cache.nodes.get(node); ok {
		return f
	}
	v, found, err := e.probe(tabNodes, e.tabs[tabNodes], node)
	if err != nil {
		return govern.NodeFacts{} // not cached: read again next time
	}
	var f govern.NodeFacts
	if found {
		f, _ = decodeNodeRecord(v)
	}
	e.cache.nodes.put(node, f)
	return f
}

// counter is the snapshot's counter id, cached.
func (e *Engine) counter(id string) counterValue {
	if c, ok := e.cache.counters.get(id); ok {
		return c
	}
	v, found, err := e.probe(tabCounters, e.tabs[tabCounters], id)
	if err != nil {
		return counterValue{}
	}
	var c counterValue
	if found && len(v) == 16 {
		c = counterValue{start: int64(binary.LittleEndian.Uint64(v)), value: int64(binary.LittleEndian.Uint64(v[8:])), found: true}
	}
	e.cache.counters.put(id, c)
	return c
}

// A node's record in the node table (its name is the node id):
//
//	u8 nodeFormat | u8 flags (1: in the tree) | u16 n | n × (u16 len, limit id | i64 amount)
const (
	nodeFormat = 1
	nodeTree   = 1
)

func appendNodeRecord(dst []byte, f govern.NodeFacts) []byte {
	var flags byte
	if f.Tree {
		flags |= nodeTree
	}
	dst = append(dst, nodeFormat, flags)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(f.Overrides)))
	for _, o := range f.Overrides {
		dst = appendStr16(dst, o.LimitID)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(o.Amount))
	}
	return dst
}

// decodeNodeRecord decodes a node record; one this build cannot read is
// no facts (the node as the config has it, without overrides).
func decodeNodeRecord(b []byte) (govern.NodeFacts, bool) {
	r := reader{b: b}
	if r.u8() != nodeFormat {
		return govern.NodeFacts{}, false
	}
	f := govern.NodeFacts{Tree: r.u8()&nodeTree != 0}
	n := int(r.u16())
	for i := 0; i < n && !r.bad; i++ {
		id := r.str16()
		f.Overrides = append(f.Overrides, govern.Override{LimitID: id, Amount: int64(r.u64())})
	}
	if r.bad || r.p != len(b) {
		return govern.NodeFacts{}, false
	}
	return f, true
}
