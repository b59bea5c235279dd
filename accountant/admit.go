package accountant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/core"
	"github.com/tokentriage/tokentriage/accountant/redisstore"
	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/rate"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// maxAdmitBytes bounds one admit call: a request's chain has a few dozen
// instances at most.
const maxAdmitBytes = 64 << 10

// maxAdmitSteps bounds the steps of one admit call.
const maxAdmitSteps = 256

// serveAdmit decides a request's store: redis rate limits in Redis
// (syncwire.AdmitPath). It answers 200 either way: with the results, or
// with Suspended saying why Redis did not decide, for the filter to answer
// locally and disclose it.
func (s *Server) serveAdmit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdmitBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("admit: reading the body: %v (at most %d bytes)", err, maxAdmitBytes))
		return
	}
	var req syncwire.AdmitRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "admit: the body is not an admit request: "+err.Error())
		return
	}
	ans, err := s.Admit(r.Context(), req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(ans)
}

// Admit takes the rate steps of one request from the fleet's Redis, in
// order, stopping at the first that refuses, and commits its corrections.
// An error is a malformed request; Redis being unable to decide is an
// answer with Suspended set.
func (s *Server) Admit(ctx context.Context, req syncwire.AdmitRequest) (syncwire.AdmitAnswer, error) {
	var ans syncwire.AdmitAnswer
	if len(req.Rate)+len(req.Adjust)+len(req.Release) > maxAdmitSteps {
		return ans, fmt.Errorf("admit: %d steps; at most %d", len(req.Rate)+len(req.Adjust)+len(req.Release), maxAdmitSteps)
	}
	release, err := holdRefs(req.Release, req.RequestID)
	if err != nil {
		return ans, err
	}
	take, err := rateSteps(req.Rate, "rate")
	if err != nil {
		return ans, err
	}
	for _, st := range take {
		if st.Hold != nil && req.RequestID == "" {
			return ans, errors.New("admit: a hold step needs the request_id that names it")
		}
		if st.Hold != nil {
			// The fleet's spend in Redis keeps every row; what resets and
			// credits took off it raises the room instead.
			st.Hold.Amount = addSat(st.Hold.Amount, s.adjust.creditOf(store.Key{ID: st.ID, Unit: st.Hold.Unit, Start: st.Hold.Start}))
		}
	}
	adjust, err := rateSteps(req.Adjust, "adjust")
	if err != nil {
		return ans, err
	}
	rc := s.redis
	if rc == nil {
		ans.Suspended = "this accountant has no shared Redis (governance.shared_state.redis, or --redis HOST:PORT)"
		s.metrics.suspended.Inc()
		return ans, nil
	}
	if len(adjust) > 0 {
		if err := rc.Adjust(ctx, time.Time{}, adjust, 0); err != nil {
			s.noteRedisFailure("handing back a tpm reserve", err)
		}
	}
	if len(release) > 0 {
		if _, err := rc.ReleaseHolds(ctx, "", release, 0); err != nil {
			s.noteRedisFailure("releasing the budget holds of a refused request", err)
			s.holdsLater(release)
		}
	}
	if len(take) == 0 {
		return ans, nil
	}
	res, err := rc.Take(ctx, time.Time{}, req.RequestID, take)
	if err != nil {
		ans.Suspended = "the shared Redis did not decide: " + err.Error()
		s.metrics.suspended.Inc()
		s.noteRedisFailure("deciding a request's store: redis limits", err)
		return ans, nil
	}
	ans.Rate = make([]syncwire.RateResult, len(res))
	for i, r := range res {
		if take[i].Hold != nil {
			ans.Rate[i] = syncwire.RateResult{Allowed: r.Allowed, Limit: take[i].Hold.Amount, Held: r.Limit, Used: r.Remaining, InFlight: int64(r.ResetAfter)}
			continue
		}
		ans.Rate[i] = syncwire.RateResult{Allowed: r.Allowed, Limit: r.Limit, Remaining: r.Remaining,
			RetryAfterNS: int64(r.RetryAfter), ResetAfterNS: int64(r.ResetAfter), Unfittable: r.Unfittable}
	}
	return ans, nil
}

// warmAdmitBody is an admit call of one rate step of cost 0 on a counter
// of its own, which admits and counts nothing.
const warmAdmitBody = `{"rate":[{"id":"tt-warm-up","alg":"gcra","amount":1,"period_ns":1000000000,"burst":1,"n":0}]}`

// warmAdmit runs one admit call through every step a filter's takes (the
// body decoded, the steps checked, the rate script run in Redis, the
// answer encoded) each time Redis is reached. The first of those calls
// paid for what each step does once (Go's JSON codecs built for the
// types, the pool's connections, the script's first run in Redis), over
// 5 ms in all, and a filter's round trip has shared_state.redis.timeout
// (5 ms by default) for the whole of it: the first request of a fresh
// fleet was answered locally and said suspended.
func (s *Server) warmAdmit() {
	var req syncwire.AdmitRequest
	if err := json.Unmarshal([]byte(warmAdmitBody), &req); err != nil {
		s.log.Debug("admit: warming up", "err", err.Error())
		return
	}
	ans, err := s.Admit(context.Background(), req)
	if err != nil {
		s.log.Debug("admit: warming up", "err", err.Error())
		return
	}
	json.NewEncoder(io.Discard).Encode(ans)
}

// rateSteps checks and converts the wire steps.
func rateSteps(in []syncwire.RateStep, field string) ([]redisstore.RateStep, error) {
	out := make([]redisstore.RateStep, len(in))
	for i, st := range in {
		if st.Alg == syncwire.AlgHold {
			if field != "rate" {
				return nil, fmt.Errorf("admit: %s[%d]: a hold is taken in rate and released by request id, never adjusted", field, i)
			}
			unit, ok := calendar.ParseUnit(st.Unit)
			if st.ID == "" || !ok || st.Amount < 0 || st.N < 0 || st.Least < 0 || st.Least > st.N || st.LeaseNS <= 0 {
				return nil, fmt.Errorf("admit: %s[%d]: a hold needs an id, a calendar unit (day, week, month), an amount, a dearest cost n at least its least cost, both 0 or more, and a positive lease_ns", field, i)
			}
			out[i] = redisstore.RateStep{ID: st.ID, N: st.N, Hold: &redisstore.Hold{
				Amount: st.Amount, Unit: unit, Start: calendar.Start(unit, time.Unix(st.Start, 0).UTC()).Unix(),
				Least: st.Least, Lease: time.Duration(st.LeaseNS)}}
			continue
		}
		alg, ok := rate.ParseAlgorithm(st.Alg)
		if !ok || alg == rate.TokenBucket {
			return nil, fmt.Errorf("admit: %s[%d]: algorithm %q is not one Redis runs (gcra, fixed_window, sliding_window)", field, i, st.Alg)
		}
		if st.ID == "" || st.Amount <= 0 || st.PeriodNS <= 0 || st.Burst < 0 {
			return nil, fmt.Errorf("admit: %s[%d]: a step needs an id, a positive amount and period_ns, and a burst of 0 or more", field, i)
		}
		out[i] = redisstore.RateStep{ID: st.ID, Alg: alg, N: st.N,
			Params: rate.Params{Amount: st.Amount, Period: time.Duration(st.PeriodNS), Burst: st.Burst}}
	}
	return out, nil
}

// holdRefs checks and converts the holds a refused request releases.
func holdRefs(in []syncwire.HoldRef, rid string) ([]redisstore.HoldRelease, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if rid == "" {
		return nil, errors.New("admit: release needs the request_id whose holds it releases")
	}
	out := make([]redisstore.HoldRelease, len(in))
	for i, h := range in {
		unit, ok := calendar.ParseUnit(h.Unit)
		if h.ID == "" || !ok {
			return nil, fmt.Errorf("admit: release[%d]: a hold is named by its id, calendar unit (day, week, month) and period start", i)
		}
		out[i] = redisstore.HoldRelease{ID: h.ID, Unit: unit, Start: h.Start, RID: rid, Own: -1}
	}
	return out, nil
}

// noteRedisFailure logs a Redis operation that failed other than by Redis
// being down (the client logs that once, when it happens).
func (s *Server) noteRedisFailure(what string, err error) {
	if errors.Is(err, redisstore.ErrDown) {
		return
	}
	now := s.now()
	s.redisLog.Lock()
	defer s.redisLog.Unlock()
	if now.Sub(s.redisLog.last) < redisLogEvery {
		s.redisLog.quiet++
		return
	}
	s.log.Warn("redis: "+what+" failed; the local answer stands and says suspended", "err", err.Error(), "more_since_last_line", s.redisLog.quiet)
	s.redisLog.last, s.redisLog.quiet = now, 0
}

// redisLogEvery spaces the log lines of failed Redis operations: a slow
// Redis fails every request, and one line says so.
const redisLogEvery = 10 * time.Second

// reconcileTimeout bounds the commit of one batch's tpm reconciles (off the
// request path: the filter's flush waits for it).
const reconcileTimeout = time.Second

// reconcileAcknowledged commits, in the fleet's Redis, the tpm reconciles
// of the rows of one batch that were newly recorded: each row is recorded
// once by its request id, and Redis commits a row's reconciles once by it
// too. A reconcile Redis does not take is kept and sent again when Redis
// is back; the ledger holds it with the row, so a restart sends again
// those of the rows whose windows are still open (replay).
func (s *Server) reconcileAcknowledged(rows []ledger.Row, res core.Result) {
	if s.redis == nil {
		return
	}
	var pending []pendingReconcile
	for i := range rows {
		if i >= len(res.Outcomes) || res.Outcomes[i] != core.Accepted {
			continue
		}
		if p, ok := s.rowReconcile(&rows[i]); ok {
			pending = append(pending, p)
		}
	}
	s.sendReconciles(pending)
}

// pendingReconcile is a row's tpm reconciles, and until when they matter:
// the end of the longest window they correct (after it, the reserve they
// would correct has drained anyway).
type pendingReconcile struct {
	row   redisstore.RowReconcile
	until time.Time
}

// rowReconcile reads a row's reconciles.
func (s *Server) rowReconcile(r *ledger.Row) (pendingReconcile, bool) {
	if len(r.Reconcile) == 0 || r.RequestID == "" {
		return pendingReconcile{}, false
	}
	p := pendingReconcile{row: redisstore.RowReconcile{RID: r.RequestID}}
	longest := time.Duration(0)
	for _, rc := range r.Reconcile {
		st, err := parseReconcile(rc)
		if err != nil {
			s.log.Warn("ingest: a row's tpm reconcile is unreadable; skipped", "request_id", r.RequestID, "err", err.Error())
			continue
		}
		p.row.Steps = append(p.row.Steps, st)
		longest = max(longest, st.Params.Period)
	}
	p.until = r.End.Add(longest)
	return p, len(p.row.Steps) > 0
}

// sendReconciles commits reconciles in Redis, or keeps them for when it
// is back.
func (s *Server) sendReconciles(pending []pendingReconcile) {
	now := s.now()
	rows := make([]redisstore.RowReconcile, 0, len(pending))
	live := pending[:0]
	for _, p := range pending {
		if p.until.After(now) {
			rows = append(rows, p.row)
			live = append(live, p)
		}
	}
	if len(rows) == 0 {
		return
	}
	if _, err := s.redis.Reconcile(context.Background(), rows, reconcileTimeout); err != nil {
		s.noteRedisFailure("committing the tpm reconciles of "+strconv.Itoa(len(rows))+" rows (kept, and sent again when Redis answers)", err)
		s.reconcilesLater(live)
	}
}

// maxReconcilesLater bounds the rows whose reconciles are kept for
// Redis's return; past it the oldest go (their reserves drain with their
// windows).
const maxReconcilesLater = 1 << 16

// reconcilesLater keeps reconciles Redis did not take.
func (s *Server) reconcilesLater(p []pendingReconcile) {
	s.later.Lock()
	defer s.later.Unlock()
	s.later.reconciles = append(s.later.reconciles, p...)
	if n := len(s.later.reconciles) - maxReconcilesLater; n > 0 {
		s.later.reconciles = append(s.later.reconciles[:0], s.later.reconciles[n:]...)
	}
	s.hookLaterLocked()
}

// parseReconcile reads one ledger.Row.Reconcile entry.
func parseReconcile(rc string) (redisstore.RateStep, error) {
	f := strings.SplitN(rc, " ", 6)
	if len(f) != 6 {
		return redisstore.RateStep{}, fmt.Errorf("%q: want six fields", rc)
	}
	alg, ok := rate.ParseAlgorithm(f[0])
	var n [4]int64
	for i := range n {
		v, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return redisstore.RateStep{}, fmt.Errorf("%q: field %d: %v", rc, i+2, err)
		}
		n[i] = v
	}
	if !ok || alg == rate.TokenBucket || n[0] <= 0 || n[1] <= 0 || n[2] < 0 || f[5] == "" {
		return redisstore.RateStep{}, fmt.Errorf("%q: not an algorithm, amount, period, burst, tokens and identity", rc)
	}
	return redisstore.RateStep{ID: f[5], Alg: alg, N: n[3],
		Params: rate.Params{Amount: n[0], Period: time.Duration(n[1]), Burst: n[2]}}, nil
}

// holdsAcknowledged releases the budget holds (reserve: true) of the rows
// of one batch that were newly recorded: each row is recorded once by its
// request id and a hold is released once by it, so a retried batch
// releases nothing twice. With the fleet store, the same script raises
// this accountant's published total to its own, which counts the call
// now. A release Redis does not take is kept and sent again when Redis
// is back (the hold lapses with its lease meanwhile, holding more, never
// less).
func (s *Server) holdsAcknowledged(rows []ledger.Row, res core.Result) {
	if s.redis == nil {
		return
	}
	var rels []redisstore.HoldRelease
	for i := range rows {
		if i >= len(res.Outcomes) || res.Outcomes[i] != core.Accepted {
			continue
		}
		for _, h := range rows[i].Holds {
			rel, err := parseHold(h, rows[i].RequestID)
			if err != nil {
				s.log.Warn("ingest: a row's budget hold is unreadable; it lapses with its lease", "request_id", rows[i].RequestID, "err", err.Error())
				continue
			}
			rels = append(rels, rel)
		}
	}
	if len(rels) > 0 {
		s.releaseHolds(rels)
	}
}

// releaseHolds releases holds in Redis, or keeps them for when it is back.
func (s *Server) releaseHolds(rels []redisstore.HoldRelease) {
	var err error
	if s.fleet != nil {
		_, err = s.fleet.ReleaseHolds(context.Background(), rels, reconcileTimeout)
	} else {
		_, err = s.redis.ReleaseHolds(context.Background(), "", rels, reconcileTimeout)
	}
	if err != nil {
		s.noteRedisFailure("releasing "+strconv.Itoa(len(rels))+" budget holds", err)
		s.holdsLater(rels)
	}
}

// maxHoldsLater bounds the releases kept for Redis's return; past it the
// oldest go (their holds lapse with their lease).
const maxHoldsLater = 1 << 16

// holdsLater keeps releases Redis did not take, to send when it is back.
func (s *Server) holdsLater(rels []redisstore.HoldRelease) {
	s.later.Lock()
	defer s.later.Unlock()
	s.later.holds = append(s.later.holds, rels...)
	if n := len(s.later.holds) - maxHoldsLater; n > 0 {
		s.later.holds = append(s.later.holds[:0], s.later.holds[n:]...)
	}
	s.hookLaterLocked()
}

// hookLaterLocked makes Redis's return send what was kept for it.
func (s *Server) hookLaterLocked() {
	if !s.later.hooked {
		s.later.hooked = true
		s.redis.OnUp(s.sendLater)
	}
}

// sendLater sends the releases and reconciles kept while Redis was down.
func (s *Server) sendLater() {
	s.later.Lock()
	rels, rcs := s.later.holds, s.later.reconciles
	s.later.holds, s.later.reconciles = nil, nil
	s.later.Unlock()
	for len(rels) > 0 {
		n := min(len(rels), maxAdmitSteps)
		s.releaseHolds(rels[:n])
		rels = rels[n:]
	}
	for len(rcs) > 0 {
		n := min(len(rcs), maxAdmitSteps)
		s.sendReconciles(rcs[:n])
		rcs = rcs[n:]
	}
}

// parseHold reads one ledger.Row.Holds entry of request rid.
func parseHold(h, rid string) (redisstore.HoldRelease, error) {
	f := strings.SplitN(h, " ", 3)
	if len(f) != 3 || f[2] == "" || rid == "" {
		return redisstore.HoldRelease{}, fmt.Errorf("%q: want a calendar unit, a period start and a counter identity, on a row with a request id", h)
	}
	unit, ok := calendar.ParseUnit(f[0])
	start, err := strconv.ParseInt(f[1], 10, 64)
	if !ok || err != nil {
		return redisstore.HoldRelease{}, fmt.Errorf("%q: want a calendar unit (day, week, month) and a period start in unix seconds", h)
	}
	return redisstore.HoldRelease{Unit: unit, Start: start, ID: f[2], RID: rid, Own: -1}, nil
}
