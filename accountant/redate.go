package accountant

import (
	"time"

	"github.com/tokentriage/tokentriage/accountant/core"
)

// noteRedated counts the rows of a batch the core re-dated (their end lay
// too far from this accountant's clock; see core/redate.go) and logs it,
// at most once a minute with the count held back since.
func (s *Server) noteRedated(res core.Result) {
	s.metrics.redated.Add(float64(res.Redated))
	now := s.now()
	s.mu.Lock()
	s.redatedHeld += res.Redated
	due := now.Sub(s.redatedLogged) >= time.Minute
	held := s.redatedHeld
	if due {
		s.redatedLogged, s.redatedHeld = now, 0
	}
	s.mu.Unlock()
	if !due {
		return
	}
	dir := "behind"
	if res.Skew > 0 {
		dir = "ahead of"
	}
	s.log.Warn("ingest: rows whose end lay far from this accountant's clock were re-dated to it, so they count in the period they arrived in (the gateway's time is kept as gateway_end); check the clock of the gateway named",
		"rows", held, "replica", res.SkewReplica, "skew", res.Skew.Round(time.Second).String(), "direction", dir,
		"max_ahead", core.DefaultMaxRowAhead.String(), "max_lag", core.DefaultMaxRowLag.String())
}
