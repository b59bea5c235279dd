package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// Every management API call refused 401 (a token that opens nothing) or
// 403 (a delegated admin outside its subtree, or on an admin-only route)
// is logged, counted (Deps.Refused) and written to the audit log, at most
// MaxRefusalAudits a minute: past that a flood of refusals is counted and
// summed up in one log line a minute, never written row by row. See
// RATIONALE.md#why-are-refused-management-calls-audited.

// MaxRefusalAudits bounds the refusals audited and logged one by one a
// minute.
const MaxRefusalAudits = 30

// maxRefusalReason bounds the refusal's message kept in the audit log.
const maxRefusalReason = 512

// refusals is the per-minute bound of audited refusals.
type refusals struct {
	mu     sync.Mutex
	window time.Time
	n      int // audited in the window
	held   int // past the bound in the window
}

// take counts one refusal at now: whether to audit it, and how many were
// held back in the window that just ended (to be logged), if one did.
func (b *refusals) take(now time.Time) (audit bool, heldBefore int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.window) >= time.Minute {
		heldBefore = b.held
		b.window, b.n, b.held = now, 0, 0
	}
	if b.n >= MaxRefusalAudits {
		b.held++
		return false, heldBefore
	}
	b.n++
	return true, heldBefore
}

// statusWriter notes an answer's status, and the start of a refusal's
// body.
type statusWriter struct {
	http.ResponseWriter
	status int
	body   []byte
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if refusedStatus(w.status) && len(w.body) < 4096 {
		w.body = append(w.body, b[:min(len(b), 4096-len(w.body))]...)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func refusedStatus(code int) bool {
	return code == http.StatusUnauthorized || code == http.StatusForbidden
}

// caller is who a request turned out to be, as far as authed got.
type caller struct {
	who, scope string
	token      string // the bearer token presented, when it opened nothing
}

// refused records a refused call: log, count, and (within the bound)
// audit.
func (h *handler) refused(r *http.Request, w *statusWriter, c caller) {
	if h.Refused != nil {
		h.Refused(w.status)
	}
	var body ErrorBody
	reason := ""
	if json.Unmarshal(w.body, &body) == nil {
		reason = body.Error.Message
	}
	if len(reason) > maxRefusalReason {
		reason = reason[:maxRefusalReason] + "…"
	}
	now := h.Now()
	audit, held := h.refusals.take(now)
	if held > 0 {
		h.Logger.Warn("management API: more calls were refused in the last minute than are audited one by one; they were counted (tt_accountant_api_refusals_total)", "held_back", held, "max_a_minute", MaxRefusalAudits)
	}
	if !audit {
		return
	}
	who, node := c.who, c.scope
	if who == "" {
		who = "unauthenticated"
	}
	if node == "" {
		node = govern.Global
	}
	target := r.Method + " " + r.URL.Path
	if len(target) > 256 {
		target = target[:256] + "…"
	}
	rec := runtime.Refusal{Status: w.status, Reason: reason, Remote: r.RemoteAddr}
	if c.token != "" {
		sum := sha256.Sum256([]byte(c.token))
		rec.Token = "sha256:" + hex.EncodeToString(sum[:4])
	}
	h.Logger.Warn("management API: refused", "status", w.status, "route", target, "who", who, "remote", r.RemoteAddr, "token", rec.Token, "reason", reason)
	if err := h.DB.RecordRefusal(runtime.Stamp{Who: who, At: now}, target, node, rec); err != nil && !errors.Is(err, runtime.ErrMirror) {
		h.Logger.Error("management API: the refusal could not be written to the audit log", "err", err)
	}
}
