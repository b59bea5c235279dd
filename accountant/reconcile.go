package accountant

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/core"
	"github.com/tokentriage/tokentriage/accountant/redisstore"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/rate"
)

// A store: redis tpm reserve is taken from the replica's lease at gate 2
// and corrected at settlement: in the lot it came from while that lot is
// still the replica's, otherwise by the reconcile on the call's ledger
// row, which the accountant commits in the fleet's Redis once it has
// recorded the row (RATIONALE.md, "Why is a tpm reconcile sent again after
// Redis or the accountant comes back?").

// maxReconcileBatch bounds the rows whose reconciles go in one round trip.
const maxReconcileBatch = 256

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

// hookLaterLocked makes Redis's return send what was kept for it.
func (s *Server) hookLaterLocked() {
	if !s.later.hooked {
		s.later.hooked = true
		s.redis.OnUp(s.sendLater)
	}
}

// sendLater sends the reconciles kept while Redis was down.
func (s *Server) sendLater() {
	s.later.Lock()
	rcs := s.later.reconciles
	s.later.reconciles = nil
	s.later.Unlock()
	for len(rcs) > 0 {
		n := min(len(rcs), maxReconcileBatch)
		s.sendReconciles(rcs[:n])
		rcs = rcs[n:]
	}
}
