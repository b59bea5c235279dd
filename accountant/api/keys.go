package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// MintRequest is the body of POST keys. Owner is the node the key belongs
// to; nil scope lists leave the key unrestricted on that dimension.
// Overrides set the key's own amount of key-level spend or quota templates
// (attach: { level: key }), each within its template's ceiling. Name is
// unique among the owner's live keys. The key expires at ExpiresAt (RFC
// 3339) or ExpiresIn from now (ParseLifetime: 30d, 12h, 2w); neither, or
// "never", and it does not expire.
type MintRequest struct {
	Owner     string        `json:"owner"`
	Name      string        `json:"name,omitempty"`
	Scopes    vkey.Scopes   `json:"scopes"`
	ExpiresAt *time.Time    `json:"expires_at,omitempty"`
	ExpiresIn string        `json:"expires_in,omitempty"`
	Overrides []KeyOverride `json:"overrides,omitempty"`
}

// RotateRequest is the body of POST keys/{kid}/rotate (optional: an empty
// body rotates with the defaults). Grace is how long the secret before
// the rotation keeps authenticating (a Go duration or ParseLifetime's
// days and weeks; default runtime.DefaultRotationGrace, at most
// runtime.MaxRotationGrace, "0s" ends it at once). ExpiresAt or ExpiresIn
// give the key a new expiry ("never": none); neither keeps the one it
// has.
type RotateRequest struct {
	Grace     string     `json:"grace,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	ExpiresIn string     `json:"expires_in,omitempty"`
}

// RotatedKey answers POST keys/{kid}/rotate: the new key, shown this once,
// and the key's details, with when the previous secret stops working.
type RotatedKey struct {
	Key string `json:"key"`
	KeyView
	Note string `json:"note"`
}

// RotateNote is the note every RotatedKey carries.
const RotateNote = "the new key is shown once, now; the previous one keeps working until previous_secret_until, then only this one does"

// KeyView is a key as GET keys shows it: its details and its state
// (live, expired or revoked) at the time of the answer.
type KeyView struct {
	runtime.Key
	State string `json:"state"`
}

// KeyOverride is one of a minted key's own overrides: amount_usd (dollars)
// for a budget_usd template, amount (a count) for quota_tokens and
// quota_requests.
type KeyOverride struct {
	LimitID   string      `json:"limit_id"`
	Amount    *int64      `json:"amount,omitempty"`
	AmountUSD *config.USD `json:"amount_usd,omitempty"`
}

// MintedKey answers POST keys: the key itself, shown this once, and its
// details. Only the key's SHA-256 is stored.
type MintedKey struct {
	Key       string      `json:"key"`
	KID       string      `json:"kid"`
	Name      string      `json:"name,omitempty"`
	Owner     string      `json:"owner"`
	Scopes    vkey.Scopes `json:"scopes"`
	CreatedAt time.Time   `json:"created_at"`
	CreatedBy string      `json:"created_by"`
	ExpiresAt *time.Time  `json:"expires_at,omitempty"`
	Note      string      `json:"note"`
	// Overrides are the key's own overrides, set with it, as GET
	// overrides shows them.
	Overrides []OverrideView `json:"overrides,omitempty"`
	// Warnings says what the mint could not check (runtime.ScopeWarnings):
	// a provider scope that only the filter's providers mapping can give.
	Warnings []string `json:"warnings,omitempty"`
}

// MintNote is the note every MintedKey carries.
const MintNote = "the key is shown once, now; only its SHA-256 is stored, so save it where it will be used"

// KeyList answers GET keys.
type KeyList struct {
	Keys []KeyView `json:"keys"`
}

func (h *handler) keyView(k runtime.Key) KeyView { return KeyView{Key: k, State: k.State(h.Now())} }

// expiry reads an expiry given as an RFC 3339 time or a lifetime from now
// (or "never"): set false when neither was given. at prefixes messages.
func (h *handler) expiry(w http.ResponseWriter, at *time.Time, in string) (t time.Time, set, ok bool) {
	switch {
	case at != nil && in != "":
		writeError(w, http.StatusBadRequest, "invalid_request", "send expires_at or expires_in, not both")
		return time.Time{}, false, false
	case at != nil:
		return *at, true, true
	case in == "":
		return time.Time{}, false, true
	case in == "never":
		return time.Time{}, true, true
	}
	d, err := ParseLifetime(in)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "expires_in: %v", err)
		return time.Time{}, false, false
	}
	return h.Now().Add(d), true, true
}

func (h *handler) mintKey(w http.ResponseWriter, r *http.Request, p principal) {
	var req MintRequest
	if !decodeBody(w, r, &req) || !nodeParam(w, "owner", req.Owner, false) || !p.mayRead(w, "owner", req.Owner) {
		return
	}
	if req.Scopes.AllowPassthrough && !p.isAdmin() {
		// A passthrough call reaches the provider on any path, priced by
		// nothing: the admin's to grant, never a subtree's.
		writeError(w, http.StatusForbidden, "forbidden",
			"scopes.allow_passthrough lets a key call any provider path, priced by no limit; only the admin token may grant it, and delegated admin %s (scope %s) cannot: mint the key without it, or ask an admin", p.who, p.scope)
		return
	}
	plan, ok := h.armed(w)
	if !ok {
		return
	}
	limits := make([]govern.Override, 0, len(req.Overrides))
	for i, o := range req.Overrides {
		amount, ok := overrideAmount(w, plan, o.LimitID, o.Amount, o.AmountUSD, fmt.Sprintf("overrides[%d]: ", i))
		if !ok {
			return
		}
		limits = append(limits, govern.Override{LimitID: o.LimitID, Amount: amount})
	}
	expires, _, ok := h.expiry(w, req.ExpiresAt, req.ExpiresIn)
	if !ok {
		return
	}
	key, k, set, err := h.DB.Mint(plan, runtime.KeySpec{Owner: req.Owner, Name: req.Name, Scopes: req.Scopes, ExpiresAt: expires, Overrides: limits},
		runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionKeyMint, k.KID)
	out := MintedKey{Key: key, KID: k.KID, Name: k.Name, Owner: k.Owner, Scopes: k.Scopes, ExpiresAt: k.ExpiresAt,
		CreatedAt: k.CreatedAt, CreatedBy: k.CreatedBy, Note: MintNote, Warnings: runtime.ScopeWarnings(k.Scopes)}
	ro := h.rollout()
	for _, o := range set {
		h.wrote(p, runtime.ActionOverridePut, o.LimitID+"@"+o.Node)
		v := overrideView(h.Armed(), ro, o)
		if v.State == StateInForce && ro == nil {
			v.State, v.Reason = StateArmed, ArmedReason
		}
		out.Overrides = append(out.Overrides, v)
	}
	writeJSON(w, http.StatusCreated, out)
}

// listKeys lists the keys owned by the owner query parameter or below it
// (the caller's whole subtree when absent).
func (h *handler) listKeys(w http.ResponseWriter, r *http.Request, p principal) {
	root := p.scope
	if owner := r.URL.Query().Get("owner"); owner != "" {
		if !nodeParam(w, "owner", owner, false) || !p.mayRead(w, "owner", owner) {
			return
		}
		root = owner
	}
	keys, err := h.DB.ListKeys(root)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	out := KeyList{Keys: make([]KeyView, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, h.keyView(k))
	}
	writeJSON(w, http.StatusOK, out)
}

// ownedKey fetches the key named in the path and checks the caller owns it.
func (h *handler) ownedKey(w http.ResponseWriter, r *http.Request, p principal) (runtime.Key, bool) {
	k, err := h.DB.Key(r.PathValue("kid"))
	if err != nil {
		h.writeRefusal(w, r, err)
		return runtime.Key{}, false
	}
	if !p.owns(k.Owner) {
		writeError(w, http.StatusForbidden, "forbidden",
			"key %s is owned by %q, outside the subtree of delegated admin %s (scope %s); ask an admin", k.KID, k.Owner, p.who, p.scope)
		return runtime.Key{}, false
	}
	return k, true
}

func (h *handler) getKey(w http.ResponseWriter, r *http.Request, p principal) {
	if k, ok := h.ownedKey(w, r, p); ok {
		writeJSON(w, http.StatusOK, h.keyView(k))
	}
}

// rotateKey gives a key a new secret under the same kid (see
// runtime.DB.RotateKey); the body, RotateRequest, is optional.
func (h *handler) rotateKey(w http.ResponseWriter, r *http.Request, p principal) {
	var req RotateRequest
	if r.ContentLength != 0 && !decodeOptionalBody(w, r, &req) {
		return
	}
	k, ok := h.ownedKey(w, r, p)
	if !ok {
		return
	}
	grace := runtime.DefaultRotationGrace
	if req.Grace != "" {
		var err error
		if grace, err = ParseLifetime(req.Grace); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", "grace: %v", err)
			return
		}
	}
	t, set, ok := h.expiry(w, req.ExpiresAt, req.ExpiresIn)
	if !ok {
		return
	}
	var expires *time.Time
	if set {
		expires = &t
	}
	key, k, err := h.DB.RotateKey(k.KID, grace, expires, runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionKeyRotate, k.KID)
	writeJSON(w, http.StatusOK, RotatedKey{Key: key, KeyView: h.keyView(k), Note: RotateNote})
}

func (h *handler) revokeKey(w http.ResponseWriter, r *http.Request, p principal) {
	k, ok := h.ownedKey(w, r, p)
	if !ok {
		return
	}
	k, err := h.DB.RevokeKey(k.KID, runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionKeyRevoke, k.KID)
	writeJSON(w, http.StatusOK, h.keyView(k))
}

// ParseLifetime reads a key's lifetime or a rotation's grace period: a Go
// duration (90m, 12h, 0s) or a whole number of days or weeks (30d, 2w).
// It is never negative and at most ten years.
func ParseLifetime(s string) (time.Duration, error) {
	const most = 10 * 365 * 24 * time.Hour
	var d time.Duration
	if n, unit := strings.TrimRight(s, "dw"), strings.TrimLeft(s, "0123456789"); len(n) > 0 && (unit == "d" || unit == "w") {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v > int64(most/(24*time.Hour)) {
			return 0, fmt.Errorf("%q is more than ten years", s)
		}
		d = time.Duration(v) * 24 * time.Hour
		if unit == "w" {
			d *= 7
		}
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration: write 30d, 2w, 12h or 90m", s)
		}
	}
	switch {
	case d < 0:
		return 0, fmt.Errorf("%q is negative", s)
	case d > most:
		return 0, fmt.Errorf("%q is more than ten years", s)
	}
	return d, nil
}
