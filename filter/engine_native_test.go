package filter

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/pluginconf"
	"github.com/tokentriage/tokentriage/shared/rate"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

var nativeT0 = time.Date(2026, 8, 9, 20, 44, 50, 0, time.UTC)

// testEngines starts n engines (one per VM) over one store, as the VMs of
// one host process.
func testEngines(t testing.TB, n int, store *memStore, clock *manualClock, config string) []*Engine {
	t.Helper()
	cfg, err := pluginconf.Decode([]byte(config))
	if err != nil {
		t.Fatalf("plugin configuration: %v", err)
	}
	out := make([]*Engine, n)
	for i := range out {
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], uint64(i+1))
		e, err := NewEngine(cfg, Host{Store: store, Now: clock.Now, Metrics: &countMetrics{}, Seed: seed, Log: testLog(t)})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = e
	}
	return out
}

const noGovernance = `{"governance":{"enabled":true,"limits":[]}}`

// racingEngines are six engines without governance on store, as six VMs
// of one host, on one clock.
func racingEngines(t *testing.T, store *memStore) ([]*Engine, *manualClock) {
	clock := &manualClock{t: nativeT0}
	return testEngines(t, 6, store, clock, noGovernance), clock
}

// TestCreateUnderRacingEngines: engines racing to create and update the
// same fresh cells never lose an update. Each cell is a fixed window
// counting every admitted take, so the count it ends with is the number of
// takes that reported success.
func TestCreateUnderRacingEngines(t *testing.T) {
	eachStore(t, testCreateUnderRacingEngines)
}

func testCreateUnderRacingEngines(t *testing.T, store *memStore) {
	const keys, takes = 40, 30
	es, clock := racingEngines(t, store)
	p := rate.Params{Amount: 60000, Burst: 60000, Period: time.Minute}
	var admitted [keys]atomic.Int64
	var contention atomic.Int64
	race(es, func(e *Engine) {
		for i := 0; i < takes; i++ {
			for k := 0; k < keys; k++ {
				res, err := e.cells.rateTake(fmt.Sprintf("k%d|rpm|n|||fixed_window", k), rate.FixedWindow, clock.Now(), 1, p)
				switch {
				case err != nil:
					contention.Add(1)
				case res.Allowed:
					admitted[k].Add(1)
				}
			}
		}
	})
	for k := 0; k < keys; k++ {
		res, _, err := es[0].cells.ratePeek(fmt.Sprintf("k%d|rpm|n|||fixed_window", k), rate.FixedWindow, clock.Now(), p)
		if err != nil {
			t.Fatal(err)
		}
		if counted := p.Amount - res.Remaining; counted != admitted[k].Load() {
			t.Errorf("cell %d counts %d takes, %d reported success: updates were lost", k, counted, admitted[k].Load())
		}
	}
	if c := contention.Load(); c != 0 {
		t.Errorf("%d takes gave up on contention", c)
	}
}

// TestGaugeExpiryOfLostVM: leases held by a VM that is gone come back when
// its entry expires; a live VM keeps its entry fresh from its tick.
func TestGaugeExpiryOfLostVM(t *testing.T) {
	store := newMemStore()
	clock := &manualClock{t: nativeT0}
	es := testEngines(t, 2, store, clock, `{"governance":{"enabled":true,"limits":[]},"lease_ttl":"15m"}`)
	lost, live := es[0], es[1]
	const key, limit = "c|concurrency|n|||", 3
	ttl := 15 * time.Minute
	for i := 0; i < 2; i++ {
		if ok, _, _, err := lost.cells.gaugeAcquire(key, limit, false, clock.Now(), ttl); !ok || err != nil {
			t.Fatalf("lost VM acquire %d: %v %v", i, ok, err)
		}
	}
	ok, _, hold, _ := live.cells.gaugeAcquire(key, limit, false, clock.Now(), ttl)
	if !ok {
		t.Fatal("live VM could not take the third lease")
	}
	// Full: 2 (lost) + 1 (live).
	if ok, seen, _, _ := live.cells.gaugeAcquire(key, limit, false, clock.Now(), ttl); ok || seen != 3 {
		t.Fatalf("fourth lease: taken %v, saw %d; want refused at 3", ok, seen)
	}
	// Ticks pass; only the live VM ticks.
	for step := time.Duration(0); step < ttl; step += time.Minute {
		clock.Advance(time.Minute)
		live.Tick()
		got, _ := live.cells.gaugeRead(key, clock.Now())
		if clock.Now().Sub(nativeT0) < ttl && got != 3 {
			t.Fatalf("at +%v the gauge reads %d, want 3 (the lost VM's entry has not expired)", clock.Now().Sub(nativeT0), got)
		}
	}
	clock.Advance(time.Second)
	if got, _ := live.cells.gaugeRead(key, clock.Now()); got != 1 {
		t.Fatalf("after the TTL the gauge reads %d, want 1 (the live VM's lease, refreshed by its tick)", got)
	}
	for i := 0; i < 2; i++ {
		if ok, _, _, _ := live.cells.gaugeAcquire(key, limit, false, clock.Now(), ttl); !ok {
			t.Fatalf("lease %d after expiry was refused", i)
		}
	}
	// A double release frees one slot, not two.
	for i := 0; i < 4; i++ {
		live.cells.gaugeRelease(hold, clock.Now(), ttl)
	}
	if got, _ := live.cells.gaugeRead(key, clock.Now()); got != 0 {
		t.Errorf("after releasing everything the gauge reads %d", got)
	}
	if v := store.raw(key); len(v) != 1 || v[0] != 0 {
		t.Errorf("the drained gauge cell is %x, want no entries", v)
	}
}

// TestGaugeRacingEngines: engines racing acquire and release never see the
// gauge above its cap, and it drains to 0.
func TestGaugeRacingEngines(t *testing.T) {
	eachStore(t, testGaugeRacingEngines)
}

func testGaugeRacingEngines(t *testing.T, store *memStore) {
	const rounds, limit = 200, 4
	es, clock := racingEngines(t, store)
	const key = "c|concurrency|n|||"
	var held, peak atomic.Int64
	race(es, func(e *Engine) {
		for i := 0; i < rounds; i++ {
			ok, _, hold, err := e.cells.gaugeAcquire(key, limit, false, clock.Now(), time.Minute)
			if err != nil {
				t.Errorf("acquire: %v", err)
				return
			}
			if !ok {
				continue
			}
			n := held.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			held.Add(-1)
			if err := e.cells.gaugeRelease(hold, clock.Now(), time.Minute); err != nil {
				t.Errorf("release: %v", err)
			}
		}
	})
	if p := peak.Load(); p > limit {
		t.Errorf("peak %d leases held at once, above the cap %d", p, limit)
	}
	if got, _ := es[0].cells.gaugeRead(key, clock.Now()); got != 0 {
		t.Errorf("gauge %d after every lease was released", got)
	}
}

// TestTeeBoundAcrossVMs: the bound of a LedgerSettled 429 sums every VM's
// unacknowledged and dropped rows as of its last tick; a VM that stopped
// ticking drops out after the lease TTL.
func TestTeeBoundAcrossVMs(t *testing.T) {
	store := newMemStore()
	clock := &manualClock{t: nativeT0}
	cfg := `{"governance":{"enabled":true,"limits":[]},"accountant":{"cluster":"a"},"lease_ttl":"1m"}`
	es := testEngines(t, 3, store, clock, cfg)
	for i, e := range es {
		e.host.Caller = &fakeCaller{} // answered never: rows stay unacknowledged
		for j := 0; j < 10*(i+1); j++ {
			e.rows.pushLine([]byte("{}\n"))
		}
	}
	es[0].rows.dropped = 7
	es[0].Tick()
	es[1].Tick()
	if b := es[2].bound(clock.Now()); b.TeeLagRows != 10+20+30 || b.DroppedRows != 7 {
		t.Errorf("bound %+v, want lag 60 dropped 7", b)
	}
	// VM 1 stops ticking; VM 0 keeps going.
	for i := 0; i < 6; i++ {
		clock.Advance(15 * time.Second)
		es[0].Tick()
	}
	if b := es[2].bound(clock.Now()); b.TeeLagRows != 10+30 || b.DroppedRows != 7 {
		t.Errorf("bound after VM 1 went quiet %+v, want lag 40 dropped 7", b)
	}
	v := store.raw(teeKey)
	if len(v) == 0 || v[0] != 1 {
		t.Errorf("tee cell holds %d entries, want 1 (VM 1 expired, VM 2 never published)", v[0])
	}
}

// pushLine queues an encoded row standing for one request, or counts it
// dropped when the queue is at its soft bound.
func (q *rowQueue) pushLine(b []byte) bool {
	if !q.room(len(b), false) {
		q.dropped++
		return false
	}
	q.data = append(q.data, b...)
	q.push(nativeT0, 1)
	return true
}

// ack records the answer to the batch in flight: taken, or failed.
func (q *rowQueue) ack(now time.Time, ok bool) {
	if ok {
		q.acked()
	} else {
		q.failed(now)
	}
}

// TestRowQueueBound: the queue keeps at most maxUnacked rows, batches and
// acknowledgements move its head, and it compacts.
func TestRowQueueBound(t *testing.T) {
	var q rowQueue
	now := nativeT0
	for i := 0; i < maxUnacked+10; i++ {
		q.pushLine([]byte(fmt.Sprintf("%d\n", i)))
	}
	if q.lag() != maxUnacked || q.dropped != 10 {
		t.Fatalf("lag %d dropped %d", q.lag(), q.dropped)
	}
	b := q.batch(now, false)
	want := ""
	for i := 0; i < batchRows; i++ {
		want += fmt.Sprintf("%d\n", i)
	}
	if string(b) != want || q.inflight != batchRows {
		t.Fatalf("first batch %q…, %d rows in flight; want rows 0 to %d", b[:min(len(b), 16)], q.inflight, batchRows-1)
	}
	if q.batch(now, true) != nil {
		t.Fatal("a second batch while one is in flight")
	}
	q.ack(now, false)
	if q.batch(now, false) != nil {
		t.Fatal("a batch during the backoff")
	}
	if q.batch(now, true) == nil {
		t.Fatal("a forced batch was not sent")
	}
	q.ack(now, true)
	if q.lag() != maxUnacked-batchRows || q.sent != batchRows {
		t.Fatalf("after an ack: lag %d sent %d", q.lag(), q.sent)
	}
	// Rows keep their order across compactions.
	for next := batchRows; q.lag() > 0; {
		b := q.batch(now, false)
		for _, line := range strings.SplitAfter(string(b), "\n") {
			if line == "" {
				continue
			}
			if line != fmt.Sprintf("%d\n", next) {
				t.Fatalf("row %q where row %d belongs", line, next)
			}
			next++
		}
		q.ack(now, true)
		if next >= maxUnacked {
			break
		}
	}
	for q.lag() > 0 {
		if q.batch(now, false) == nil {
			t.Fatal("no batch while rows wait")
		}
		q.ack(now, true)
	}
	if len(q.ends) != 0 || len(q.data) != 0 || q.head != 0 {
		t.Errorf("drained queue holds %d rows (%d bytes), head %d", len(q.ends), len(q.data), q.head)
	}
	if !q.pushLine([]byte("x\n")) {
		t.Error("a drained queue refused a row")
	}
	// Rows pushed while batches are in flight and acknowledged come out
	// once each, in order, across compactions.
	var r rowQueue
	pushed, seen := 0, 0
	for step := 0; step < 2000; step++ {
		for k := 0; k < step%7; k++ {
			r.pushLine([]byte(fmt.Sprintf("%d\n", pushed)))
			pushed++
		}
		if b := r.batch(now, true); b != nil {
			for _, line := range strings.SplitAfter(string(b), "\n") {
				if line == "" {
					continue
				}
				if line != fmt.Sprintf("%d\n", seen) {
					t.Fatalf("step %d: row %q where row %d belongs", step, line, seen)
				}
				seen++
			}
			ok := step%5 != 0 // every fifth batch fails and is sent again
			if !ok {
				seen -= r.inflight
			}
			r.ack(now, ok)
		}
	}
	if r.lag() != pushed-seen {
		t.Errorf("lag %d, pushed %d, seen %d", r.lag(), pushed, seen)
	}
}

// TestVersionRecordRoundTrip: the sync version record survives encoding,
// and every truncation or corruption is refused rather than misread.
func TestVersionRecordRoundTrip(t *testing.T) {
	for _, v := range []syncVersions{
		{},
		{plan: "p", prices: "c4", generatedAt: nativeT0, replicas: 3, redis: true, fleet: "redis down", logSeq: 7,
			tables: [numTables]layout{{gen: 1, level: 3, split: 2, count: 40}, {gen: 2}, {gen: 9, level: 20, split: 1 << 19, count: 1 << 22}}},
		{plan: string(make([]byte, 300)), replicas: 1 << 20},
	} {
		b := v.append(nil)
		got, ok := decodeVersions(b)
		if !ok || got != v {
			t.Errorf("round trip of %+v: %+v %v", v, got, ok)
		}
		for n := 0; n < len(b); n++ {
			if _, ok := decodeVersions(b[:n]); ok {
				t.Errorf("a record truncated to %d of %d bytes decoded", n, len(b))
			}
		}
		if _, ok := decodeVersions(append(b, 0)); ok {
			t.Error("a record with a trailing byte decoded")
		}
	}
	f := feedState{rt: feed{cursor: "db.7", ready: true}, snap: feed{cursor: "s.9", build: true},
		build: [numTables]layout{2: {gen: 3, level: 1, count: 9}}, high: [numTables][2]uint32{{1, 2}, {3, 4}, {5, 6}}, sweep: [numTables]uint32{7, 8, 9}}
	b := f.append(nil)
	if got, ok := decodeFeeds(b); !ok || got != f {
		t.Errorf("feed state round trip: %+v %v", got, ok)
	}
	for n := 0; n < len(b); n++ {
		if _, ok := decodeFeeds(b[:n]); ok {
			t.Errorf("a feed state truncated to %d of %d bytes decoded", n, len(b))
		}
	}
}

// TestRecordsRoundTrip: a key's and a node's records decode to what was
// encoded, and every truncation is refused (a key then does not
// authenticate: never read as less restricted than it is).
func TestRecordsRoundTrip(t *testing.T) {
	sha, prev := strings.Repeat("ab", 32), strings.Repeat("0f", 32)
	for _, k := range []syncwire.Key{
		{KID: "vk_AAAAAAAAAAAA", SHA256: sha, Owner: "org:acme"},
		{KID: "vk_AAAAAAAAAAAB", SHA256: sha, Owner: "org:acme/team:ml/user:dev1", Revoked: true, Name: "ci runner",
			ExpiresAt: 1_900_000_000, PrevSHA256: prev, PrevUntil: 1_800_000_000,
			Scopes: vkey.Scopes{Models: []string{"gpt-*", ""}, Providers: []string{}, AllowPassthrough: true, Customers: []string{"acme-*"}}},
	} {
		if why := keyProblem(&k); why != "" {
			t.Fatalf("%s: %s", k.KID, why)
		}
		b := appendKeyRecord(nil, &k)
		got, ok := decodeKeyRecord(k.KID, b)
		if !ok {
			t.Fatalf("%s: the record does not decode", k.KID)
		}
		want := &keyEntry{kid: k.KID, owner: k.Owner, name: k.Name, scopes: k.Scopes, revoked: k.Revoked, expiresAt: k.ExpiresAt,
			hasPrev: k.PrevSHA256 != "", prevUntil: k.PrevUntil}
		hex.Decode(want.sha256[:], []byte(k.SHA256))
		if want.hasPrev {
			hex.Decode(want.prev[:], []byte(k.PrevSHA256))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v, want %+v", k.KID, got, want)
		}
		for n := 0; n < len(b); n++ {
			if _, ok := decodeKeyRecord(k.KID, b[:n]); ok {
				t.Errorf("%s: a record truncated to %d of %d bytes decoded", k.KID, n, len(b))
			}
		}
	}
	for _, k := range []syncwire.Key{{KID: "vk_short", SHA256: sha}, {KID: "vk_AAAAAAAAAAAA", SHA256: "ab"}, {KID: "vk_AAAAAAAAAAAA", SHA256: sha, PrevSHA256: "x"}} {
		if keyProblem(&k) == "" {
			t.Errorf("%+v passed", k)
		}
	}
	nf := govern.NodeFacts{Tree: true, Overrides: []govern.Override{{LimitID: "b", Amount: 5}, {LimitID: "c", Amount: 1 << 50}}}
	b := appendNodeRecord(nil, nf)
	if got, ok := decodeNodeRecord(b); !ok || !reflect.DeepEqual(got, nf) {
		t.Errorf("node record: %+v %v", got, ok)
	}
	for n := 0; n < len(b); n++ {
		if _, ok := decodeNodeRecord(b[:n]); ok {
			t.Errorf("a node record truncated to %d of %d bytes decoded", n, len(b))
		}
	}
}

// TestSyncThroughSharedData: what the polling VM writes (the tables, the
// change log and the version record) is what every other VM reads, on
// both rule sets; the replica name is the same for every VM of the host.
func TestSyncThroughSharedData(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store := st.new()
			clock := &manualClock{t: nativeT0}
			cfg := `{"governance":{"enabled":true,"tenants":[{"org":"acme"}],"limits":[
				{"id":"b","attach":{"level":"org"},"type":"budget_usd","amount_usd":1,"period":"month","override":{"allow":true}}]},"accountant":{"cluster":"a"}}`
			es := testEngines(t, 3, store, clock, cfg)
			callers := make([]*fakeCaller, len(es))
			for i, e := range es {
				if e.replica != es[0].replica || len(e.replica) < 10 {
					t.Errorf("VM %d names the replica %q, VM 0 %q", i, e.replica, es[0].replica)
				}
				if e.seed != es[0].seed || e.seed == [2]uint64{} {
					t.Errorf("VM %d hashes with %x, VM 0 with %x", i, e.seed, es[0].seed)
				}
				callers[i] = &fakeCaller{}
				e.host.Caller = callers[i]
			}
			answer := func(body string) {
				t.Helper()
				for _, e := range es {
					e.Tick()
				}
				n := 0
				for _, c := range callers {
					for _, call := range c.take() {
						if strings.HasPrefix(call.path, "/tt/internal/v1/sync") {
							n++
							call.cb(200, []byte(body))
						}
					}
				}
				if n != 1 {
					t.Fatalf("%d VMs polled in one interval, want 1", n)
				}
				clock.Advance(time.Second)
			}
			const id = "b|budget_usd|org:acme||month|"
			answer(`{"plan":{"version":"p"},"runtime":{"cursor":"db.3","reset":true,"keys":[{"kid":"vk_AAAAAAAAAAAA","sha256":"` + strings.Repeat("a", 64) + `","owner":"org:acme","scopes":{}}],
				"overrides":[{"limit_id":"b","node":"org:acme","amount":5}]},
				"snapshot":{"cursor":"s.1","reset":true,"generated_at":"2026-08-09T20:44:50Z","entries":[{"id":"` + id + `","period_start":"2026-08-01T00:00:00Z","value":42}]},"replicas":2}`)
			for i, e := range es {
				e.refresh(clock.Now())
				if e.lookupKey("vk_AAAAAAAAAAAA") == nil || e.counter(id).value != 42 || e.replicas != 2 {
					t.Errorf("VM %d after sync: key %v, counter %+v, replicas %d", i, e.lookupKey("vk_AAAAAAAAAAAA"), e.counter(id), e.replicas)
				}
				in := e.armed.ResolveFacts([]string{"org:acme", govern.Global}, e.chainFacts([]string{"org:acme", govern.Global}, nil), govern.Dims{}, govern.Gate2, nil)
				if len(in) != 1 || in[0].Amount != 5 || !in[0].Overridden {
					t.Errorf("VM %d: instances %+v, want the override of 5", i, in)
				}
			}
			// A heartbeat: nothing moved but generated_at.
			answer(`{"plan":{"version":"p"},"runtime":{"cursor":"db.3"},"snapshot":{"cursor":"s.1","generated_at":"2026-08-09T20:44:52Z"},"replicas":2}`)
			for i, e := range es {
				e.refresh(clock.Now())
				if e.lookupKey("vk_AAAAAAAAAAAA") == nil || e.counter(id).value != 42 || !e.snapshotAt().Equal(nativeT0.Add(2*time.Second)) {
					t.Errorf("VM %d after a heartbeat: counter %+v, snapshot at %v", i, e.counter(id), e.snapshotAt())
				}
			}
			// A revocation and a counter that moved: every VM drops what it
			// cached of them at its next look.
			answer(`{"plan":{"version":"p"},"runtime":{"cursor":"db.4","keys":[{"kid":"vk_AAAAAAAAAAAA","sha256":"` + strings.Repeat("a", 64) + `","owner":"org:acme","revoked":true}]},
				"snapshot":{"cursor":"s.2","generated_at":"2026-08-09T20:44:53Z","entries":[{"id":"` + id + `","period_start":"2026-08-01T00:00:00Z","value":43}]},"replicas":2}`)
			for i, e := range es {
				e.refresh(clock.Now())
				if k := e.lookupKey("vk_AAAAAAAAAAAA"); k == nil || !k.revoked || e.counter(id).value != 43 {
					t.Errorf("VM %d after a revocation: key %+v, counter %+v", i, k, e.counter(id))
				}
			}
		})
	}
}

// TestSpendHoldsOfLostVMExpire: what a lost VM's calls held in a
// reserve-mode spend cell stops counting one lease TTL after its last
// tick; a live VM keeps its hold fresh from its tick; settled spend stays.
func TestSpendHoldsOfLostVMExpire(t *testing.T) {
	store := newMemStore()
	clock := &manualClock{t: nativeT0}
	es := testEngines(t, 2, store, clock, `{"governance":{"enabled":true,"limits":[]},"lease_ttl":"15m"}`)
	lost, live := es[0], es[1]
	const key = "tt/spend|b|budget_usd|org:acme||month|"
	ttl := 15 * time.Minute
	write := func(e *Engine, delta int64) {
		t.Helper()
		v, cas, found, _ := store.Get(key)
		cell, ok := decodeSpend(v)
		if !ok {
			cell = spendCell{start: 100}
		}
		cell = cell.hold(e.vm, delta, clock.Now(), ttl)
		if ok, err := e.cells.setNew(key, cell.appendTo(nil), cas, found); !ok || err != nil {
			t.Fatalf("write: %v %v", ok, err)
		}
		e.noteSpendHold(key, delta)
	}
	total := func() int64 {
		v, _, _, _ := store.Get(key)
		cell, ok := decodeSpend(v)
		if !ok {
			t.Fatalf("unreadable cell %x", v)
		}
		return cell.total(clock.Now())
	}
	write(lost, 1000)
	write(live, 500)
	if got := total(); got != 1500 {
		t.Fatalf("both holds: %d, want 1500", got)
	}
	for i := 0; i < 4; i++ {
		clock.t = clock.t.Add(5 * time.Minute)
		live.refreshSpendHolds(clock.Now()) // only the live VM ticks
	}
	if got := total(); got != 500 {
		t.Fatalf("20 minutes on: %d, want 500 (the lost VM's hold expired, the live one's kept)", got)
	}
	// A 16-byte cell of the earlier form reads as settled spend.
	old := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 100), 42)
	if c, ok := decodeSpend(old); !ok || c.total(clock.Now()) != 42 {
		t.Errorf("an earlier cell: %+v %v", c, ok)
	}
}
