package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// MintRequest is the body of POST keys. Owner is the node the key belongs
// to; nil scope lists leave the key unrestricted on that dimension.
// Overrides set the key's own amount of key-level spend or quota templates
// (attach: { level: key }), each within its template's ceiling.
type MintRequest struct {
	Owner     string        `json:"owner"`
	Scopes    vkey.Scopes   `json:"scopes"`
	Overrides []KeyOverride `json:"overrides,omitempty"`
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
	Owner     string      `json:"owner"`
	Scopes    vkey.Scopes `json:"scopes"`
	CreatedAt time.Time   `json:"created_at"`
	CreatedBy string      `json:"created_by"`
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
	Keys []runtime.Key `json:"keys"`
}

func (h *handler) mintKey(w http.ResponseWriter, r *http.Request, p principal) {
	var req MintRequest
	if !decodeBody(w, r, &req) || !nodeParam(w, "owner", req.Owner, false) {
		return
	}
	if !p.owns(req.Owner) {
		forbidNode(w, p, "owner", req.Owner, false)
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
	key, k, set, err := h.DB.MintKeyWithOverrides(plan, req.Owner, req.Scopes, limits, runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionKeyMint, k.KID)
	out := MintedKey{Key: key, KID: k.KID, Owner: k.Owner, Scopes: k.Scopes,
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
		if !nodeParam(w, "owner", owner, false) {
			return
		}
		if !p.owns(owner) {
			forbidNode(w, p, "owner", owner, false)
			return
		}
		root = owner
	}
	keys, err := h.DB.ListKeys(root)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if keys == nil {
		keys = []runtime.Key{}
	}
	writeJSON(w, http.StatusOK, KeyList{Keys: keys})
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
		writeJSON(w, http.StatusOK, k)
	}
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
	writeJSON(w, http.StatusOK, k)
}
