package accountant

import (
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// An override reads as in force only once every live filter replica holds
// it. A replica says what it holds with each sync poll (?plan= the plan
// version it has loaded, ?runtime= its cursor into the runtime plane's
// change feed, everything up to which it has written), so the accountant
// keeps, per armed override, the point it was armed at: the feed's
// position and the plan's generation (a count of the plan hashes armed
// since start). A replica holds the override when it reports a cursor of
// this governance.db at least that far, and a plan hash that was current
// at that generation or later.

// overrideKey names an instance an override applies to.
type overrideKey struct{ limit, node string }

// armedAt is the amount an override is armed with and the point it was
// armed at.
type armedAt struct {
	amount  int64
	runtime int64 // the runtime plane's change feed position
	plan    int64 // the plan generation
}

// maxPlanGens bounds the plan hashes remembered; a replica holding a plan
// forgotten since counts as not holding overrides armed after it.
const maxPlanGens = 64

// noteArmedLocked records, after arming, the point each armed override
// was armed at: one armed before with the same amount keeps its point;
// a new one, or one whose amount changed, is armed at the current runtime
// count and plan generation. s.mu is held.
func (s *Server) noteArmedLocked() {
	if s.plan.Hash != s.armedPlan {
		s.planGen++
		s.armedPlan = s.plan.Hash
		s.planGens[s.plan.Hash] = s.planGen
		if len(s.planGens) > maxPlanGens {
			var oldest string
			first := true
			for h, g := range s.planGens {
				if first || g < s.planGens[oldest] {
					oldest, first = h, false
				}
			}
			delete(s.planGens, oldest)
		}
	}
	id, seq, _ := syncwire.ParseCursor(s.feed)
	n := int64(seq)
	if id != s.runtimeID {
		s.runtimeID, s.since = id, nil // another database: nothing carries over
	}
	since := map[overrideKey]armedAt{}
	if s.armed != nil {
		for _, o := range s.armed.Overrides() {
			got, ok := s.armed.Override(o.LimitID, o.Node)
			if !ok {
				continue
			}
			k := overrideKey{o.LimitID, o.Node}
			if prev, ok := s.since[k]; ok && prev.amount == got {
				since[k] = prev
				continue
			}
			since[k] = armedAt{amount: got, runtime: n, plan: s.planGen}
		}
	}
	s.since = since
}

// noteHeldLocked records the versions a polling replica reports holding.
// s.mu is held.
func (s *Server) noteHeldLocked(rep *replica, plan, rt string) {
	was := *rep
	rep.polled = true
	rep.plan, rep.runtime = -1, -1
	if g, ok := s.planGens[plan]; ok {
		rep.plan = g
	}
	if id, n, ok := syncwire.ParseCursor(rt); ok && id == s.runtimeID {
		rep.runtime = int64(n)
	}
	if !was.polled || was.plan != rep.plan || was.runtime != rep.runtime {
		if s.mirror != nil {
			s.mirror.kickPull() // the owner hears of it now, not at the next pull
		} else {
			s.wakePulls() // the mirrors hear of it now
		}
	}
}

// Rollout is what the management API is told of how far the armed
// overrides reached: the live filter replicas of the whole fleet and, per
// override, how many of them hold it. The owner adds to its own filters
// the reports of its live mirrors; a mirror answers with the fleet's
// figures from its last pull, or, when the owner has not answered within
// LivenessWindow, with its own filters alone.
func (s *Server) Rollout() api.Rollout {
	if s.mirror != nil {
		if ro, ok := s.mirror.fleetRollout(s.now()); ok {
			return ro
		}
		return s.localRollout()
	}
	own := s.localRollout()
	s.mu.Lock()
	live, holding := s.mirrorsLocked(s.now())
	s.mu.Unlock()
	return api.Rollout{
		Live:    own.Live + live,
		Window:  LivenessWindow,
		Holding: func(o govern.Override) int { return own.Holding(o) + holding(o) },
	}
}

// localRollout is Rollout over this accountant's own filter replicas.
func (s *Server) localRollout() api.Rollout {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	type held struct{ plan, runtime int64 }
	var live []held
	for _, r := range s.replicas {
		if r.live(now) {
			h := held{-1, -1}
			if r.polled {
				h = held{r.plan, r.runtime}
			}
			live = append(live, h)
		}
	}
	since := s.since // replaced, never changed in place
	return api.Rollout{
		Live:   len(live),
		Window: LivenessWindow,
		Holding: func(o govern.Override) int {
			at, ok := since[overrideKey{o.LimitID, o.Node}]
			if !ok || at.amount != o.Amount {
				return 0
			}
			n := 0
			for _, h := range live {
				if h.runtime >= at.runtime && h.plan >= at.plan {
					n++
				}
			}
			return n
		},
	}
}

// localReport is localRollout as a mirror reports it to the owner: per
// override of the runtime plane it holds, how many of its live filter
// replicas hold it.
func (s *Server) localReport() rolloutReport { return s.heldReport(s.localRollout(), false) }

// heldReport is ro per override of the runtime plane: every one with
// unheld, else those some replica holds.
func (s *Server) heldReport(ro api.Rollout, unheld bool) rolloutReport {
	s.mu.Lock()
	ovs := s.rt.Overrides
	s.mu.Unlock()
	out := rolloutReport{Live: ro.Live}
	for _, o := range ovs {
		if n := ro.Holding(o); n > 0 || unheld {
			out.Holding = append(out.Holding, heldOverride{LimitID: o.LimitID, Node: o.Node, Amount: o.Amount, Replicas: n})
		}
	}
	return out
}

// live reports whether the replica polled within LivenessWindow.
func (r replica) live(now time.Time) bool {
	return !r.seen.IsZero() && now.Sub(r.seen) <= LivenessWindow
}
