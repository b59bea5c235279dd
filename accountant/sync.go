package accountant

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// serveSync answers a filter's poll:
//
//	GET /tt/internal/v1/sync?plan=P&keys=K&runtime=R&snapshot=S&prices=C&replica=ID[&dropped=N]
//
// Each part is sent whole when the version the filter holds differs, and as
// its version alone when it is current. replica names the polling host
// process; replicas polling within LivenessWindow are counted in Replicas,
// and the plan and runtime versions each reports holding tell the
// management API whether an armed override is in force at every one.
// dropped is the replica's cumulative count of ledger rows it had to drop
// (its buffer overflowed), exported as a metric.
func (s *Server) serveSync(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.noteReplica(r, true)
	resp, err := s.sync(held{plan: q.Get("plan"), keys: q.Get("keys"), runtime: q.Get("runtime"),
		snapshot: q.Get("snapshot"), prices: q.Get("prices")})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "sync: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(resp)
}

// Sync builds the answer to a poll from the versions the filter holds, for
// a filter that holds no prices (they are sent whole).
func (s *Server) Sync(plan, keys, runtime, snapshot string) (syncwire.Sync, error) {
	return s.sync(held{plan: plan, keys: keys, runtime: runtime, snapshot: snapshot})
}

// held are the versions a poll reports holding, one per part.
type held struct {
	plan, keys, runtime, snapshot, prices string
}

func (s *Server) sync(h held) (syncwire.Sync, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, err := s.core.Snapshot()
	if err != nil {
		return syncwire.Sync{}, err
	}
	out := syncwire.Sync{
		Plan:     syncwire.Plan{Version: s.plan.Hash},
		Keys:     syncwire.Keys{Version: s.keys.Version},
		Runtime:  syncwire.Runtime{Version: s.runtime.Version},
		Snapshot: syncwire.Snapshot{Version: snap.Version, GeneratedAt: snap.GeneratedAt, Fleet: s.fleetStale()},
		Prices:   syncwire.Prices{Version: s.prices.Version},
		Replicas: s.shareReplicasLocked(now),
		Redis:    s.redis != nil,
	}
	if h.plan != out.Plan.Version {
		out.Plan.Governance = s.plan.Source
	}
	if h.keys != out.Keys.Version {
		out.Keys = s.keys
	}
	if h.runtime != out.Runtime.Version {
		out.Runtime = s.runtime
	}
	if h.snapshot != out.Snapshot.Version {
		out.Snapshot.Entries = snap.Entries
	}
	if h.prices != out.Prices.Version {
		out.Prices = s.prices
	}
	return out, nil
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
		s.noteHeldLocked(&rep, q.Get("plan"), q.Get("runtime"))
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
	s.droppedGone = addSat(s.droppedGone, s.replicas[oldest].dropped)
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
func (s *Server) shareReplicasLocked(now time.Time) int {
	n := s.liveReplicasLocked(now)
	if s.fleet != nil {
		n = max(n, s.fleet.Replicas())
	}
	return n
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
		n = addSat(n, r.dropped)
	}
	return n
}

// addSat is a + b for counts (never negative), saturating at the largest
// int64 instead of wrapping to a negative sum.
func addSat(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
