// Package api owns the management API of the accountant, served under
// /tt/api/v1/: the governance/limits document of seed 002, the live
// LedgerSettled counters with their lag (governance/counters), the runtime
// nodes, per-node overrides, virtual keys, delegated admins, the audit log
// and config reload. It authenticates every request with the admin bearer
// token or a delegated admin token scoped to a subtree, writes through
// accountant/runtime, and reports each successful write so the accountant
// re-arms and the filters pick the change up at their next sync.
//
// Node ids never travel in the URL path (they contain "/"), only in query
// parameters and JSON bodies, so no router cleans "org:acme/../org:evil"
// into something else before govern.ValidNodeID refuses it.
package api

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/accountant/spend"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// Prefix is the path every route of the management API lives under.
const Prefix = "/tt/api/v1/"

// Deps is what the handler needs from the accountant.
type Deps struct {
	// DB is the open governance.db.
	DB *runtime.DB
	// Armed returns the plan armed now, or nil when none is (the config
	// failed to compile). Writes checked against the plan then answer 503.
	Armed func() *govern.Armed
	// Reload re-reads the config file and re-arms for who (the admin that
	// asked; the reload is audited under that name); its error, when the
	// new config does not compile, is shown to the caller.
	Reload func(who string) error
	// Counters reads the live LedgerSettled counters for GET
	// governance/counters; nil answers 503.
	Counters func() (LiveCounters, error)
	// FleetRead, when set, reads the other accountants' totals from the
	// fleet's shared Redis at once, so a reset or credit is measured on
	// the fleet's counter as it is now (not as last read, up to a second
	// ago).
	FleetRead func()
	// Spend answers a spend report for a caller scoped to scope ("" the
	// admin); nil answers 503. A *NotReadyError answers 503 with
	// Retry-After, a *spend.QueryError 400, a *spend.ScopeError 403.
	Spend func(q spend.Query, scope string) (*spend.Report, error)
	// SpendLimits lists the budgets and quotas of scope with their live
	// counters; nil answers 503.
	SpendLimits func(scope string) (SpendLimits, error)
	// Changed is called after every successful write, so the accountant
	// re-arms with the new runtime plane and bumps the sync versions.
	Changed func()
	// Rollout reports how far the armed plan has reached the filters, so
	// an override reads as in force only once every live filter replica
	// holds it. Nil: an override the armed plan holds reads as in force
	// (a write still answers armed).
	Rollout func() Rollout
	// AdminToken is the admin bearer token. Empty disables admin access
	// (every admin request answers 401 saying so).
	AdminToken string
	// Now is the clock writes are stamped with.
	Now func() time.Time
	// Logger receives one line per write and per internal error.
	Logger *slog.Logger
	// Refused, when set, is told the status (401 or 403) of every call
	// the API refuses (refusal.go).
	Refused func(status int)
	// WriteRate and WriteBurst limit each admin's writes (writelimit.go):
	// 0 is DefaultWriteRate and DefaultWriteBurst, a negative WriteRate
	// turns the limit off.
	WriteRate  float64
	WriteBurst int
}

// handler serves the management API.
type handler struct {
	Deps
	mux      *http.ServeMux
	admin    [32]byte // SHA-256 of Deps.AdminToken
	refusals refusals
	writes   *writeLimiter
}

// New returns the handler of the management API. Mount it at Prefix:
//
//	mux.Handle(api.Prefix, api.New(deps))
//
// A nil Armed, Changed, Reload, Now or Logger is replaced by "no plan", a
// no-op, an error, the system clock and a discarding logger.
func New(d Deps) http.Handler {
	if d.Changed == nil {
		d.Changed = func() {}
	}
	if d.Reload == nil {
		d.Reload = func(string) error { return errNoReload }
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Armed == nil {
		d.Armed = func() *govern.Armed { return nil }
	}
	h := &handler{Deps: d, mux: http.NewServeMux(), admin: digest(d.AdminToken), writes: newWriteLimiter(d.WriteRate, d.WriteBurst)}
	h.routes()
	return h
}

func (h *handler) routes() {
	route := func(pattern string, need access, fn func(w http.ResponseWriter, r *http.Request, p principal)) {
		if !strings.HasPrefix(pattern, "GET ") {
			fn = h.writeLimited(fn) // every write, per admin
		}
		h.mux.HandleFunc(pattern, h.authed(need, fn))
	}
	route("GET "+Prefix+"whoami", delegated, h.whoami)
	route("GET "+Prefix+"governance/limits", delegated, h.getLimits)
	route("GET "+Prefix+"governance/counters", adminOnly, h.getCounters)
	route("POST "+Prefix+"counters/reset", delegated, h.resetCounter)
	route("POST "+Prefix+"counters/credit", delegated, h.creditCounter)

	route("GET "+Prefix+"spend", delegated, h.getSpend)
	route("GET "+Prefix+"spend/limits", delegated, h.getSpendLimits)

	route("GET "+Prefix+"nodes", delegated, h.listNodes)
	route("POST "+Prefix+"nodes", delegated, h.createNode)
	route("DELETE "+Prefix+"nodes", delegated, h.deleteNode)

	route("GET "+Prefix+"overrides", delegated, h.listOverrides)
	route("PUT "+Prefix+"overrides", delegated, h.putOverride)
	route("DELETE "+Prefix+"overrides", delegated, h.deleteOverride)

	route("POST "+Prefix+"keys", delegated, h.mintKey)
	route("GET "+Prefix+"keys", delegated, h.listKeys)
	route("GET "+Prefix+"keys/{kid}", delegated, h.getKey)
	route("POST "+Prefix+"keys/{kid}/revoke", delegated, h.revokeKey)
	route("POST "+Prefix+"keys/{kid}/rotate", delegated, h.rotateKey)

	route("POST "+Prefix+"admins", adminOnly, h.createAdmin)
	route("GET "+Prefix+"admins", adminOnly, h.listAdmins)
	route("POST "+Prefix+"admins/{id}/revoke", adminOnly, h.revokeAdmin)

	route("GET "+Prefix+"audit", delegated, h.listAudit)
	route("POST "+Prefix+"reload", adminOnly, h.reload)

	h.mux.HandleFunc("/", h.noRoute)
}

// Whoami answers GET whoami: who the token acts as ("admin", or the
// delegated admin's id) and the subtree it sees and manages ("" every
// node), so a client such as the dashboard can say so.
type Whoami struct {
	Who   string `json:"who"`
	Scope string `json:"scope"`
	Admin bool   `json:"admin"`
}

func (h *handler) whoami(w http.ResponseWriter, _ *http.Request, p principal) {
	writeJSON(w, http.StatusOK, Whoami{Who: p.who, Scope: p.scope, Admin: p.isAdmin()})
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

var _ http.Handler = (*handler)(nil)

// routeList is what a request for an unknown route is told.
const routeList = "GET whoami; GET governance/limits; GET governance/counters; POST counters/reset; POST counters/credit; GET spend; GET spend/limits; GET, POST, DELETE nodes; GET, PUT, DELETE overrides; " +
	"POST, GET keys; GET keys/{kid}; POST keys/{kid}/revoke; POST keys/{kid}/rotate; POST, GET admins; POST admins/{id}/revoke; GET audit; POST reload"

func (h *handler) noRoute(w http.ResponseWriter, r *http.Request) {
	// A path some route serves, called with another method: 405 naming
	// the methods it takes.
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		rr := *r
		rr.Method = m
		if _, pattern := h.mux.Handler(&rr); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
			"%s %s: method not allowed; this route takes %s", r.Method, r.URL.Path, strings.Join(allow, ", "))
		return
	}
	writeError(w, http.StatusNotFound, "not_found",
		"no route %s %s; the management API serves, under %s: %s", r.Method, r.URL.Path, Prefix, routeList)
}
