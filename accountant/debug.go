package accountant

import (
	"crypto/subtle"
	"net/http"
	"net/http/pprof"
	"sort"
)

// The debug surface: Go's profiles (/debug/pprof/) and whatever the
// process that embeds the accountant adds under /debug/tt/ (Options.Debug:
// tokentriage dev adds the embedded gateway's per-export guest profile).
// Profiles show the process's internals and cost CPU to take, so only the
// root admin token opens them; with no admin token configured they are
// not served at all.

// DebugPrefix is where the debug endpoints live.
const DebugPrefix = "/debug/"

const (
	msgDebugNoAdmin = "the debug endpoints need the admin token, and this accountant has none (set TT_ADMIN_TOKEN)"
	msgDebugAdmin   = "the debug endpoints take only the admin token: send Authorization: Bearer <the admin token>"
)

// debugRoutes adds the debug endpoints to mux.
func (s *Server) debugRoutes(mux *http.ServeMux) {
	mux.Handle("GET /debug/pprof/", s.adminOnly(http.HandlerFunc(pprof.Index)))
	mux.Handle("GET /debug/pprof/cmdline", s.adminOnly(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("GET /debug/pprof/profile", s.adminOnly(http.HandlerFunc(pprof.Profile)))
	mux.Handle("GET /debug/pprof/symbol", s.adminOnly(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("GET /debug/pprof/trace", s.adminOnly(http.HandlerFunc(pprof.Trace)))
	names := make([]string, 0, len(s.opts.Debug))
	for name := range s.opts.Debug {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		mux.Handle("GET /debug/tt/"+name, s.adminOnly(s.opts.Debug[name]))
	}
}

// adminOnly serves h to a caller with the admin token; anyone else gets a
// 401 (counted and logged as the internal plane's refusals are), and every
// caller a 404 when no admin token is configured.
func (s *Server) adminOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.auth.hasAdmin {
			writeError(w, http.StatusNotFound, msgDebugNoAdmin)
			return
		}
		d, why := bearerDigest(r)
		if why == "" && subtle.ConstantTimeCompare(d[:], s.auth.admin[:]) != 1 {
			why = msgDebugAdmin
		}
		if why != "" {
			s.auth.refused.WithLabelValues(r.URL.Path).Inc()
			s.auth.log.note(r, why)
			w.Header().Set("WWW-Authenticate", `Bearer realm="tokentriage-debug"`)
			writeError(w, http.StatusUnauthorized, why)
			return
		}
		h.ServeHTTP(w, r)
	})
}
