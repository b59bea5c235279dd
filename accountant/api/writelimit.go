package api

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Writes to the management API (minting and revoking keys, creating and
// deleting nodes, setting overrides, creating admins, reloading) are
// limited per admin: each admin (the admin token is one, each delegated
// admin another) may make DefaultWriteBurst writes at once and
// DefaultWriteRate a second after that; a write past it is answered 429
// (rate_limited) with Retry-After, before it touches governance.db. Each
// write is a transaction, an audit entry and a new plane every filter
// syncs: a delegated admin scripting thousands of mints a second would
// otherwise slow every other admin's writes and every gateway's sync. Reads
// are not limited. See RATIONALE.md, "Why are management API writes
// limited per admin?".
const (
	DefaultWriteRate  = 20
	DefaultWriteBurst = 200
	// maxWriters bounds the admins whose buckets are kept; past it the
	// bucket idle longest (full again by then) is forgotten.
	maxWriters = 4096
)

// writeLimiter keeps one token bucket per admin.
type writeLimiter struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*writeBucket
}

type writeBucket struct {
	*rate.Limiter
	last time.Time
}

func newWriteLimiter(perSecond float64, burst int) *writeLimiter {
	if perSecond == 0 {
		perSecond = DefaultWriteRate
	}
	if burst == 0 {
		burst = DefaultWriteBurst
	}
	l := rate.Limit(perSecond)
	if perSecond < 0 {
		l = rate.Inf // off
	}
	return &writeLimiter{limit: l, burst: max(burst, 1), buckets: map[string]*writeBucket{}}
}

// allow takes one write of who at now; when refused, wait is how long
// until one is allowed.
func (w *writeLimiter) allow(who string, now time.Time) (ok bool, wait time.Duration) {
	if w.limit == rate.Inf {
		return true, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buckets[who]
	if b == nil {
		if len(w.buckets) >= maxWriters {
			w.evictLocked()
		}
		b = &writeBucket{Limiter: rate.NewLimiter(w.limit, w.burst)}
		w.buckets[who] = b
	}
	b.last = now
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (w *writeLimiter) evictLocked() {
	var oldest string
	var at time.Time
	for who, b := range w.buckets {
		if oldest == "" || b.last.Before(at) {
			oldest, at = who, b.last
		}
	}
	delete(w.buckets, oldest)
}

// writeLimited answers a write past its admin's rate 429 before fn runs.
func (h *handler) writeLimited(fn func(http.ResponseWriter, *http.Request, principal)) func(http.ResponseWriter, *http.Request, principal) {
	return func(w http.ResponseWriter, r *http.Request, p principal) {
		if ok, wait := h.writes.allow(p.who, h.Now()); !ok {
			secs := int64(math.Ceil(wait.Seconds()))
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			writeError(w, http.StatusTooManyRequests, "rate_limited",
				"%s %s: admin %s made more writes than the management API takes (%d at once, then %s a second per admin); retry after %d s",
				r.Method, r.URL.Path, p.who, h.writes.burst, strconv.FormatFloat(float64(h.writes.limit), 'f', -1, 64), secs)
			return
		}
		fn(w, r, p)
	}
}
