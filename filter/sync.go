package filter

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/jsontok"
	"github.com/tokentriage/tokentriage/shared/jsontok/jv"
	"github.com/tokentriage/tokentriage/shared/pluginconf"
	"github.com/tokentriage/tokentriage/shared/pricing"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// One VM of the host polls the accountant per interval, elected by a lease
// cell. It asks for the plan and prices it does not hold and a page of
// each change feed after its cursors (shared/syncwire), writes what
// changed into the tables in shared data (table.go), then a change log
// record and the version record that tell every VM (state.go). When a
// page was cut at its byte bound it asks for the next one at once.

const (
	// snapshotTrust is how long a snapshot is trusted (seed 000).
	snapshotTrust = pluginconf.SnapshotTrust
	// pageBytes is the page bound the filter asks the accountant for: a
	// page is read, written into shared data and dropped before the next
	// is asked for, so a VM never holds more of a feed than this, and a
	// page's callback holds its VM a few milliseconds (about 250 keys; a
	// first sync of a million keys is some 4,000 of them, back to back).
	pageBytes = 64 << 10
	// sweepPerPage bounds the buckets of an old table generation one
	// answer frees.
	sweepPerPage = 1024
)

// syncState is what this VM has loaded.
type syncState struct {
	raw      []byte // the version record as last read
	next     []byte // the version record being loaded
	loaded   syncVersions
	nextPoll time.Time
	polling  bool
	mismatch string // the accountant plan hash last reported as different
}

// refresh reloads whatever another VM (or this one) synced since the last
// look. It costs one shared-data read when nothing changed.
func (e *Engine) refresh(now time.Time) {
	if e.host.Caller == nil {
		return // no accountant: nothing is ever synced
	}
	got, _, found, err := e.host.Store.Get(syncVerKey)
	if err != nil || !found || bytes.Equal(got, e.sync.raw) {
		return
	}
	// The parts are read with further gets, which may reuse got's buffer.
	e.sync.next = append(e.sync.next[:0], got...)
	raw := e.sync.next
	v, ok := decodeVersions(raw)
	if !ok {
		e.resolveGen++
		return
	}
	cur := &e.sync.loaded
	if v.plan != cur.plan || v.logSeq != e.logSeq || v.tables != e.tabs {
		// The runtime plane or the keys may have changed; a record that
		// moved only the snapshot's time, the fleet or the replica count
		// leaves every chain's resolution as it was.
		e.resolveGen++
	}
	complete := true
	if v.plan != cur.plan {
		switch {
		case e.static != nil:
			if v.plan != "" && v.plan != e.static.Hash && e.sync.mismatch != v.plan {
				e.logf(LogWarn, "sync: the accountant enforces plan %s but this filter's configuration carries plan %s; spend counters are matched by counter identity", short(v.plan), short(e.static.Hash))
				e.host.Metrics.Add(MetricPlanMismatch, 1)
				e.sync.mismatch = v.plan
			}
			cur.plan = v.plan
		default:
			if b, ok := e.part(syncPlanKey); ok {
				if p, err := compilePlan(b); err == errNoPlan && e.plan == nil {
					e.logf(LogWarn, "sync: the accountant (plan version %q) has no governance block; nothing is governed until it has one", short(v.plan))
				} else if err == errNoPlan {
					e.logf(LogWarn, "sync: the accountant (plan version %q) has no governance block now; keeping the plan in force", short(v.plan))
				} else if err != nil {
					e.logf(LogError, "sync: the accountant's plan %s does not compile here; keeping the plan in force: %v", short(v.plan), err)
				} else {
					e.arm(p)
					e.warnProviders(p)
				}
				cur.plan = v.plan
			} else {
				complete = false
			}
		}
	}
	if v.prices != cur.prices {
		if b, ok := e.part(syncPricesKey); ok {
			if m, err := decodePrices(b); err != nil {
				e.logf(LogError, "sync: decoding the price catalog: %v", err)
			} else {
				e.prices = m
			}
			cur.prices = v.prices
		} else {
			complete = false
		}
	}
	e.applyLog(&v)
	cur.generatedAt, cur.fleet = v.generatedAt, v.fleet
	if v.replicas > 0 {
		e.replicas = v.replicas
	}
	e.fleetStore = v.redis
	if complete {
		e.sync.raw = append(e.sync.raw[:0], raw...)
	}
}

// part reads one synced part; a copy, since decoders may keep slices of it.
func (e *Engine) part(key string) ([]byte, bool) {
	b, _, found, err := e.host.Store.Get(key)
	return append([]byte(nil), b...), err == nil && found
}

// warnProviders logs each limit of a synced plan whose match.provider this
// filter never gives a request (its providers rules and the names it
// infers, pluginconf.ProviderNames): the accountant cannot check that, as
// it does not see the filter's plugin configuration, and the limit would
// never count. An embedded plan is refused for it at configure instead.
func (e *Engine) warnProviders(p *govern.Plan) {
	names := e.cfg.ProviderNames()
	for _, l := range p.Limits {
		if n := l.Match.Provider; n != "" && !slices.Contains(names, n) {
			e.logf(LogWarn, "sync: limit %s of the accountant's plan: match.provider %s", l.ID, pluginconf.UnknownProvider(n, names))
		}
	}
}

func compilePlan(b []byte) (*govern.Plan, error) {
	if len(bytes.TrimSpace(b)) == 0 || string(b) == "null" {
		return nil, errNoPlan
	}
	g, err := config.DecodeGovernanceJSON(b)
	if err != nil {
		return nil, err
	}
	return govern.Compile(g)
}

type planError string

func (e planError) Error() string { return string(e) }

const errNoPlan = planError("the accountant has no governance block")

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// feedState is the polling VM's side of the sync, kept in shared data
// (tt/sync/feeds) so that whichever VM polls next goes on from it: the
// cursors, whether each feed's tables hold a whole copy (ready), the
// layouts of a rebuild in progress (the feed started over while the
// tables held a whole copy, which VMs keep reading until the rebuild is
// complete), and the sweep of each table's other namespace.
type feedState struct {
	rt, snap feed // the runtime plane's feed, the spend snapshot's
	build    [numTables]layout
	// high is, per table and namespace, the most buckets ever used there;
	// sweep is the next bucket of the other namespace to free (sweeping
	// while below high of that namespace).
	high  [numTables][2]uint32
	sweep [numTables]uint32
}

// feed is where the VM is in one of the accountant's feeds.
type feed struct {
	cursor string
	ready  bool // its tables hold a whole copy
	build  bool // a rebuild fills the other namespace
}

const (
	feedsFormat = 1

	feedRTReady   = 1 << 0
	feedSnapReady = 1 << 1
	feedRTBuild   = 1 << 2
	feedSnapBuild = 1 << 3
)

// u8 feedsFormat | u16 len, runtime cursor | u16 len, snapshot cursor | u8 flags
// | numTables × layout (rebuilds) | numTables × (u32 high[0], u32 high[1], u32 sweep)
func (f *feedState) append(dst []byte) []byte {
	dst = append(dst, feedsFormat)
	dst = appendStr16(dst, f.rt.cursor)
	dst = appendStr16(dst, f.snap.cursor)
	var flags byte
	if f.rt.ready {
		flags |= feedRTReady
	}
	if f.snap.ready {
		flags |= feedSnapReady
	}
	if f.rt.build {
		flags |= feedRTBuild
	}
	if f.snap.build {
		flags |= feedSnapBuild
	}
	dst = append(dst, flags)
	for _, l := range f.build {
		dst = l.append(dst)
	}
	for t := range numTables {
		dst = binary.LittleEndian.AppendUint32(dst, f.high[t][0])
		dst = binary.LittleEndian.AppendUint32(dst, f.high[t][1])
		dst = binary.LittleEndian.AppendUint32(dst, f.sweep[t])
	}
	return dst
}

func decodeFeeds(b []byte) (feedState, bool) {
	var f feedState
	r := reader{b: b}
	if r.u8() != feedsFormat {
		return f, false
	}
	f.rt.cursor, f.snap.cursor = r.str16(), r.str16()
	flags := r.u8()
	f.rt.ready, f.snap.ready = flags&feedRTReady != 0, flags&feedSnapReady != 0
	f.rt.build, f.snap.build = flags&feedRTBuild != 0, flags&feedSnapBuild != 0
	for t := range f.build {
		if lb := r.bytes(layoutBytes); lb != nil {
			f.build[t] = decodeLayout(lb)
		}
	}
	for t := range numTables {
		f.high[t][0], f.high[t][1], f.sweep[t] = r.u32(), r.u32(), r.u32()
	}
	return f, !r.bad && r.p == len(b)
}

// readSyncState reads the version record and the feed state as shared
// data holds them now (zero values before the first sync).
func (e *Engine) readSyncState() (syncVersions, feedState) {
	var v syncVersions
	if b, _, found, err := e.host.Store.Get(syncVerKey); err == nil && found {
		if d, ok := decodeVersions(b); ok {
			v = d
		}
	}
	var f feedState
	if b, _, found, err := e.host.Store.Get(syncFeedsKey); err == nil && found {
		if d, ok := decodeFeeds(b); ok {
			f = d
		}
	}
	return v, f
}

// poll asks the accountant for what changed, when this VM holds the sync
// lease and the interval has passed.
func (e *Engine) poll(now time.Time) {
	if e.host.Caller == nil || e.sync.polling || now.Before(e.sync.nextPoll) {
		return
	}
	e.sync.nextPoll = now.Add(e.syncEvery)
	e.pollNow(now)
}

// pollNow polls, under the sync lease.
func (e *Engine) pollNow(now time.Time) {
	if !e.takeSyncLease(now) {
		return
	}
	v, f := e.readSyncState()
	q := append(e.buf[:0], syncwire.SyncPath...)
	q = appendQuery(q, '?', "plan", v.plan)
	q = appendQuery(q, '&', "prices", v.prices)
	q = appendQuery(q, '&', "runtime", f.rt.cursor)
	q = appendQuery(q, '&', "snapshot", f.snap.cursor)
	q = appendQuery(q, '&', "page", strconv.Itoa(pageBytes))
	if f.rt.build {
		// The VMs read another copy than the cursor's until the rebuild
		// is in: this replica holds no override armed since.
		q = appendQuery(q, '&', "building", "1")
	}
	q = appendQuery(q, '&', "replica", e.replica)
	// The host's rows dropped on overflow, every VM's (the accountant
	// exports the count).
	q = appendQuery(q, '&', "dropped", itoa(e.bound(now).DroppedRows))
	e.buf = q
	e.sync.polling = true
	err := e.host.Caller.Call("GET", string(q), nil, nil, e.callTimeout(), func(status int, body []byte) {
		e.sync.polling = false
		t := e.host.Now()
		if status != 200 {
			e.host.Metrics.Add(MetricSyncFailed, 1)
			e.logf(LogWarn, "sync: the accountant answered %d%s; spend snapshots age until it answers", status, refusedToken(status))
			return
		}
		more, err := e.applySync(body, t)
		if err != nil {
			e.host.Metrics.Add(MetricSyncFailed, 1)
			e.logf(LogError, "sync: %v", err)
			return
		}
		e.host.Metrics.Add(MetricSyncOK, 1)
		e.refresh(t)
		if more {
			e.pollNow(t) // the next page at once
		}
	})
	if err != nil {
		e.sync.polling = false
		e.host.Metrics.Add(MetricSyncFailed, 1)
		e.logf(LogWarn, "sync: calling the accountant: %v", err)
	}
}

// refusedToken explains a 401 from the accountant: it takes only callers
// with its internal token.
func refusedToken(status int) string {
	if status != 401 {
		return ""
	}
	return ": the accountant refused the internal token; set the plugin configuration's accountant.token (or token_env) to the accountant's TT_ACCOUNTANT_TOKEN"
}

// appendQuery appends sep, key, '=' and value percent-encoded (everything
// but unreserved characters).
func appendQuery(dst []byte, sep byte, key, value string) []byte {
	const hex = "0123456789ABCDEF"
	dst = append(dst, sep)
	dst = append(dst, key...)
	dst = append(dst, '=')
	for i := 0; i < len(value); i++ {
		c := value[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			dst = append(dst, c)
		} else {
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		}
	}
	return dst
}

func (e *Engine) callTimeout() time.Duration {
	if e.cfg.Accountant != nil && e.cfg.Accountant.TimeoutMS > 0 {
		return time.Duration(e.cfg.Accountant.TimeoutMS) * time.Millisecond
	}
	return 2 * time.Second
}

// takeSyncLease elects this VM to poll for one interval (and the answer's
// time to come back).
func (e *Engine) takeSyncLease(now time.Time) bool {
	v, cas, found, err := e.host.Store.Get(syncLeaseKey)
	if err != nil {
		return false
	}
	if found {
		holder, until := decodeLease(v)
		if holder != 0 && holder != e.vm && now.UnixNano() < until {
			return false
		}
	}
	until := now.Add(e.syncEvery + e.callTimeout()).UnixNano()
	ok, err := e.cells.setNew(syncLeaseKey, leaseValue(e.cells.scratch[:0], e.vm, until), cas, found)
	return err == nil && ok
}

// holdsSyncLease reports whether this VM still holds the sync lease, so
// an answer that came back after another VM took over is not written over
// that VM's.
func (e *Engine) holdsSyncLease(now time.Time) bool {
	v, _, found, err := e.host.Store.Get(syncLeaseKey)
	if err != nil || !found {
		return false
	}
	holder, until := decodeLease(v)
	return holder == e.vm && now.UnixNano() < until
}

// The sync lease cell holds the polling VM and when its lease ends:
//
//	vm u32 | until i64 unix ns
func leaseValue(dst []byte, vm uint32, until int64) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, vm)
	return binary.LittleEndian.AppendUint64(dst, uint64(until))
}

func decodeLease(b []byte) (vm uint32, until int64) {
	if len(b) != 12 {
		return 0, 0
	}
	return binary.LittleEndian.Uint32(b), int64(binary.LittleEndian.Uint64(b[4:]))
}

// applySync writes an accountant answer into shared data: the plan and
// prices when they moved, each feed's page into its tables, then the
// change log record, the version record every VM reads, and the feed
// state. It reports whether a feed has more to send. An item of a page
// that cannot be read is logged and left out (a key then does not
// authenticate: never read as less restricted than it is); the page's
// other items are written.
func (e *Engine) applySync(body []byte, now time.Time) (more bool, err error) {
	if e := jsontok.Valid(body, jsontok.GJSON); e.Code != jsontok.ErrNone {
		return false, planError("the accountant's sync answer is not valid JSON: " + e.Error())
	}
	if !e.holdsSyncLease(now) {
		return false, nil // another VM polls now; it will ask again
	}
	r := jv.ParseBytes(body)
	v, f := e.readSyncState()
	sent, sentFeeds := v, f
	defer func() {
		// A feed that says more but did not move is asked again at the
		// next interval, not at once.
		more = more && (f.rt.cursor != sentFeeds.rt.cursor || f.snap.cursor != sentFeeds.snap.cursor)
	}()
	e.clog.reset()
	if p := r.Get("plan"); p.Exists() {
		v.plan = p.Get("version").String()
		if g := p.Get("governance"); g.Exists() {
			if err := e.cells.put(syncPlanKey, []byte(g.Raw)); err != nil {
				return false, err
			}
		} else if v.plan != sent.plan {
			// A new version with no governance block: say so, or every VM
			// would wait for a part that never comes.
			if err := e.cells.put(syncPlanKey, []byte("null")); err != nil {
				return false, err
			}
		}
	}
	if p := r.Get("prices"); p.Exists() {
		v.prices = p.Get("version").String()
		if v.prices != sent.prices {
			raw := p.Get("models").Raw
			if raw == "" {
				raw = "{}"
			}
			if err := e.cells.put(syncPricesKey, []byte(raw)); err != nil {
				return false, err
			}
		}
	}
	if rt := r.Get("runtime"); rt.Exists() {
		m, err := e.applyRuntime(rt, &v, &f)
		if err != nil {
			return false, err
		}
		more = more || m
	}
	if s := r.Get("snapshot"); s.Exists() {
		m, err := e.applySnapshot(s, &v, &f)
		if err != nil {
			return false, err
		}
		more = more || m
	}
	if err := e.sweepOld(&v, &f); err != nil {
		return false, err
	}
	if n := r.Get("replicas").Int(); n > 0 {
		v.replicas = int(n)
	}
	v.redis = r.Get("redis").Bool()
	if e.clog.dirty {
		v.logSeq++
		if err := e.cells.put(logKey(v.logSeq), e.clog.record(e.cells.scratch[:0], v.logSeq)); err != nil {
			return false, err
		}
	}
	// The version record before the feed state: a VM that stops between
	// the two leaves the cursors behind, and the next poll writes the same
	// pages again, which changes nothing. An answer that changed nothing
	// (most of them) writes neither, and no VM reads anything again.
	if rec := v.append(nil); !bytes.Equal(rec, sent.append(nil)) {
		if err := e.cells.put(syncVerKey, rec); err != nil {
			return false, err
		}
	}
	if f == sentFeeds {
		return more, nil
	}
	return more, e.cells.put(syncFeedsKey, f.append(nil))
}

// writer returns the writer of table t: the copy being rebuilt, or the
// one VMs read.
func (e *Engine) writer(t tableID, v *syncVersions, f *feedState, building bool) *tableWriter {
	w := &e.tw[t]
	w.e, w.t, w.log = e, t, &e.clog
	if building {
		w.l, w.log = f.build[t], nil // no VM reads it yet: nothing to tell
	} else {
		w.l = v.tables[t]
	}
	return w
}

// set is put, noting a change in the change log of the copy VMs read.
func (w *tableWriter) set(name string, value []byte, remove bool) error {
	changed, err := w.put(name, value, remove)
	if changed && w.log != nil {
		w.log.note(w.t, name)
	}
	return err
}

// done stores the writer's layout back where it came from.
func (w *tableWriter) done(v *syncVersions, f *feedState, building bool) {
	ns := w.l.gen & 1
	f.high[w.t][ns] = max(f.high[w.t][ns], w.l.buckets())
	if building {
		f.build[w.t] = w.l
	} else {
		v.tables[w.t] = w.l
	}
}

// startOver begins a copy of the tables of a feed that started over: in
// a new generation the VMs switch to when it is whole, when the tables
// hold a whole copy now; otherwise in place (the VMs read it as it fills:
// a first sync's keys authenticate as their page is in).
func (e *Engine) startOver(tables []tableID, ready bool, building *bool, v *syncVersions, f *feedState) {
	for _, t := range tables {
		switch {
		case ready && *building:
			// Another start over during a rebuild: the rebuild's namespace
			// again, in a newer generation.
			f.build[t] = layout{gen: f.build[t].gen + 2}
			f.sweep[t] = 0
		case ready:
			f.build[t] = layout{gen: v.tables[t].gen + 1}
			f.sweep[t] = 0
		default:
			v.tables[t] = layout{gen: v.tables[t].gen + 1}
			e.clog.dropAll(t)
			f.sweep[t] = 0
		}
	}
	*building = ready
}

// finish makes a rebuild the copy the VMs read, when its last page is in.
func (e *Engine) finish(tables []tableID, building *bool, v *syncVersions, f *feedState) {
	if !*building {
		return
	}
	for _, t := range tables {
		v.tables[t] = f.build[t]
		f.build[t] = layout{}
		f.sweep[t] = 0 // the old generation's namespace is swept from its first bucket
		e.clog.dropAll(t)
	}
	*building = false
}

var (
	runtimeTables  = []tableID{tabKeys, tabNodes}
	snapshotTables = []tableID{tabCounters}
)

// applyRuntime writes one page of the runtime plane's feed.
func (e *Engine) applyRuntime(p jv.Value, v *syncVersions, f *feedState) (more bool, err error) {
	build, _ := e.beginPage(p, &f.rt, runtimeTables, v, f)
	keys := e.writer(tabKeys, v, f, build)
	var ferr error
	p.Get("keys").ForEach(func(_, item jv.Value) bool {
		k, ok := decodeKey(item)
		if !ok {
			var err error
			if k, err = decodeKeySlow(item); err != nil {
				e.logf(LogError, "sync: a key of the accountant's feed is left out: %v", err)
				if k.KID == "" {
					return true
				}
				k = syncwire.Key{KID: k.KID, Gone: true}
			}
		}
		if why := keyProblem(&k); why != "" && !k.Gone {
			e.logf(LogError, "sync: key %s of the accountant's feed is left out: %s", strconv.Quote(k.KID), why)
			k.Gone = true
		}
		if len(k.KID) > maxEntryBytes {
			return true
		}
		var val []byte
		if !k.Gone {
			e.recBuf = appendKeyRecord(e.recBuf[:0], &k)
			val = e.recBuf
		}
		ferr = keys.set(k.KID, val, k.Gone)
		return ferr == nil
	})
	keys.done(v, f, build)
	if ferr != nil {
		return false, ferr
	}
	nodes := e.writer(tabNodes, v, f, build)
	p.Get("nodes").ForEach(func(_, item jv.Value) bool {
		id, tree := item.Get("id"), item.Get("tree")
		if id.Type != jv.String || tree.Exists() && tree.Type != jv.True && tree.Type != jv.False {
			e.logf(LogError, "sync: a node of the accountant's feed is left out: %s", clip(item.Raw, 200))
			return true
		}
		if err := govern.ValidNodeID(id.Str); err != nil {
			e.logf(LogError, "sync: a node of the accountant's feed is left out: %v", err)
			return true
		}
		ferr = e.editNode(nodes, id.Str, func(nf *govern.NodeFacts) { nf.Tree = tree.Type == jv.True })
		return ferr == nil
	})
	if ferr == nil {
		p.Get("overrides").ForEach(func(_, item jv.Value) bool {
			if err := checkShape(item, "override", overrideShape); err != nil {
				e.logf(LogError, "sync: an override of the accountant's feed is left out: %v", err)
				return true
			}
			o := govern.Override{LimitID: item.Get("limit_id").Str, Node: item.Get("node").Str}
			o.Amount, _ = strconv.ParseInt(item.Get("amount").Raw, 10, 64)
			gone := item.Get("gone").Type == jv.True
			if o.Node != govern.Global {
				if _, _, leaf := govern.SplitKeyLeaf(o.Node); leaf {
					err = govern.ValidKeyLeaf(o.Node)
				} else {
					err = govern.ValidNodeID(o.Node)
				}
				if err != nil {
					e.logf(LogError, "sync: an override of limit %s is left out: %v", strconv.Quote(o.LimitID), err)
					return true
				}
			}
			ferr = e.editNode(nodes, o.Node, func(nf *govern.NodeFacts) {
				i := slices.IndexFunc(nf.Overrides, func(x govern.Override) bool { return x.LimitID == o.LimitID })
				switch {
				case gone && i >= 0:
					nf.Overrides = slices.Delete(nf.Overrides, i, i+1)
				case gone:
				case i >= 0:
					nf.Overrides[i].Amount = o.Amount
				default:
					nf.Overrides = append(nf.Overrides, govern.Override{LimitID: o.LimitID, Amount: o.Amount})
				}
			})
			return ferr == nil
		})
	}
	nodes.done(v, f, build)
	if ferr != nil {
		return false, ferr
	}
	return e.endPage(p, &f.rt, runtimeTables, v, f), nil
}

// beginPage starts a page of feed fd, whose tables these are: a reset
// starts them over, in the other namespace (a rebuild) or in place (not
// ready until whole again). It says whether the page writes a rebuild,
// and whether a reset started the tables over.
func (e *Engine) beginPage(p jv.Value, fd *feed, tables []tableID, v *syncVersions, f *feedState) (build, reset bool) {
	if reset = p.Get("reset").Bool(); reset {
		e.startOver(tables, fd.ready, &fd.build, v, f)
		if !fd.build {
			fd.ready = false
		}
	}
	return fd.build, reset
}

// endPage ends a page of feed fd whose writes are in: its cursor is kept,
// and after its last page the tables are finished and ready. It says
// whether more pages follow.
func (e *Engine) endPage(p jv.Value, fd *feed, tables []tableID, v *syncVersions, f *feedState) (more bool) {
	if c := p.Get("cursor"); c.Type == jv.String {
		fd.cursor = c.Str
	}
	more = p.Get("more").Bool()
	if !more {
		e.finish(tables, &fd.build, v, f)
		fd.ready = true
	}
	return more
}

// editNode changes node's record with edit (read, edited, written; an
// empty record is removed).
func (e *Engine) editNode(w *tableWriter, node string, edit func(*govern.NodeFacts)) error {
	val, found, err := e.probe(tabNodes, w.l, node)
	if err != nil {
		return err
	}
	var nf govern.NodeFacts
	if found {
		nf, _ = decodeNodeRecord(val)
	}
	nf.Overrides = slices.Clone(nf.Overrides)
	edit(&nf)
	empty := !nf.Tree && len(nf.Overrides) == 0
	if !empty {
		e.recBuf = appendNodeRecord(e.recBuf[:0], nf)
	}
	return w.set(node, e.recBuf, empty)
}

// applySnapshot writes one page of the spend snapshot's feed.
func (e *Engine) applySnapshot(p jv.Value, v *syncVersions, f *feedState) (more bool, err error) {
	build, reset := e.beginPage(p, &f.snap, snapshotTables, v, f)
	if reset && !build {
		v.generatedAt = time.Time{} // filled in place: no snapshot until it is whole
	}
	w := e.writer(tabCounters, v, f, build)
	var ferr error
	var val [16]byte
	p.Get("entries").ForEach(func(_, en jv.Value) bool {
		id, value := en.Get("id"), en.Get("value")
		start, err := time.Parse(time.RFC3339Nano, en.Get("period_start").String())
		n, nerr := strconv.ParseInt(value.Raw, 10, 64)
		if id.Type != jv.String || err != nil || value.Type != jv.Number || nerr != nil {
			e.logf(LogError, "sync: a counter of the accountant's snapshot is left out: %s", clip(en.Raw, 200))
			return true
		}
		binary.LittleEndian.PutUint64(val[:], uint64(start.Unix()))
		binary.LittleEndian.PutUint64(val[8:], uint64(n))
		ferr = w.set(id.Str, val[:], false)
		return ferr == nil
	})
	if ferr == nil {
		p.Get("removed").ForEach(func(_, id jv.Value) bool {
			if id.Type != jv.String {
				return true
			}
			ferr = w.set(id.Str, nil, true)
			return ferr == nil
		})
	}
	w.done(v, f, build)
	if ferr != nil {
		return false, ferr
	}
	more = e.endPage(p, &f.snap, snapshotTables, v, f)
	// The snapshot's time says how fresh the counters VMs read are: it
	// moves only while they read a whole copy (not a rebuild's, nor a
	// first copy still filling).
	if f.snap.ready && !f.snap.build {
		if gen, err := time.Parse(time.RFC3339Nano, p.Get("generated_at").String()); err == nil {
			v.generatedAt = gen
		}
		v.fleet = p.Get("fleet").String()
	}
	return more, nil
}

// sweepOld frees up to sweepPerPage buckets of each table's other
// namespace that belong to no generation in use: what a finished rebuild
// left behind, or a rebuild started over.
func (e *Engine) sweepOld(v *syncVersions, f *feedState) error {
	tomb := []byte{0}
	for t := range numTables {
		read := v.tables[t]
		if read.gen == 0 {
			continue
		}
		ns := (read.gen + 1) & 1
		live := uint32(0) // a rebuild's generation in that namespace
		if f.rt.build && (tableID(t) == tabKeys || tableID(t) == tabNodes) || f.snap.build && tableID(t) == tabCounters {
			live = f.build[t].gen
		}
		for n := 0; n < sweepPerPage && f.sweep[t] < f.high[t][ns]; n++ {
			key := e.bucketKey(tableID(t), ns, f.sweep[t])
			raw, cas, found, err := e.host.Store.Get(key)
			if err != nil {
				return err
			}
			if found && len(raw) >= bucketHeader && raw[0] == bucketFormat {
				if g := binary.LittleEndian.Uint32(raw[1:]); g != live {
					if _, err := e.host.Store.Set(key, tomb, cas); err != nil {
						return err
					}
				}
			}
			f.sweep[t]++
		}
	}
	return nil
}

// decodePrices reads the accountant's price catalog: an object of model
// names and aliases (lowercase) to their rates in nanodollars per million
// tokens.
func decodePrices(b []byte) (map[string]pricing.Rates, error) {
	if e := jsontok.Valid(b, jsontok.GJSON); e.Code != jsontok.ErrNone {
		return nil, planError("the price catalog is not valid JSON: " + e.Error())
	}
	r := jv.ParseBytes(b)
	if !r.IsObject() {
		return nil, planError("the price catalog is not an object")
	}
	m := map[string]pricing.Rates{}
	var err error
	r.ForEach(func(k, v jv.Value) bool {
		if !v.IsObject() {
			err = planError("the price of " + strconv.Quote(k.Str) + " is not an object")
			return false
		}
		r := pricing.Rates{Input: v.Get("input").Int(), Output: v.Get("output").Int(), Cached: v.Get("cached").Int()}
		if !v.Get("cached").Exists() {
			r.Cached = r.Input
		}
		m[k.Str] = r
		return true
	})
	return m, err
}
