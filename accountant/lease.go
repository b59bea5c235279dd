package accountant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/accountant/redisstore"
	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/rate"
	"github.com/tokentriage/tokentriage/shared/sat"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Leases (syncwire.LeasePath): the filter takes slices of its fleet limits
// here, gives back what it did not use, and renews what it holds; the
// accountant runs each as one script in the fleet's Redis
// (redisstore.Lease), which never leases more than the limit holds.

// maxLeaseBytes bounds one lease call: a replica's renewal names each of
// its leases once.
const maxLeaseBytes = 1 << 20

// maxLeases bounds the leases of one call.
const maxLeases = 4096

// Lease timing. A spend lease's free part (granted, not held by a call in
// flight) stops counting LeaseFree after its replica's last renewal (once
// a second while it lives); what its calls in flight hold counts for the
// filter's lease_ttl (seed 003's 15 minutes), by which time the accountant
// has closed a call whose end never came. A replica's concurrency slots
// lapse LeaseSlots after its last renewal.
const (
	LeaseFree  = 10 * time.Second
	LeaseSlots = 10 * time.Second
	// LeaseHold is how long a gcra lot may be drawn on (the filter's
	// rule, sent in each lease).
	leaseRenewTimeout = time.Second
)

// serveLease answers POST /tt/internal/v1/lease. It answers 200 either way:
// with the grants, or with Suspended saying why Redis did not decide, for
// the filter to decide inside its lease and its share and disclose it.
func (s *Server) serveLease(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLeaseBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("lease: reading the body: %v (at most %d bytes)", err, maxLeaseBytes))
		return
	}
	var req syncwire.LeaseRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "lease: the body is not a lease request: "+err.Error())
		return
	}
	ans, err := s.Lease(r.Context(), req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(ans)
}

// Lease runs one lease call. An error is a malformed request; Redis being
// unable to decide is an answer with Suspended set.
func (s *Server) Lease(ctx context.Context, req syncwire.LeaseRequest) (syncwire.LeaseAnswer, error) {
	ans := syncwire.LeaseAnswer{Replicas: s.shareReplicas()}
	if len(req.Leases) > maxLeases {
		return ans, fmt.Errorf("lease: %d leases; at most %d", len(req.Leases), maxLeases)
	}
	if req.Replica == "" || len(req.Replica) > 256 {
		return ans, fmt.Errorf("lease: a lease call names its replica (1 to 256 bytes)")
	}
	ops := make([]redisstore.LeaseOp, len(req.Leases))
	for i, l := range req.Leases {
		op, err := leaseOp(l, req.Replica, leaseTTL(req.LeaseTTLNS))
		if err != nil {
			return ans, fmt.Errorf("lease: leases[%d]: %v", i, err)
		}
		if op.Kind == redisstore.LeaseSpend && s.adjust != nil {
			// The fleet's spend in Redis keeps every row; what resets and
			// credits took off the counter raises the room instead.
			op.Amount = sat.Add(op.Amount, s.adjust.creditOf(store.Key{ID: op.ID, Unit: op.Unit, Start: op.Start}))
		}
		ops[i] = op
	}
	rc := s.redis
	if rc == nil {
		ans.Suspended, ans.Down = "this accountant has no shared Redis (governance.shared_state.redis, or --redis HOST:PORT)", true
		return ans, nil
	}
	timeout := leaseRenewTimeout
	if req.Wait {
		// The request path's deadline, or as long as the waiting requests
		// may still wait: an ask is answered once however often it is
		// asked (its ask id), so a slow Redis is better waited for than
		// asked again.
		timeout = min(max(time.Duration(req.DeadlineNS), rc.Timeout()), leaseRenewTimeout)
	}
	rebuilding := s.fleet != nil && !s.fleet.Rebuilding().IsZero()
	if rebuilding {
		ops = s.rebuildOps(req.Replica, ops)
	}
	for i := range ops {
		ops[i].Replicas = ans.Replicas
	}
	ep, res, err := rc.Lease(ctx, ops, timeout)
	if err != nil {
		s.metrics.suspended.Inc()
		s.noteRedisFailure("taking or renewing leases", err)
		ans.Suspended = "the shared Redis did not decide: " + err.Error()
		ans.Down = !errors.Is(err, redisstore.ErrTimeout)
		return ans, nil
	}
	if s.fleet != nil {
		s.fleet.NoteEpoch(ep)
		if !rebuilding && !s.fleet.Rebuilding().IsZero() {
			// This call found that Redis lost its data: what it granted
			// was counted against a fleet whose leases are not all back
			// yet. It goes back at once, and the replica decides within
			// its share until they are.
			s.giveBack(ops, res)
			rebuilding = true
		}
	}
	if rebuilding {
		ans.Suspended, ans.Down = "the shared Redis lost its data; the fleet's leases and totals are being counted again from the replicas and the ledgers (a few seconds)", true
		s.metrics.suspended.Inc()
		return ans, nil
	}
	ans.Leases = make([]syncwire.LeaseGrant, len(res))
	for i, a := range res {
		g := syncwire.LeaseGrant{Allowed: a.Allowed, Granted: a.Granted}
		if a.Err != nil {
			g = syncwire.LeaseGrant{Error: a.Err.Error()}
			s.noteRedisFailure("a lease", a.Err)
		}
		switch req.Leases[i].Kind {
		case syncwire.LeaseRate:
			g.Limit, g.Remaining, g.RetryAfterNS, g.ResetAfterNS, g.Unfittable = a.Result.Limit, a.Result.Remaining,
				int64(a.Result.RetryAfter), int64(a.Result.ResetAfter), a.Result.Unfittable
			g.Anchor, g.ValidNS = a.Anchor, int64(a.Valid)
		case syncwire.LeaseSpend:
			g.Spent, g.InFlight, g.Left = a.Spent, a.InFlight, a.Left
		case syncwire.LeaseSlots:
			g.Others, g.Mine = a.Others, a.Mine
		}
		ans.Leases[i] = g
	}
	return ans, nil
}

// leaseTTL is how long what a silent replica's calls in flight hold keeps
// counting: the filter's lease_ttl (seed 003's 15 minutes by default).
func leaseTTL(ns int64) time.Duration {
	if ns <= 0 {
		return 15 * time.Minute
	}
	return time.Duration(ns)
}

// leaseOp checks and converts one wire lease.
func leaseOp(l syncwire.Lease, replica string, holdTTL time.Duration) (redisstore.LeaseOp, error) {
	if l.ID == "" || l.Need < 0 || l.Least < 0 || l.Extra < 0 || l.Back < 0 || l.Granted < 0 || l.Held < 0 || l.Amount < 0 {
		return redisstore.LeaseOp{}, fmt.Errorf("a lease needs an id and amounts of 0 or more")
	}
	if len(l.Ask) > 256 {
		return redisstore.LeaseOp{}, fmt.Errorf("an ask id is at most 256 bytes")
	}
	op := redisstore.LeaseOp{ID: l.ID, Need: l.Need, Extra: l.Extra, Back: l.Back, Anchor: l.Anchor,
		Replica: replica, Amount: l.Amount, Least: l.Least, Granted: l.Granted, Held: l.Held, Ask: l.Ask}
	switch l.Kind {
	case syncwire.LeaseRate:
		alg, ok := rate.ParseAlgorithm(l.Alg)
		if !ok || alg == rate.TokenBucket || l.Amount <= 0 || l.PeriodNS <= 0 || l.Burst < 0 {
			return op, fmt.Errorf("a rate lease needs an algorithm Redis runs (gcra, fixed_window, sliding_window), a positive amount and period_ns, and a burst of 0 or more")
		}
		op.Kind, op.Alg = redisstore.LeaseRate, alg
		op.Params = rate.Params{Amount: l.Amount, Period: time.Duration(l.PeriodNS), Burst: l.Burst}
		op.Hold = LotHold(alg, op.Params)
	case syncwire.LeaseSpend:
		unit, ok := calendar.ParseUnit(l.Unit)
		if !ok || l.Least > l.Need {
			return op, fmt.Errorf("a spend lease needs a calendar unit (day, week, month) and a least cost no more than its need")
		}
		op.Kind, op.Unit = redisstore.LeaseSpend, unit
		op.Start = calendar.Start(unit, time.Unix(l.Start, 0).UTC()).Unix()
		op.Free, op.HoldTTL = LeaseFree, holdTTL
	case syncwire.LeaseSlots:
		op.Kind, op.Slots = redisstore.LeaseSlots, LeaseSlots
	default:
		return op, fmt.Errorf("unknown kind %q (rate, spend, slots)", l.Kind)
	}
	return op, nil
}

// LotHold is how long a gcra lot may be drawn on: half the emission
// interval (period ÷ amount), so that what the fleet admits past a single
// cell's arithmetic (the lot's units counted at the lot's instant, drawn a
// little later) stays under half a unit, within one and thirty seconds: a
// fast limit's lot lives a second (the fleet admits at most a second's
// worth of its rate more than one cell would), a slow one's long enough
// that a replica serving a call every few seconds still finds units.
func LotHold(alg rate.Algorithm, p rate.Params) time.Duration {
	if alg != rate.GCRA || p.Amount <= 0 {
		return 0
	}
	h := p.Period / time.Duration(2*p.Amount)
	return min(max(h, time.Second), 30*time.Second)
}

// rebuildOps turns a call made while Redis's data is being counted again
// into what may run now: no grants (the fleet's count is not whole yet),
// what is given back, the renewals (which count a replica's spend lease
// and slots again), and, once per lot, the units a replica holds of a
// rate lot counted again into its cell.
func (s *Server) rebuildOps(replica string, ops []redisstore.LeaseOp) []redisstore.LeaseOp {
	out := make([]redisstore.LeaseOp, 0, len(ops))
	for _, op := range ops {
		op.Need, op.Extra, op.Least, op.Ask = 0, 0, 0, ""
		if op.Kind == redisstore.LeaseRate && op.Granted > 0 && op.Anchor != "" && s.restoreOnce(replica, op.ID, op.Anchor) {
			out = append(out, redisstore.LeaseOp{Kind: redisstore.LeaseRestore, ID: op.ID, Alg: op.Alg,
				Params: op.Params, Need: op.Granted, Anchor: op.Anchor})
		}
		out = append(out, op)
	}
	return out
}

// restored remembers the rate lots counted again since Redis lost its
// data, so a lot is counted once however often its replica renews.
type restored struct {
	sync.Mutex
	until time.Time
	lots  map[string]bool
}

// restoreOnce reports whether the lot (replica, id, anchor) is to be
// counted again now (the first time in this rebuild).
func (s *Server) restoreOnce(replica, id, anchor string) bool {
	until := s.fleet.Rebuilding()
	s.restored.Lock()
	defer s.restored.Unlock()
	if !until.Equal(s.restored.until) {
		s.restored.until, s.restored.lots = until, map[string]bool{}
	}
	k := replica + "\x00" + id + "\x00" + anchor
	if s.restored.lots[k] {
		return false
	}
	s.restored.lots[k] = true
	return true
}

// giveBack returns what res granted for ops: the replica will not draw on
// it (the call found Redis's data lost). One more round trip, at such a
// moment only. (A grant whose answer the replica did not hear is not lost:
// it asks again under the same ask id and gets it.)
func (s *Server) giveBack(ops []redisstore.LeaseOp, res []redisstore.LeaseAnswer) {
	var back []redisstore.LeaseOp
	for i, a := range res {
		if a.Err != nil || a.Granted <= 0 || i >= len(ops) {
			continue
		}
		op := ops[i]
		switch op.Kind {
		case redisstore.LeaseRate:
			op.Anchor = a.Anchor
		case redisstore.LeaseSpend, redisstore.LeaseSlots:
			op.Granted = 0
			op.Held = 0
		default:
			continue
		}
		op.Need, op.Extra, op.Least, op.Back, op.Ask = 0, 0, 0, a.Granted, ""
		if op.Kind == redisstore.LeaseSlots {
			op.Held = a.Mine
		}
		back = append(back, op)
	}
	if len(back) == 0 {
		return
	}
	if _, _, err := s.redis.Lease(context.Background(), back, leaseRenewTimeout); err != nil {
		s.noteRedisFailure("giving back leases nobody will draw on (they lapse)", err)
	}
}

// warmLeaseBody is a lease call that takes and gives back nothing, on a
// counter of its own.
var warmLease = syncwire.LeaseRequest{Replica: "tt-warm-up", Leases: []syncwire.Lease{{Kind: syncwire.LeaseRate, ID: "tt-warm-up",
	Alg: "gcra", Amount: 1, PeriodNS: int64(time.Second), Burst: 1}}}

// warmLeases runs one lease call through every step a filter's takes (the
// steps checked, the scripts run in Redis, the answer encoded) each time
// Redis is reached: the first of those calls paid for what each step does
// once (Go's JSON codecs built for the types, the pool's connections, the
// script's first run in Redis), over 5 ms in all, and a request that
// waits for a refill has shared_state.redis.timeout for the whole of it.
func (s *Server) warmLeases() {
	b, _ := json.Marshal(warmLease)
	var req syncwire.LeaseRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return
	}
	req.Wait = true
	ans, err := s.Lease(context.Background(), req)
	if err != nil {
		s.log.Debug("lease: warming up", "err", err.Error())
		return
	}
	json.NewEncoder(io.Discard).Encode(ans)
}
