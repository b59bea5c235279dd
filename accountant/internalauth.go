package accountant

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// InternalTokenEnv is the environment variable the accountant command reads
// the internal token from (--internal-token-file overrides it). The filter
// sends the same token on every callout: the plugin configuration's
// accountant.token, or accountant.token_env naming this variable in the
// wasm VM's environment.
const InternalTokenEnv = "TT_ACCOUNTANT_TOKEN"

// The internal plane (ingest, sync, gate alerts, and every endpoint under
// /tt/internal/) answers only a caller that presents the internal token:
// without it a local process could post ledger rows charging any tenant,
// read every key hash from the sync, or shrink every store: share cap by
// polling under made-up replica names. See RATIONALE.md#why-an-internal-token.

// internalAuth checks the internal token of a request.
type internalAuth struct {
	token [32]byte // SHA-256 of the internal token
	admin [32]byte // SHA-256 of the admin token
	// hasAdmin: an admin token is configured, and routes that take either
	// token (the runtime plane a mirror pulls) accept it too.
	hasAdmin bool
	refused  *prometheus.CounterVec
	log      *refusalLog
}

// newInternalAuth returns the check for token (required) and admin (may be
// empty).
func newInternalAuth(token, admin string, log *slog.Logger, reg prometheus.Registerer) *internalAuth {
	a := &internalAuth{
		token:    sha256.Sum256([]byte(token)),
		admin:    sha256.Sum256([]byte(admin)),
		hasAdmin: admin != "",
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tt", Subsystem: "accountant", Name: "internal_unauthorized_total",
			Help: "Calls to an internal endpoint refused for a missing or wrong internal token, by path."}, []string{"path"}),
		log: &refusalLog{log: log, every: RefusalLogInterval},
	}
	reg.MustRegister(a.refused)
	return a
}

// RefusalLogInterval is the least time between two log lines about refused
// internal calls; the ones in between are counted and reported with the
// next line (and each in tt_accountant_internal_unauthorized_total), so a
// flood of bad calls cannot flood the log.
const RefusalLogInterval = 10 * time.Second

// The ways a call to the internal plane can be unauthenticated.
const (
	msgNoToken = "missing internal token: the accountant's internal endpoints take Authorization: Bearer <token> with the token it was started with " +
		"(" + InternalTokenEnv + " or --internal-token-file); give the filter the same token as accountant.token or accountant.token_env"
	msgNotBearer = "the Authorization header is not a bearer token; send Authorization: Bearer <the internal token>"
	msgTwoTokens = "more than one Authorization header; send exactly one, Authorization: Bearer <the internal token>"
	msgBadToken  = "the bearer token is not this accountant's internal token; give the filter the token the accountant was started with " +
		"(" + InternalTokenEnv + " or --internal-token-file) as accountant.token or accountant.token_env"
)

// check reports whether r carries the internal token (or, with adminOK, the
// admin token). When it does not, the 401 is written, counted and logged,
// and check returns false: the caller does nothing else.
func (a *internalAuth) check(w http.ResponseWriter, r *http.Request, adminOK bool) bool {
	why := a.reason(r, adminOK)
	if why == "" {
		return true
	}
	a.refused.WithLabelValues(r.URL.Path).Inc()
	a.log.note(r, why)
	w.Header().Set("WWW-Authenticate", `Bearer realm="tokentriage-internal"`)
	writeError(w, http.StatusUnauthorized, why)
	return false
}

// reason is why r is not authenticated, or "" when it is. The token is
// compared in constant time over SHA-256 digests, so neither its bytes nor
// its length leak through timing.
func (a *internalAuth) reason(r *http.Request, adminOK bool) string {
	d, why := bearerDigest(r)
	if why != "" {
		return why
	}
	okInternal := subtle.ConstantTimeCompare(d[:], a.token[:])
	okAdmin := subtle.ConstantTimeCompare(d[:], a.admin[:])
	if okInternal == 1 || adminOK && a.hasAdmin && okAdmin == 1 {
		return ""
	}
	return msgBadToken
}

// bearerDigest is the SHA-256 of r's one bearer token, or why r carries
// none.
func bearerDigest(r *http.Request) ([32]byte, string) {
	vals := r.Header.Values("Authorization")
	switch {
	case len(vals) == 0 || vals[0] == "":
		return [32]byte{}, msgNoToken
	case len(vals) > 1:
		return [32]byte{}, msgTwoTokens
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return [32]byte{}, msgNotBearer
	}
	return sha256.Sum256([]byte(token)), ""
}

// internal wraps a handler of the internal plane with the token check.
func (s *Server) internal(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.auth.check(w, r, false) {
			h(w, r)
		}
	}
}

// refusalLog writes at most one line per interval about refused calls,
// counting the ones it held back.
type refusalLog struct {
	log   *slog.Logger
	every time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *refusalLog) note(r *http.Request, why string) {
	now := time.Now()
	l.mu.Lock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.last = now
	held := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	l.log.Warn("refused an internal call: nothing was counted", "path", r.URL.Path, "remote", r.RemoteAddr,
		"reason", why, "refused_since_last_line", held)
}
