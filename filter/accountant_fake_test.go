package filter_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// fakeAccountant serves the accountant's side of shared/syncwire from the
// test: sync answers built from the state the test sets (each part whole
// when the filter's version differs, its version alone when current, as the
// accountant does), and an ingest endpoint that records rows by request id.
type fakeAccountant struct {
	clock interface{ Now() time.Time }

	mu       sync.Mutex
	plan     syncwire.Plan
	keys     syncwire.Keys
	runtime  syncwire.Runtime
	snapshot syncwire.Snapshot
	prices   syncwire.Prices
	replicas int
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
		kinds: syncwire.RowKinds}
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
	out := syncwire.Sync{
		Plan:     syncwire.Plan{Version: a.plan.Version},
		Keys:     syncwire.Keys{Version: a.keys.Version},
		Runtime:  syncwire.Runtime{Version: a.runtime.Version},
		Snapshot: syncwire.Snapshot{Version: a.snapshot.Version, GeneratedAt: a.snapshot.GeneratedAt},
		Prices:   syncwire.Prices{Version: a.prices.Version},
		Replicas: a.replicas,
		Redis:    a.redis,
	}
	if q.Get("prices") != out.Prices.Version {
		out.Prices = a.prices
	}
	if q.Get("plan") != out.Plan.Version {
		out.Plan = a.plan
	}
	if q.Get("keys") != out.Keys.Version {
		out.Keys = a.keys
	}
	if q.Get("runtime") != out.Runtime.Version {
		out.Runtime = a.runtime
	}
	if q.Get("snapshot") != out.Snapshot.Version {
		out.Snapshot.Entries = a.snapshot.Entries
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
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

// setKeys publishes a key table under a version.
func (a *fakeAccountant) setKeys(version string, keys ...syncwire.Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys = syncwire.Keys{Version: version, Items: keys}
}

func (a *fakeAccountant) setRuntime(version string, nodes []string, overrides ...syncwire.Override) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.runtime = syncwire.Runtime{Version: version, Nodes: nodes, Overrides: overrides}
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
