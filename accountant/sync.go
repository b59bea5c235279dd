package accountant

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/sat"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// serveSync answers a filter's poll:
//
//	GET /tt/internal/v1/sync?plan=P&prices=C&runtime=CURSOR&snapshot=CURSOR&page=BYTES&replica=ID[&dropped=N][&building=1]
//
// The plan and the prices are sent whole when the version the filter
// holds differs, and as their version alone when it is current; the
// runtime plane and the spend snapshot as one page each of their change
// feeds after the filter's cursors, each bounded by page bytes
// (syncwire.DefaultPageBytes when absent). replica names the polling host
// process; replicas polling within LivenessWindow are counted in Replicas,
// and the plan version and runtime cursor each reports holding tell the
// management API whether an armed override is in force at every one
// (building: the replica is rebuilding its copy of the runtime plane from
// the start and holds none the accountant knows until it is whole).
// dropped is the replica's cumulative count of ledger rows it had to drop
// (its buffer overflowed), exported as a metric.
func (s *Server) serveSync(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.noteReplica(r, true)
	page := syncwire.DefaultPageBytes
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "sync: page="+strconv.Quote(v)+" is not a number of bytes")
			return
		}
		page = min(max(n, syncwire.MinPageBytes), syncwire.MaxPageBytes)
	}
	resp, err := s.sync(Held{Plan: q.Get("plan"), Prices: q.Get("prices"), Runtime: q.Get("runtime"), Snapshot: q.Get("snapshot")}, page)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "sync: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(resp)
}

// Held is what a poll reports holding: the plan and price versions, and a
// cursor into each change feed ("" for none: the feed starts over).
type Held struct {
	Plan, Prices, Runtime, Snapshot string
}

// Sync builds the answer to a poll from what the filter holds, each feed
// page bounded by page bytes.
func (s *Server) Sync(h Held, page int) (syncwire.Sync, error) { return s.sync(h, page) }

func (s *Server) sync(h Held, page int) (syncwire.Sync, error) {
	now := s.now()
	rt, skipped, err := s.db.Feed(h.Runtime, page)
	if err != nil {
		return syncwire.Sync{}, err
	}
	for _, why := range skipped {
		s.log.Error("sync: a runtime plane item is unreadable and is sent as gone", "item", why)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, err := s.core.Snapshot()
	if err != nil {
		return syncwire.Sync{}, err
	}
	s.snapFeed.Update(snap, s.perValueLocked)
	out := syncwire.Sync{
		Plan:     syncwire.Plan{Version: s.plan.Hash},
		Prices:   syncwire.Prices{Version: s.prices.Version},
		Runtime:  rt,
		Snapshot: s.snapFeed.Page(h.Snapshot, page),
		Replicas: s.shareReplicasLocked(now),
		Redis:    s.redis != nil,
	}
	out.Snapshot.GeneratedAt, out.Snapshot.Fleet = snap.GeneratedAt, s.fleetStale()
	if h.Plan != out.Plan.Version {
		out.Plan.Governance = s.plan.Source
	}
	if h.Prices != out.Prices.Version {
		out.Prices = s.prices
	}
	return out, nil
}

// perValueLocked says whether the armed limit with id limitID keeps a
// counter per value, and the start of the dims its values share
// (feed.PerValue); s.mu is held.
func (s *Server) perValueLocked(limitID string) (string, bool) {
	if s.armed == nil {
		return "", false
	}
	l := s.armed.Plan.Limit(limitID)
	if l == nil || !l.PerValue() {
		return "", false
	}
	// The identity at node "" is <id>|<type>||<dims>.
	base := govern.DistinctBase(l, "")
	return strings.TrimPrefix(base, l.ID+"|"+l.Type.String()+"||"), true
}

// pricesPart is the prices part of the sync answer for catalog c: every
// name it knows exactly with its rates, and a hash of them as the version.
// The catalog is immutable, so the part is built once at start.
func pricesPart(c *pricing.Catalog) syncwire.Prices {
	t := c.Table()
	models := make(map[string]syncwire.ModelRates, len(t))
	for n, r := range t {
		models[n] = syncwire.ModelRates{Input: r.Input, Output: r.Output, Cached: r.Cached}
	}
	b, err := json.Marshal(models) // map keys sorted: the same table, the same bytes
	if err != nil {
		panic("accountant: marshalling the price table: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return syncwire.Prices{Version: hex.EncodeToString(sum[:]), Models: models}
}

// noteReplica records a poll (or an ingest) from a replica.
func (s *Server) noteReplica(r *http.Request, poll bool) {
	q := r.URL.Query()
	id := q.Get("replica")
	if id == "" || len(id) > 256 {
		return
	}
	dropped, _ := strconv.ParseInt(q.Get("dropped"), 10, 64)
	now := s.now()
	s.mu.Lock()
	rep, known := s.replicas[id]
	if !known && len(s.replicas) >= MaxReplicas {
		s.evictReplicaLocked()
	}
	if poll || !rep.seen.IsZero() {
		rep.seen = now
	}
	if poll {
		held := q.Get("runtime")
		if q.Get("building") != "" {
			// Its VMs read the copy it had until the rebuild the cursor
			// counts is whole: no override armed since is in force there.
			held = ""
		}
		s.noteHeldLocked(&rep, q.Get("plan"), held)
	}
	if dropped > rep.dropped {
		rep.dropped = dropped
	}
	s.replicas[id] = rep
	s.mu.Unlock()
}

// evictReplicaLocked forgets the replica heard from longest ago (one known
// only from an ingest first), keeping its dropped count, so a flood of
// made-up ?replica= ids cannot grow the table past MaxReplicas.
func (s *Server) evictReplicaLocked() {
	var oldest string
	var at time.Time
	first := true
	for id, r := range s.replicas {
		if first || r.seen.Before(at) {
			oldest, at, first = id, r.seen, false
		}
	}
	if first {
		return
	}
	s.droppedGone = sat.Add(s.droppedGone, s.replicas[oldest].dropped)
	delete(s.replicas, oldest)
	s.replicasEvicted++
}

// liveReplicasLocked counts replicas that polled within LivenessWindow.
func (s *Server) liveReplicasLocked(now time.Time) int {
	n := 0
	for _, r := range s.replicas {
		if r.live(now) {
			n++
		}
	}
	return n
}

// shareReplicasLocked is the replica count store: share divides by: the
// fleet's, counted from every accountant's heartbeats in the shared Redis
// (as last read, so a Redis that is down keeps the last count), or without
// one this accountant's own live replicas. Only replicas that polled with
// the internal token are counted anywhere.
//
// With a shared Redis the count read last is kept in the data directory
// (fleet.json): an accountant restarted while Redis is away divides by it,
// not by its own replicas alone.
func (s *Server) shareReplicasLocked(now time.Time) int {
	n := s.liveReplicasLocked(now)
	if s.fleet != nil {
		fn := s.fleet.Replicas()
		if fn > 0 && int64(fn) != s.lastReplicas.Load() {
			s.lastReplicas.Store(int64(fn))
			go s.saveFleetState("", fn)
		}
		n = max(n, int(s.lastReplicas.Load()))
	}
	return n
}

// shareReplicas is shareReplicasLocked, taking the lock.
func (s *Server) shareReplicas() int {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shareReplicasLocked(now)
}

// liveReplicaIDs names the replicas that polled within LivenessWindow.
func (s *Server) liveReplicaIDs() []string {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.replicas))
	for id, r := range s.replicas {
		if r.live(now) {
			ids = append(ids, id)
		}
	}
	return ids
}

// droppedReported sums the cumulative dropped counts the replicas reported.
func (s *Server) droppedReported() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.droppedGone
	for _, r := range s.replicas {
		n = sat.Add(n, r.dropped)
	}
	return n
}
