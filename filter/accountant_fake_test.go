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
	// admit answers the fleet store's questions (store: redis); nil: 404.
	admit  func(syncwire.AdmitRequest) syncwire.AdmitAnswer
	admits []syncwire.AdmitRequest
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
	case syncwire.AdmitPath:
		if a.admit == nil {
			http.NotFound(w, r)
			return
		}
		var req syncwire.AdmitRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.admits = append(a.admits, req)
		json.NewEncoder(w).Encode(a.admit(req))
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
