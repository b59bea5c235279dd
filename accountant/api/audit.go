package api

import (
	"net/http"
	"strconv"

	"github.com/tokentriage/tokentriage/accountant/runtime"
)

// AuditPage answers GET audit?after=SEQ&limit=N: the entries after SEQ in
// order, at most N (default and maximum 1000). Next is the after= of the
// following page; fewer entries than asked for means the log is read to
// its end. With order=desc the newest come first, before=SEQ pages back
// (Next is then the before= of the following page). action= keeps one
// action (key.mint) or a family (key.), who= one principal (admin, or a
// delegated admin's id), node= the entries of a node and the nodes below
// it (within the caller's subtree).
type AuditPage struct {
	Entries []runtime.AuditEntry `json:"entries"`
	Next    int64                `json:"next"`
}

func (h *handler) listAudit(w http.ResponseWriter, r *http.Request, p principal) {
	v := r.URL.Query()
	q := runtime.AuditQuery{Scope: p.scope, Action: v.Get("action"), Who: v.Get("who")}
	var ok bool
	if q.After, ok = intParam(w, v.Get("after"), "after", 0); !ok {
		return
	}
	if q.Before, ok = intParam(w, v.Get("before"), "before", 0); !ok {
		return
	}
	limit, ok := intParam(w, v.Get("limit"), "limit", runtime.MaxAuditPage)
	if !ok {
		return
	}
	if limit < 1 || limit > runtime.MaxAuditPage {
		writeError(w, http.StatusBadRequest, "invalid_request", "limit=%d is out of range; ask for 1 to %d entries", limit, runtime.MaxAuditPage)
		return
	}
	q.Limit = int(limit)
	switch o := v.Get("order"); o {
	case "", "asc":
	case "desc":
		q.Desc = true
	default:
		writeError(w, http.StatusBadRequest, "invalid_request", "order=%q is not asc or desc", o)
		return
	}
	if node := v.Get("node"); node != "" {
		if !overrideNodeParam(w, "node", node) || !p.mayRead(w, "node", node) {
			return
		}
		q.Node = node
	}
	entries, err := h.DB.AuditQuery(q)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	page := AuditPage{Entries: entries, Next: q.After}
	if q.Desc {
		page.Next = q.Before
	}
	if page.Entries == nil {
		page.Entries = []runtime.AuditEntry{}
	}
	if n := len(entries); n > 0 {
		page.Next = entries[n-1].Seq
	}
	writeJSON(w, http.StatusOK, page)
}

// intParam reads a non-negative integer query parameter, def when absent.
func intParam(w http.ResponseWriter, s, name string, def int64) (int64, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "%s=%q is not a non-negative integer", name, s)
		return 0, false
	}
	return n, true
}
