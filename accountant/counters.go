package accountant

import "github.com/tokentriage/tokentriage/accountant/api"

// liveCounters is what GET /tt/api/v1/governance/counters shows: the
// snapshot the filters read now, with the plan armed and the rows the
// filters report having dropped.
func (s *Server) liveCounters() (api.LiveCounters, error) {
	now := s.now()
	s.mu.Lock()
	snap, err := s.core.Snapshot()
	plan := s.plan.Hash
	live := s.liveReplicasLocked(now)
	s.mu.Unlock()
	if err != nil {
		return api.LiveCounters{}, err
	}
	return api.LiveCounters{
		Plan:        plan,
		GeneratedAt: snap.GeneratedAt,
		Counters:    snap.Entries,
		Lag:         api.CountersLag{DroppedRows: s.droppedReported(), ReplicasLive: live},
	}, nil
}
