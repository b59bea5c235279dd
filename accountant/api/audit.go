package api

import (
	"net/http"
	"strconv"

	"github.com/tokentriage/tokentriage/accountant/runtime"
)

// AuditPage answers GET audit?after=SEQ&limit=N: the entries after SEQ in
// order, at most N (default and maximum 1000). Next is the after= of the
// following page; fewer entries than asked for means the log is read to
// its end.
type AuditPage struct {
	Entries []runtime.AuditEntry `json:"entries"`
	Next    int64                `json:"next"`
}

func (h *handler) listAudit(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	after, ok := intParam(w, q.Get("after"), "after", 0)
	if !ok {
		return
	}
	limit, ok := intParam(w, q.Get("limit"), "limit", runtime.MaxAuditPage)
	if !ok {
		return
	}
	if limit < 1 || limit > runtime.MaxAuditPage {
		writeError(w, http.StatusBadRequest, "invalid_request", "limit=%d is out of range; ask for 1 to %d entries", limit, runtime.MaxAuditPage)
		return
	}
	entries, err := h.DB.Audit(after, int(limit), p.scope)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	page := AuditPage{Entries: entries, Next: after}
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
