package api

import (
	"net/http"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// OverrideRequest is the body of PUT overrides. A budget_usd limit takes
// amount_usd (dollars, exact to the nanodollar); quota_tokens and
// quota_requests take amount (a count).
type OverrideRequest struct {
	LimitID   string      `json:"limit_id"`
	Node      string      `json:"node"`
	Amount    *int64      `json:"amount,omitempty"`
	AmountUSD *config.USD `json:"amount_usd,omitempty"`
}

// The states of an override against the plan armed now.
const (
	// StateInForce: the armed plan holds the override; every filter applies
	// it at its next sync, seconds after the write.
	StateInForce = "in_force"
	// StatePending: written and valid, not yet folded into the armed plan.
	StatePending = "pending"
	// StateArmed answers a write the armed plan now holds: the accountant
	// has armed it, and each filter enforces it from its next sync
	// (sync_interval, 1s by default); until then the gateway still checks
	// traffic against the previous amount, so the write does not read as
	// in force. GET overrides shows the same override as in_force.
	StateArmed = "armed"
	// StateDropped: the armed plan refuses it (the config changed since it
	// was written); Reason says why and what to do.
	StateDropped = "dropped"
)

// ArmedReason is the reason a write answered with StateArmed carries.
const ArmedReason = "the accountant has armed it; the gateway enforces it from each filter's next sync " +
	"(sync_interval, 1s by default) and checks traffic against the previous amount until then"

// OverrideList answers GET overrides.
type OverrideList struct {
	Overrides []OverrideView `json:"overrides"`
}

func (h *handler) listOverrides(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	root := p.scope
	if node := q.Get("node"); node != "" {
		if !nodeParam(w, "node", node, true) {
			return
		}
		if !p.owns(node) {
			forbidNode(w, p, "node", node, false)
			return
		}
		root = node
	}
	ovs, err := h.DB.Overrides(root)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	out := OverrideList{Overrides: []OverrideView{}}
	a := h.Armed()
	for _, o := range ovs {
		if root == govern.Global && o.Node != govern.Global {
			continue
		}
		if id := q.Get("limit_id"); id != "" && o.LimitID != id {
			continue
		}
		out.Overrides = append(out.Overrides, overrideView(a, o))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) putOverride(w http.ResponseWriter, r *http.Request, p principal) {
	var req OverrideRequest
	if !decodeBody(w, r, &req) || !nodeParam(w, "node", req.Node, true) {
		return
	}
	if !p.ownsBelow(req.Node) {
		forbidNode(w, p, "node", req.Node, true)
		return
	}
	plan, ok := h.armed(w)
	if !ok {
		return
	}
	o := govern.Override{LimitID: req.LimitID, Node: req.Node}
	if l := plan.Limit(req.LimitID); l != nil && l.Type.Overridable() {
		switch {
		case req.Amount == nil && req.AmountUSD == nil && l.Type == govern.BudgetUSD:
			writeError(w, http.StatusBadRequest, "invalid_request",
				"the amount is missing: limit %q is budget_usd, so send amount_usd in dollars (for example 2500 or 0.5)", l.ID)
			return
		case req.Amount == nil && req.AmountUSD == nil:
			writeError(w, http.StatusBadRequest, "invalid_request",
				"the amount is missing: limit %q is %s, so send amount as a count of %s", l.ID, l.Type, l.Type.Unit())
			return
		case l.Type == govern.BudgetUSD && req.AmountUSD != nil && req.Amount == nil:
			o.Amount = req.AmountUSD.Nanos
		case l.Type == govern.BudgetUSD:
			writeError(w, http.StatusBadRequest, "invalid_request",
				"limit %q is budget_usd: send amount_usd in dollars (for example 2500 or 0.5), not amount", l.ID)
			return
		case req.Amount != nil && req.AmountUSD == nil:
			o.Amount = *req.Amount
		default:
			writeError(w, http.StatusBadRequest, "invalid_request",
				"limit %q is %s: send amount as a count of %s, not amount_usd", l.ID, l.Type, l.Type.Unit())
			return
		}
	}
	saved, err := h.DB.PutOverride(plan, o, runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionOverridePut, saved.LimitID+"@"+saved.Node)
	v := overrideView(h.Armed(), saved)
	if v.State == StateInForce {
		v.State, v.Reason = StateArmed, ArmedReason
	}
	writeJSON(w, http.StatusOK, v)
}

func (h *handler) deleteOverride(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	limitID, node := q.Get("limit_id"), q.Get("node")
	if !nodeParam(w, "node", node, true) {
		return
	}
	if limitID == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "limit_id is missing; DELETE %soverrides?limit_id=ID&node=NODE", Prefix)
		return
	}
	if !p.ownsBelow(node) {
		forbidNode(w, p, "node", node, true)
		return
	}
	prev, err := h.DB.DeleteOverride(limitID, node, runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionOverrideDelete, limitID+"@"+node)
	v := overrideView(h.Armed(), prev)
	v.State, v.Reason = "deleted", "the instance returns to the template's amount at the filters' next sync"
	writeJSON(w, http.StatusOK, v)
}

// OverrideView is one override as the API shows it: the amount in the
// limit's own shape (a dollar object for budget_usd, amount_count
// otherwise), who set it and when, and its state against the armed plan.
type OverrideView struct {
	LimitID     string     `json:"limit_id"`
	LimitType   string     `json:"limit_type,omitempty"`
	Node        string     `json:"node"`
	Amount      *USDAmount `json:"amount,omitempty"`
	AmountCount *int64     `json:"amount_count,omitempty"`
	SetBy       string     `json:"set_by"`
	SetAt       time.Time  `json:"set_at"`
	State       string     `json:"state"`
	Reason      string     `json:"reason,omitempty"`
}

func overrideView(a *govern.Armed, o runtime.Override) OverrideView {
	v := OverrideView{LimitID: o.LimitID, Node: o.Node, SetBy: o.SetBy, SetAt: o.SetAt}
	n := o.Amount
	if a == nil {
		v.AmountCount, v.State, v.Reason = &n, StatePending, "no plan is armed; the override is checked when one is"
		return v
	}
	l := a.Plan.Limit(o.LimitID)
	switch {
	case l != nil && l.Type == govern.BudgetUSD:
		v.LimitType, v.Amount = l.Type.String(), usdAmount(n)
	case l != nil:
		v.LimitType, v.AmountCount = l.Type.String(), &n
	default:
		v.AmountCount = &n
	}
	if got, ok := a.Override(o.LimitID, o.Node); ok && got == o.Amount {
		v.State = StateInForce
		return v
	}
	if e := runtime.CheckOverride(runtime.ArmedPlan(a), govern.Override{LimitID: o.LimitID, Node: o.Node, Amount: o.Amount}); e != nil {
		v.State, v.Reason = StateDropped, e.Reason
		return v
	}
	v.State = StatePending
	return v
}
