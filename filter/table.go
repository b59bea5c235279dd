package filter

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unsafe"

	"github.com/dchest/siphash"
)

// The key table, the runtime plane's node records and the spend snapshot
// live once per host process in shared data, each as a hash table whose
// buckets are shared-data entries (RATIONALE.md, "Why are keys, nodes and
// counters hash tables in shared data?"). A VM probes the one bucket a
// name hashes to (one host call) and decodes the one entry it needs; it
// never holds a table. Only the VM that polls the accountant writes them.
//
// A table grows by linear hashing: with 2^level buckets and a split
// pointer, bucket b holds the names whose hash h has h mod 2^level == b,
// or h mod 2^(level+1) == b for the buckets below the split pointer, which
// have been split. Splitting bucket b moves the names with bit level set
// to its image b + 2^level; the split pointer then advances, and at
// 2^level the level goes up. Each split touches two buckets, so the table
// grows an entry at a time with no pause, and it keeps about loadFactor
// names a bucket. Buckets are never merged: the entries a table has are
// as many as the most it ever held, divided by loadFactor, and the bytes
// it holds are those of the names it holds now (a removed name leaves its
// bucket).
//
// A VM reads the layout (level, split pointer) from the version record at
// every request; one that has not yet read a split can compute a bucket
// that was split since. Every bucket says how many low bits of the hash
// define it (its depth): a bucket whose depth tells the name belongs
// deeper sends the probe on to the bucket it does belong to, so a stale
// layout costs a VM at most a hop or two, never a wrong answer.
//
// A bucket is stored under tt/t/<table>/<ns>/<index in base 36>, where ns
// is the layout's generation mod 2: a rebuild from the start (the
// accountant's feed started over) fills the other namespace while VMs read
// the current one, then switches; a bucket of another generation reads as
// empty, and the old namespace is swept to one byte a bucket afterwards.
//
//	bucket: u8 bucketFormat | u32 generation | u8 depth | entries
//	entry:  u16 name length | name | u16 value length | value

// tableID names one of the tables.
type tableID uint8

const (
	tabKeys     tableID = iota // kid -> key record (keyrec.go)
	tabNodes                   // node id -> node record (noderec.go)
	tabCounters                // counter identity -> snapshot entry (snapshot.go)
	numTables
)

var tablePrefix = [numTables]string{"tt/t/k/", "tt/t/n/", "tt/t/s/"}

var tableNames = [numTables]string{"key", "node", "counter"}

const (
	bucketFormat = 1
	bucketHeader = 6
	// loadFactor is the mean number of names a bucket holds before the
	// table splits one more.
	loadFactor = 4
	// maxLevel bounds the doubling: 2^26 buckets hold 268 million names.
	maxLevel = 26
	// maxHops bounds the buckets a probe follows from a stale layout (one
	// per level it is behind at most).
	maxHops = maxLevel + 1
	// maxEntryBytes bounds a name and a value (u16 lengths).
	maxEntryBytes = 0xffff
)

// layout is a table's shape: its generation (0: no table yet), level and
// split pointer, and the number of names it holds.
type layout struct {
	gen   uint32
	level uint8
	split uint32
	count uint32
}

const layoutBytes = 13

func (l layout) append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, l.gen)
	dst = append(dst, l.level)
	dst = binary.LittleEndian.AppendUint32(dst, l.split)
	return binary.LittleEndian.AppendUint32(dst, l.count)
}

func decodeLayout(b []byte) layout {
	return layout{gen: binary.LittleEndian.Uint32(b), level: b[4], split: binary.LittleEndian.Uint32(b[5:]), count: binary.LittleEndian.Uint32(b[9:])}
}

// buckets is the number of buckets in use.
func (l layout) buckets() uint32 { return 1<<l.level + l.split }

// bucketOf is the bucket the name with hash h lives in, and that bucket's
// depth.
func (l layout) bucketOf(h uint64) (uint32, uint8) {
	b := uint32(h & (1<<l.level - 1))
	if b < l.split {
		return uint32(h & (1<<(l.level+1) - 1)), l.level + 1
	}
	return b, l.level
}

// depthOf is the depth of bucket b.
func (l layout) depthOf(b uint32) uint8 {
	if b < l.split || b >= 1<<l.level {
		return l.level + 1
	}
	return l.level
}

// hashName is the keyed hash of a name: the key (the seed) is drawn once
// per host process and kept in shared data, so nobody outside it can
// choose names that pile into one bucket.
func (e *Engine) hashName(name string) uint64 {
	return siphash.Hash(e.seed[0], e.seed[1], unsafeBytes(name))
}

// bucketKey is the shared-data key of bucket b of generation gen of t.
func (e *Engine) bucketKey(t tableID, gen, b uint32) string {
	k := append(e.keyBuf[:0], tablePrefix[t]...)
	k = append(k, '0'+byte(gen&1), '/')
	k = strconv.AppendUint(k, uint64(b), 36)
	e.keyBuf = k
	return string(k)
}

// bucket is a parsed bucket: entries are slices of the value read.
type bucket struct {
	gen   uint32
	depth uint8
	valid bool // the bucket holds the generation asked for
	ents  []bucketEntry
}

type bucketEntry struct {
	name, value []byte
}

// parseBucket parses b into out (reusing out.ents); a bucket of another
// format or generation, or cut short, is empty.
func parseBucket(b []byte, gen uint32, out *bucket) {
	out.ents = out.ents[:0]
	out.valid, out.depth = false, 0
	if len(b) < bucketHeader || b[0] != bucketFormat || binary.LittleEndian.Uint32(b[1:]) != gen {
		return
	}
	out.gen, out.depth = gen, b[5]
	p := bucketHeader
	for p < len(b) {
		if p+2 > len(b) {
			out.ents = out.ents[:0]
			return
		}
		n := int(binary.LittleEndian.Uint16(b[p:]))
		p += 2
		if p+n+2 > len(b) {
			out.ents = out.ents[:0]
			return
		}
		name := b[p : p+n]
		p += n
		m := int(binary.LittleEndian.Uint16(b[p:]))
		p += 2
		if p+m > len(b) {
			out.ents = out.ents[:0]
			return
		}
		out.ents = append(out.ents, bucketEntry{name: name, value: b[p : p+m]})
		p += m
	}
	out.valid = true
}

func appendBucket(dst []byte, gen uint32, depth uint8, ents []bucketEntry) []byte {
	dst = append(dst, bucketFormat)
	dst = binary.LittleEndian.AppendUint32(dst, gen)
	dst = append(dst, depth)
	for _, en := range ents {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(en.name)))
		dst = append(dst, en.name...)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(en.value)))
		dst = append(dst, en.value...)
	}
	return dst
}

func (bk *bucket) find(name string) int {
	for i, en := range bk.ents {
		if string(en.name) == name {
			return i
		}
	}
	return -1
}

// probe reads the value of name in table t laid out as l. The value is a
// slice of the store's buffer, valid until the next shared-data read.
func (e *Engine) probe(t tableID, l layout, name string) (value []byte, found bool, err error) {
	if l.gen == 0 || l.count == 0 {
		return nil, false, nil
	}
	_, _, _, ok, err := e.locate(t, l, e.hashName(name), &e.probeBk)
	if err != nil || !ok || !e.probeBk.valid {
		return nil, false, err
	}
	if i := e.probeBk.find(name); i >= 0 {
		return e.probeBk.ents[i].value, true, nil
	}
	return nil, false, nil
}

// locate reads the bucket the name with hash h lives in, starting from
// the one layout l gives: a bucket split since l was read has a greater
// depth than l gives it, and the name, when a bit of its hash between the
// two depths is set, went to the image of the split at the lowest such
// bit, which is read next. It returns the bucket, its bytes and cas (ok
// false when it is missing), parsed into bk.
func (e *Engine) locate(t tableID, l layout, h uint64, bk *bucket) (b uint32, raw []byte, cas uint32, ok bool, err error) {
	b, known := l.bucketOf(h)
	for hop := 0; ; hop++ {
		raw, cas, ok, err = e.host.Store.Get(e.bucketKey(t, l.gen, b))
		if err != nil || !ok {
			bk.ents, bk.valid = bk.ents[:0], false
			return b, raw, cas, ok, err
		}
		parseBucket(raw, l.gen, bk)
		if !bk.valid || bk.depth <= known || bk.depth > maxLevel+1 || hop == maxHops {
			return b, raw, cas, ok, nil
		}
		rest := h >> known
		if rest == 0 {
			return b, raw, cas, ok, nil
		}
		low := known + uint8(bits.TrailingZeros64(rest))
		if low >= bk.depth {
			return b, raw, cas, ok, nil // not moved by the splits since
		}
		b, known = b+1<<low, low+1
	}
}

// tableWriter changes one layout of one table; only the polling VM has
// one, for the answer it applies.
type tableWriter struct {
	e     *Engine
	t     tableID
	l     layout
	log   *changeLog // the change log of the copy VMs read; nil for a rebuild
	bk    bucket
	buf   []byte
	names []byte // scratch copy of a bucket while it is split
	stay  []bucketEntry
	move  []bucketEntry
}

// put sets name to value (nil value: removes it). It reports whether the
// table changed.
func (w *tableWriter) put(name string, value []byte, remove bool) (bool, error) {
	if len(name) > maxEntryBytes || len(value) > maxEntryBytes {
		return false, planError("a name or value of " + strconv.Itoa(max(len(name), len(value))) + " bytes does not fit a table entry")
	}
	h := w.e.hashName(name)
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		// Located as a reader would: a layout saved before a stop may be
		// behind the buckets.
		b, _, cas, found, err := w.e.locate(w.t, w.l, h, &w.bk)
		if err != nil {
			return false, err
		}
		key := w.e.bucketKey(w.t, w.l.gen, b)
		depth := w.l.depthOf(b)
		if w.bk.valid {
			depth = max(depth, w.bk.depth)
		}
		i := w.bk.find(name)
		switch {
		case remove && i < 0:
			return false, nil
		case remove:
			w.bk.ents = append(w.bk.ents[:i], w.bk.ents[i+1:]...)
		case i >= 0 && string(w.bk.ents[i].value) == string(value):
			return false, nil
		case i >= 0:
			w.bk.ents[i].value = value
		default:
			w.bk.ents = append(w.bk.ents, bucketEntry{name: unsafeBytes(name), value: value})
		}
		w.buf = appendBucket(w.buf[:0], w.l.gen, depth, w.bk.ents)
		ok, err := w.e.cells.setNew(key, w.buf, cas, found)
		if err != nil {
			return false, err
		}
		if !ok {
			w.e.cells.retries++
			continue
		}
		switch {
		case remove:
			w.l.count--
		case i < 0:
			w.l.count++
		}
		return true, w.grow()
	}
	return false, errContention
}

// grow splits buckets until the table holds at most loadFactor names a
// bucket.
func (w *tableWriter) grow() error {
	for w.l.count > loadFactor*w.l.buckets() && w.l.level < maxLevel {
		if err := w.splitOne(); err != nil {
			return err
		}
	}
	return nil
}

// splitOne splits the bucket at the split pointer: its image is written
// first, then the bucket without what moved, so a VM that reads the
// bucket after its rewrite finds the image there to follow.
func (w *tableWriter) splitOne() error {
	b := w.l.split
	img := b + 1<<w.l.level
	depth := w.l.level + 1
	key := w.e.bucketKey(w.t, w.l.gen, b)
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		raw, cas, found, err := w.e.host.Store.Get(key)
		if err != nil {
			return err
		}
		// The entries are copied out: the image's write reuses the
		// store's buffer.
		w.names = append(w.names[:0], raw...)
		parseBucket(w.names, w.l.gen, &w.bk)
		if w.bk.valid && w.bk.depth > w.l.level {
			// Split already, before a stop lost the layout that said so.
			w.advance()
			return nil
		}
		stay, move := w.stay[:0], w.move[:0]
		for _, en := range w.bk.ents {
			if w.e.hashName(unsafeString(en.name))&(1<<w.l.level) != 0 {
				move = append(move, en)
			} else {
				stay = append(stay, en)
			}
		}
		w.stay, w.move = stay, move
		w.buf = appendBucket(w.buf[:0], w.l.gen, depth, move)
		if err := w.e.cells.put(w.e.bucketKey(w.t, w.l.gen, img), w.buf); err != nil {
			return err
		}
		w.buf = appendBucket(w.buf[:0], w.l.gen, depth, stay)
		ok, err := w.e.cells.setNew(key, w.buf, cas, found)
		if err != nil {
			return err
		}
		if !ok {
			w.e.cells.retries++
			continue
		}
		w.advance()
		return nil
	}
	return errContention
}

// advance moves the split pointer past the bucket just split.
func (w *tableWriter) advance() {
	w.l.split++
	if w.l.split == 1<<w.l.level {
		w.l.level++
		w.l.split = 0
	}
}

// unsafeBytes views s as bytes, for reads that do not keep them (hashing,
// a copy into a bucket).
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// unsafeString views b as a string, for reads that do not keep it.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
