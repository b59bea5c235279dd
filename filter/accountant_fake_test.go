package filter_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/accountant/feed"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/rate"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// fakeAccountant serves the accountant's side of shared/syncwire from the
// test: sync answers built from the state the test sets (the plan and
// prices whole when the filter's version differs, its version alone when
// current; the runtime plane and the snapshot as pages of change feeds
// after the filter's cursors, as the accountant does), and an ingest
// endpoint that records rows by request id. The test sets whole tables;
// the fake diffs each into its feed.
type fakeAccountant struct {
	clock interface{ Now() time.Time }

	mu       sync.Mutex
	plan     syncwire.Plan
	rtFeed   *feed.Log[string] // "k"+kid, "n"+node, "o"+limit+"@"+node -> the item's JSON
	snapFeed *feed.Snapshot
	snapshot syncwire.Snapshot
	prices   syncwire.Prices
	replicas int
	// pageBytes, when set, bounds the pages below what the filter asks.
	pageBytes int
	// perValue names the limits counted per value (for the fullest
	// entries); nil: every limit whose identity carries a model.
	perValue feed.PerValue
	// redis says the accountant has the fleet's shared Redis.
	redis bool
	// heartbeat refreshes snapshot.generated_at to the clock on every poll
	// (the accountant's 5 s heartbeat, seen at poll granularity).
	heartbeat bool
	// down answers every call 503.
	down bool
	// failIngest answers that many ingest batches 503 before accepting.
	failIngest int
	// loseAcks records that many batches and then answers 503, as if the
	// acknowledgement were lost on its way back.
	loseAcks int

	polls   []string // the query of every poll
	answers []int    // the bytes of every sync answer
	batches [][]ledger.Row
	rows    map[string]ledger.Row // by request id
	starts  map[string]ledger.Row // start rows, by request id
	// kinds is what the accountant says it reads (IngestAck.Kinds): the
	// accountant's own list by default; nil plays one from before kinds.
	kinds []string
	// maxBody refuses a batch larger than this whole with 413 (0: none).
	maxBody   int
	order     []string
	dups      int
	failed    int
	tooLarge  int
	rejected  int
	rawErrors []string
	alerts    []syncwire.GateAlert
	// lease answers lease calls (the fleet's limits); nil: 404. memLeases
	// is an accountant with a shared Redis in memory.
	lease  func(syncwire.LeaseRequest) syncwire.LeaseAnswer
	leases []syncwire.LeaseRequest
}

func newFakeAccountant(clock interface{ Now() time.Time }) *fakeAccountant {
	return &fakeAccountant{clock: clock, heartbeat: true, rows: map[string]ledger.Row{}, starts: map[string]ledger.Row{},
		kinds: syncwire.RowKinds, rtFeed: feed.New[string]("fake-rt", 0), snapFeed: feed.NewSnapshot("fake-snap")}
}

func (a *fakeAccountant) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		http.Error(w, `{"error":"down"}`, http.StatusServiceUnavailable)
		return
	}
	switch r.URL.Path {
	case syncwire.SyncPath:
		a.serveSync(w, r)
	case syncwire.IngestPath:
		a.serveIngest(w, r)
	case syncwire.LeasePath:
		if a.lease == nil {
			http.NotFound(w, r)
			return
		}
		var req syncwire.LeaseRequest
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.leases = append(a.leases, req)
		json.NewEncoder(w).Encode(a.lease(req))
	case syncwire.AlertsPath:
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		for {
			var g syncwire.GateAlert
			if err := dec.Decode(&g); err == io.EOF {
				break
			} else if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			a.alerts = append(a.alerts, g)
		}
		w.Write([]byte(`{"accepted":1}`))
	default:
		http.NotFound(w, r)
	}
}

func (a *fakeAccountant) serveSync(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.polls = append(a.polls, r.URL.RawQuery)
	if a.heartbeat {
		a.snapshot.GeneratedAt = a.clock.Now()
	}
	page, _ := strconv.Atoi(q.Get("page"))
	if page <= 0 {
		page = syncwire.DefaultPageBytes
	}
	if a.pageBytes > 0 {
		page = min(page, a.pageBytes)
	}
	out := syncwire.Sync{
		Plan:     syncwire.Plan{Version: a.plan.Version},
		Prices:   syncwire.Prices{Version: a.prices.Version},
		Runtime:  a.runtimePage(q.Get("runtime"), page),
		Replicas: a.replicas,
		Redis:    a.redis,
	}
	perValue := a.perValue
	if perValue == nil {
		perValue = func(string) (string, bool) { return "model=", true }
	}
	a.snapFeed.Update(a.snapshot, perValue)
	out.Snapshot = a.snapFeed.Page(q.Get("snapshot"), page)
	out.Snapshot.GeneratedAt, out.Snapshot.Fleet = a.snapshot.GeneratedAt, a.snapshot.Fleet
	if q.Get("prices") != out.Prices.Version {
		out.Prices = a.prices
	}
	if q.Get("plan") != out.Plan.Version {
		out.Plan = a.plan
	}
	b, _ := json.Marshal(out)
	a.answers = append(a.answers, len(b))
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// runtimePage is a page of the runtime plane's feed.
func (a *fakeAccountant) runtimePage(cursor string, maxBytes int) syncwire.RuntimePage {
	changes, p := a.rtFeed.Page(cursor, maxBytes, func(c feed.Change[string]) int { return len(c.Value) + len(c.Key) })
	out := syncwire.RuntimePage{Page: p}
	for _, c := range changes {
		kind, id := c.Key[:1], c.Key[1:]
		switch kind {
		case "k":
			k := syncwire.Key{KID: id, Gone: c.Gone}
			if !c.Gone {
				json.Unmarshal([]byte(c.Value), &k)
			}
			out.Keys = append(out.Keys, k)
		case "n":
			out.Nodes = append(out.Nodes, syncwire.Node{ID: id, Tree: !c.Gone})
		case "o":
			o := syncwire.Override{Gone: c.Gone}
			o.LimitID, o.Node, _ = strings.Cut(id, "@")
			if !c.Gone {
				json.Unmarshal([]byte(c.Value), &o)
			}
			out.Overrides = append(out.Overrides, o)
		}
	}
	return out
}

// setRuntimeItems makes the runtime feed's items of kind exactly items
// (by id, their JSON).
func (a *fakeAccountant) setRuntimeItems(kind string, items map[string]string) {
	for id, js := range items {
		a.rtFeed.Put(kind+id, js)
	}
	a.rtFeed.Retain(func(k string) bool {
		if k[:1] != kind {
			return true
		}
		_, ok := items[k[1:]]
		return ok
	})
}

func (a *fakeAccountant) serveIngest(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if a.maxBody > 0 && len(body) > a.maxBody {
		a.tooLarge++
		http.Error(w, `{"error":{"message":"ingest: batch is too large"}}`, http.StatusRequestEntityTooLarge)
		return
	}
	if a.failIngest > 0 {
		a.failIngest--
		a.failed++
		http.Error(w, `{"error":"ledger unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	rows, err := ledger.ParseJSONL(body, nil)
	ack := syncwire.IngestAck{Kinds: a.kinds}
	if err != nil {
		a.rejected++
		a.rawErrors = append(a.rawErrors, err.Error())
		ack.Rejected = 1
		ack.Errors = []string{err.Error()}
	}
	a.batches = append(a.batches, rows)
	for _, row := range rows {
		if row.Kind == ledger.KindStart {
			if _, dup := a.starts[row.RequestID]; dup {
				ack.Duplicates++
				continue
			}
			a.starts[row.RequestID] = row
			ack.Accepted++
			continue
		}
		if _, dup := a.rows[row.RequestID]; dup {
			a.dups++
			ack.Duplicates++
			continue
		}
		a.rows[row.RequestID] = row
		a.order = append(a.order, row.RequestID)
		ack.Accepted++
	}
	if a.loseAcks > 0 {
		a.loseAcks--
		http.Error(w, `{"error":"acknowledgement lost"}`, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ack)
}

// setPlan publishes a governance block (JSON) under a version.
func (a *fakeAccountant) setPlan(version, governance string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.plan = syncwire.Plan{Version: version}
	if governance != "" {
		g, err := config.DecodeGovernanceJSON([]byte(governance))
		if err != nil {
			panic(err)
		}
		a.plan.Governance = g
	}
}

// setKeys makes the key table exactly keys (the version names the state
// in the test; the feed carries what changed).
func (a *fakeAccountant) setKeys(version string, keys ...syncwire.Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	items := make(map[string]string, len(keys))
	for _, k := range keys {
		b, _ := json.Marshal(k)
		items[k.KID] = string(b)
	}
	a.setRuntimeItems("k", items)
}

// putKeys adds or replaces keys, as mints and revocations do.
func (a *fakeAccountant) putKeys(keys ...syncwire.Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range keys {
		b, _ := json.Marshal(k)
		a.rtFeed.Put("k"+k.KID, string(b))
	}
}

// setRuntime makes the runtime nodes and the overrides exactly these. A
// node is sent with every node above it, as the accountant does.
func (a *fakeAccountant) setRuntime(version string, nodes []string, overrides ...syncwire.Override) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ns := map[string]string{}
	for _, n := range nodes {
		for end := len(n); end > 0; end = strings.LastIndexByte(n[:end], '/') {
			ns[n[:end]] = "tree"
		}
	}
	a.setRuntimeItems("n", ns)
	os := map[string]string{}
	for _, o := range overrides {
		b, _ := json.Marshal(o)
		os[o.LimitID+"@"+o.Node] = string(b)
	}
	a.setRuntimeItems("o", os)
}

// setSnapshot publishes counters under a version.
func (a *fakeAccountant) setSnapshot(version string, entries ...syncwire.Entry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.snapshot.Version = version
	a.snapshot.Entries = entries
	a.snapshot.GeneratedAt = a.clock.Now()
}

func (a *fakeAccountant) set(f func(a *fakeAccountant)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(a)
}

// ledger returns the recorded rows in arrival order.
func (a *fakeAccountant) ledger() []ledger.Row {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]ledger.Row, 0, len(a.order))
	for _, id := range a.order {
		out = append(out, a.rows[id])
	}
	return out
}

func (a *fakeAccountant) row(id string) (ledger.Row, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.rows[id]
	return r, ok
}

// answerSizes returns the bytes of every sync answer, in order.
func (a *fakeAccountant) answerSizes() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.answers...)
}

func (a *fakeAccountant) pollQueries() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.polls...)
}

func (a *fakeAccountant) batchSizes() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]int, len(a.batches))
	for i, b := range a.batches {
		out[i] = len(b)
	}
	sort.Ints(out)
	return out
}

// monthStart is the start of t0's calendar month, the period_start of a
// monthly counter.
func monthStart() time.Time { return time.Date(t0.Year(), t0.Month(), 1, 0, 0, 0, 0, time.UTC) }

func dayStart() time.Time { return time.Date(t0.Year(), t0.Month(), t0.Day(), 0, 0, 0, 0, time.UTC) }

// leaseCalls returns the lease calls made so far, and how many asked for
// something (need or extra).
func (a *fakeAccountant) leaseCalls() (all []syncwire.LeaseRequest, asks int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	all = append(all, a.leases...)
	for _, c := range all {
		for _, l := range c.Leases {
			if l.Need > 0 || l.Extra > 0 {
				asks++
				break
			}
		}
	}
	return all, asks
}

// memLeases is the accountant's lease arithmetic over a Redis held in
// memory: rate cells stepped by shared/rate as the Lua script steps them
// (need, the part of it that fits, extra up to half of what is left, a
// lot's units given back to the window they came from, gcra's less what
// drained), spend leases over the fleet's published spend (spent), and
// slots per replica. down, when set, is Redis not deciding.
type memLeases struct {
	clock interface{ Now() time.Time }
	down  string
	// replicas is the fleet's replica count the answers carry.
	replicas int
	cells    map[string]rate.State
	// spent is the fleet's published spend by counter (the others').
	spent   map[string]int64
	granted map[string]map[string]int64 // counter -> replica -> granted, not given back
	held    map[string]map[string]int64 // counter -> replica -> held by calls in flight
	slots   map[string]map[string]int64
}

func newMemLeases(clock interface{ Now() time.Time }) *memLeases {
	return &memLeases{clock: clock, cells: map[string]rate.State{}, spent: map[string]int64{},
		granted: map[string]map[string]int64{}, held: map[string]map[string]int64{}, slots: map[string]map[string]int64{}}
}

// serve answers one lease call; the fake accountant holds its lock.
func (m *memLeases) serve(req syncwire.LeaseRequest) syncwire.LeaseAnswer {
	ans := syncwire.LeaseAnswer{Replicas: m.replicas}
	if m.down != "" {
		ans.Suspended, ans.Down = m.down, true
		return ans
	}
	now := m.clock.Now()
	for _, l := range req.Leases {
		var g syncwire.LeaseGrant
		switch l.Kind {
		case syncwire.LeaseRate:
			g = m.rate(l, now)
		case syncwire.LeaseSpend:
			g = m.spend(req.Replica, l)
		case syncwire.LeaseSlots:
			g = m.slot(req.Replica, l)
		}
		ans.Leases = append(ans.Leases, g)
	}
	return ans
}

func (m *memLeases) rate(l syncwire.Lease, now time.Time) syncwire.LeaseGrant {
	alg, _ := rate.ParseAlgorithm(l.Alg)
	p := rate.Params{Amount: l.Amount, Period: time.Duration(l.PeriodNS), Burst: l.Burst}
	st := m.cells[l.ID]
	idx := now.UnixNano() / l.PeriodNS
	if anchor, err := strconv.ParseInt(l.Anchor, 10, 64); err == nil && l.Back > 0 {
		switch {
		case alg == rate.GCRA:
			drained := int64(float64(now.UnixNano()-anchor) * float64(l.Amount) / float64(l.PeriodNS))
			if c := l.Back - max(drained, 0); c > 0 {
				st = rate.Adjust(alg, st, now, -c, p)
			}
		case anchor == idx:
			st = rate.Adjust(alg, st, now, -l.Back, p)
		}
	}
	g := syncwire.LeaseGrant{Allowed: true}
	res, _ := rate.Take(alg, st, now, 0, p)
	if l.Need > 0 {
		r, next := rate.Take(alg, st, now, l.Need, p)
		if r.Allowed {
			g.Granted, st, res = l.Need, next, r
		} else {
			g.Allowed, g.RetryAfterNS, g.Unfittable = false, int64(r.RetryAfter), r.Unfittable
			if part := min(l.Need-1, r.Remaining); part > 0 {
				if rp, next := rate.Take(alg, st, now, part, p); rp.Allowed {
					g.Granted, st, res = part, next, rp
				}
			}
		}
	}
	if g.Allowed && l.Extra > 0 {
		if e := min(l.Extra, res.Remaining/2); e > 0 {
			if re, next := rate.Take(alg, st, now, e, p); re.Allowed {
				g.Granted, st, res = g.Granted+e, next, re
			}
		}
	}
	m.cells[l.ID] = st
	g.Limit, g.Remaining, g.ResetAfterNS = res.Limit, res.Remaining, int64(res.ResetAfter)
	if alg == rate.GCRA {
		g.Anchor, g.ValidNS = strconv.FormatInt(now.UnixNano(), 10), int64(time.Second)
	} else {
		g.Anchor, g.ValidNS = strconv.FormatInt(idx, 10), l.PeriodNS-now.UnixNano()%l.PeriodNS
	}
	return g
}

func (m *memLeases) spend(rep string, l syncwire.Lease) syncwire.LeaseGrant {
	if m.granted[l.ID] == nil {
		m.granted[l.ID], m.held[l.ID] = map[string]int64{}, map[string]int64{}
	}
	if _, ok := m.granted[l.ID][rep]; !ok {
		m.granted[l.ID][rep] = l.Granted
	}
	m.granted[l.ID][rep] = max(m.granted[l.ID][rep]-l.Back, 0)
	m.held[l.ID][rep] = l.Held
	used, inFlight := m.spent[l.ID], int64(0)
	for r, n := range m.granted[l.ID] {
		used += n
		inFlight += m.held[l.ID][r]
	}
	g := syncwire.LeaseGrant{Allowed: true, Spent: used, InFlight: inFlight}
	room := max(l.Amount-used, 0)
	switch {
	case l.Need == 0 && l.Least == 0:
	case l.Need <= room:
		g.Granted = l.Need + min(l.Extra, (room-l.Need)/2)
	case l.Least <= room && room > 0:
		g.Allowed, g.Granted = false, room
	default:
		g.Allowed = false
	}
	m.granted[l.ID][rep] += g.Granted
	g.Left = room - g.Granted
	return g
}

func (m *memLeases) slot(rep string, l syncwire.Lease) syncwire.LeaseGrant {
	if m.slots[l.ID] == nil {
		m.slots[l.ID] = map[string]int64{}
	}
	mine, ok := m.slots[l.ID][rep]
	if !ok {
		mine = l.Held
	}
	mine = max(mine-l.Back, 0)
	others := int64(0)
	for r, n := range m.slots[l.ID] {
		if r != rep {
			others += n
		}
	}
	g := syncwire.LeaseGrant{Allowed: true}
	if l.Need > 0 {
		room := max(l.Amount-others-mine, 0)
		if l.Need <= room {
			g.Granted = l.Need + min(l.Extra, (room-l.Need)/2)
		} else {
			g.Allowed, g.Granted = false, room
		}
	}
	mine += g.Granted
	m.slots[l.ID][rep] = mine
	g.Others, g.Mine = others, mine
	return g
}
