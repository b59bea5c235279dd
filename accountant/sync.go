package accountant

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// serveSync answers a filter's poll:
//
//	GET /tt/internal/v1/sync?plan=P&keys=K&runtime=R&snapshot=S&replica=ID[&dropped=N]
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
	resp, err := s.Sync(q.Get("plan"), q.Get("keys"), q.Get("runtime"), q.Get("snapshot"))
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "sync: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(resp)
}

// Sync builds the answer to a poll from the versions the filter holds.
func (s *Server) Sync(plan, keys, runtime, snapshot string) (syncwire.Sync, error) {
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
		Snapshot: syncwire.Snapshot{Version: snap.Version, GeneratedAt: snap.GeneratedAt},
		Replicas: s.liveReplicasLocked(now),
	}
	if plan != out.Plan.Version {
		out.Plan.Governance = s.plan.Source
	}
	if keys != out.Keys.Version {
		out.Keys = s.keys
	}
	if runtime != out.Runtime.Version {
		out.Runtime = s.runtime
	}
	if snapshot != out.Snapshot.Version {
		out.Snapshot.Entries = snap.Entries
	}
	return out, nil
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
	s.droppedGone += s.replicas[oldest].dropped
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

// droppedReported sums the cumulative dropped counts the replicas reported.
func (s *Server) droppedReported() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.droppedGone
	for _, r := range s.replicas {
		n += r.dropped
	}
	return n
}
