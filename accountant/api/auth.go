package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// principal is who a request acts as: the admin (every node) or a delegated
// admin (the subtree at scope).
type principal struct {
	who   string // "admin", or the delegated admin's id
	scope string // "" for the admin
}

// access is what a route requires.
type access uint8

const (
	delegated access = iota // the admin, or a delegated admin within its subtree
	adminOnly               // the admin token only
)

func digest(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// authed authenticates the bearer token, then runs fn as its principal.
// The admin token is compared in constant time (over SHA-256 digests, so
// its length does not leak either); a delegated admin token is looked up by
// its public id and its hash compared in constant time. Two different
// Authorization headers are refused, as the gateway refuses two different
// credentials: which one acts would depend on header order, which an
// intermediary can change.
func (h *handler) authed(need access, fn func(http.ResponseWriter, *http.Request, principal)) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		w := &statusWriter{ResponseWriter: rw}
		var c caller
		defer func() {
			if refusedStatus(w.status) {
				h.refused(r, w, c)
			}
		}()
		vals := r.Header.Values("Authorization")
		for _, v := range vals[min(len(vals), 1):] {
			if v != vals[0] {
				writeError(w, http.StatusUnauthorized, "unauthorized",
					"the request carries %d Authorization headers with different values; send one", len(vals))
				return
			}
		}
		auth := r.Header.Get("Authorization")
		scheme, token, ok := strings.Cut(auth, " ")
		if auth == "" {
			writeError(w, http.StatusUnauthorized, "unauthorized",
				"missing bearer token; send Authorization: Bearer <token> with the admin token or a delegated admin token")
			return
		}
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			writeError(w, http.StatusUnauthorized, "unauthorized",
				"the Authorization header is not a bearer token; send Authorization: Bearer <token>")
			return
		}
		if h.AdminToken != "" {
			d := digest(token)
			if subtle.ConstantTimeCompare(d[:], h.admin[:]) == 1 {
				c.who = "admin"
				fn(w, r, principal{who: "admin"})
				return
			}
		}
		a, found, err := h.DB.AdminByToken(token)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		if !found {
			c.token = token
			msg := "the bearer token is neither the admin token nor a live delegated admin token; check TT_ADMIN_TOKEN, or ask an admin for a new delegated token"
			if h.AdminToken == "" {
				msg = "the bearer token is not a live delegated admin token, and no admin token is configured on this accountant (set TT_ADMIN_TOKEN where it runs)"
			}
			writeError(w, http.StatusUnauthorized, "unauthorized", "%s", msg)
			return
		}
		c.who, c.scope = a.ID, a.Scope
		if need == adminOnly {
			writeError(w, http.StatusForbidden, "forbidden",
				"%s %s needs the admin token; delegated admin %s (scope %s) cannot call it", r.Method, r.URL.Path, a.ID, a.Scope)
			return
		}
		fn(w, r, principal{who: a.ID, scope: a.Scope})
	}
}

// isAdmin reports whether the principal is the admin.
func (p principal) isAdmin() bool { return p.scope == "" }

// owns reports whether the principal may act on node: the admin on any,
// a delegated admin on its scope and every node below it. node must have
// passed govern.ValidNodeID (or be __global).
func (p principal) owns(node string) bool {
	return p.isAdmin() || runtime.InSubtree(p.scope, node)
}

// ownsBelow reports whether node lies strictly below the principal's scope
// (any node for the admin). Nodes and overrides are written only below a
// delegated admin's scope: a delegated admin never raises its own cap.
func (p principal) ownsBelow(node string) bool {
	return p.isAdmin() || node != p.scope && runtime.InSubtree(p.scope, node)
}

// nodeParam charset-checks a node id taken from a request, before anything
// compares it with a scope. allowGlobal admits __global (overrides of a
// limit pinned there).
func nodeParam(w http.ResponseWriter, field, id string, allowGlobal bool) bool {
	if allowGlobal && id == govern.Global {
		return true
	}
	if err := govern.ValidNodeID(id); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "%s: %v", field, err)
		return false
	}
	return true
}

// overrideNodeParam is nodeParam for an override's node, which may also
// be a key's node (<owner>/key:<kid>): the instance of a key-level
// template.
func overrideNodeParam(w http.ResponseWriter, field, id string) bool {
	if _, _, ok := govern.SplitKeyLeaf(id); ok {
		if err := govern.ValidKeyLeaf(id); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "%s: %v", field, err)
			return false
		}
		return true
	}
	return nodeParam(w, field, id, true)
}

// forbidNode answers 403 for a node outside a delegated admin's subtree.
// mayRead reports whether p owns node (its subtree), answering 403 as
// forbidNode does when not.
func (p principal) mayRead(w http.ResponseWriter, field, node string) bool {
	if !p.owns(node) {
		forbidNode(w, p, field, node, false)
		return false
	}
	return true
}

// mayWrite reports whether p owns a node below node's place (a delegated
// admin writes only below its scope), answering 403 when not.
func (p principal) mayWrite(w http.ResponseWriter, field, node string) bool {
	if !p.ownsBelow(node) {
		forbidNode(w, p, field, node, true)
		return false
	}
	return true
}

func forbidNode(w http.ResponseWriter, p principal, field, node string, below bool) {
	if below && node == p.scope {
		writeError(w, http.StatusForbidden, "forbidden",
			"%s %q is the scope of delegated admin %s itself; a delegated admin writes only below its scope, so ask an admin for this one", field, node, p.who)
		return
	}
	writeError(w, http.StatusForbidden, "forbidden",
		"%s %q is outside the subtree of delegated admin %s (scope %s); ask an admin, or an admin of that subtree", field, node, p.who, p.scope)
}
