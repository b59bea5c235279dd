package api

import (
	"fmt"
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
	// StateArmed: the armed plan holds the override but not every live
	// filter replica does yet. A filter enforces it from its next sync
	// (sync_interval, 1s by default) and checks traffic against the amount
	// it held before until then, so the override does not read as in
	// force. Reason says how many replicas hold it, or that none has
	// synced since it was armed. Without Deps.Rollout the accountant
	// cannot tell, and only a write's answer says armed (ArmedReason).
	StateArmed = "armed"
	// StateDropped: the armed plan refuses it (the config changed since it
	// was written); Reason says why and what to do.
	StateDropped = "dropped"
)

// ArmedReason is the reason a write answered with StateArmed carries.
const ArmedReason = "the accountant has armed it; the gateway enforces it from each filter's next sync " +
	"(sync_interval, 1s by default) and checks traffic against the previous amount until then"

// Rollout says how far the armed plan and runtime plane have reached the
// gateway: the filter replicas live now and, for an armed override, how
// many of them last reported holding a plan and a runtime plane that carry
// it. An override reads as in force only once every live replica holds it.
type Rollout struct {
	// Live is the number of filter replicas that polled within the
	// liveness window.
	Live int
	// Holding counts the live replicas that hold the armed override o
	// (the limit, node and amount the armed plan keeps).
	Holding func(o govern.Override) int
	// Window is the liveness window, named in reasons.
	Window time.Duration
}

// rolloutState is the state and reason of an override the armed plan
// holds, given how far it reached: in_force once every live replica holds
// it, armed otherwise. A nil Rollout (the accountant does not track it)
// reads as in force.
func rolloutState(ro *Rollout, o govern.Override) (state, reason string) {
	if ro == nil || ro.Holding == nil {
		return StateInForce, ""
	}
	if ro.Live <= 0 {
		return StateArmed, fmt.Sprintf("the accountant has armed it, and no gateway has synced since: no filter replica polled within the last %s, "+
			"so no gateway enforces it; each filter enforces it from its next sync", ro.Window)
	}
	held := ro.Holding(o)
	if held >= ro.Live {
		return StateInForce, ""
	}
	return StateArmed, fmt.Sprintf("the accountant has armed it; %d of %d live gateway replicas hold it, and one that does not yet "+
		"enforces it from its next sync (sync_interval, 1s by default) and checks traffic against the amount it held before until then",
		held, ro.Live)
}

// rollout reads the rollout once for a request; nil when not tracked.
func (h *handler) rollout() *Rollout {
	if h.Rollout == nil {
		return nil
	}
	ro := h.Rollout()
	return &ro
}

// OverrideList answers GET overrides.
type OverrideList struct {
	Overrides []OverrideView `json:"overrides"`
}

func (h *handler) listOverrides(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	root := p.scope
	if node := q.Get("node"); node != "" {
		if !overrideNodeParam(w, "node", node) || !p.mayRead(w, "node", node) {
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
	a, ro := h.Armed(), h.rollout()
	for _, o := range ovs {
		if root == govern.Global && o.Node != govern.Global {
			continue
		}
		if id := q.Get("limit_id"); id != "" && o.LimitID != id {
			continue
		}
		out.Overrides = append(out.Overrides, overrideView(a, ro, o))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) putOverride(w http.ResponseWriter, r *http.Request, p principal) {
	var req OverrideRequest
	if !decodeBody(w, r, &req) || !overrideNodeParam(w, "node", req.Node) || !p.mayWrite(w, "node", req.Node) {
		return
	}
	plan, ok := h.armed(w)
	if !ok {
		return
	}
	o := govern.Override{LimitID: req.LimitID, Node: req.Node}
	amount, ok := overrideAmount(w, plan, req.LimitID, req.Amount, req.AmountUSD, "")
	if !ok {
		return
	}
	o.Amount = amount
	saved, err := h.DB.PutOverride(plan, o, runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionOverridePut, saved.LimitID+"@"+saved.Node)
	ro := h.rollout()
	v := overrideView(h.Armed(), ro, saved)
	if v.State == StateInForce && ro == nil {
		v.State, v.Reason = StateArmed, ArmedReason
	}
	writeJSON(w, http.StatusOK, v)
}

// overrideAmount reads an override's amount in its limit's own shape:
// amount_usd (dollars) for budget_usd, amount (a count) for the quota
// types; at prefixes the messages with where the amount was ("overrides[1]:
// "). A limit that is not armed or takes no overrides reads as 0, for the
// runtime plane's own refusal to name.
func overrideAmount(w http.ResponseWriter, plan runtime.Plan, limitID string, amount *int64, amountUSD *config.USD, at string) (int64, bool) {
	l := plan.Limit(limitID)
	if l == nil || !l.Type.Overridable() {
		return 0, true
	}
	switch {
	case amount == nil && amountUSD == nil && l.Type == govern.BudgetUSD:
		writeError(w, http.StatusBadRequest, "invalid_request",
			"%sthe amount is missing: limit %q is budget_usd, so send amount_usd in dollars (for example 2500 or 0.5)", at, l.ID)
	case amount == nil && amountUSD == nil:
		writeError(w, http.StatusBadRequest, "invalid_request",
			"%sthe amount is missing: limit %q is %s, so send amount as a count of %s", at, l.ID, l.Type, l.Type.Unit())
	case l.Type == govern.BudgetUSD && amountUSD != nil && amount == nil:
		return amountUSD.Nanos, true
	case l.Type == govern.BudgetUSD:
		writeError(w, http.StatusBadRequest, "invalid_request",
			"%slimit %q is budget_usd: send amount_usd in dollars (for example 2500 or 0.5), not amount", at, l.ID)
	case amount != nil && amountUSD == nil:
		return *amount, true
	default:
		writeError(w, http.StatusBadRequest, "invalid_request",
			"%slimit %q is %s: send amount as a count of %s, not amount_usd", at, l.ID, l.Type, l.Type.Unit())
	}
	return 0, false
}

func (h *handler) deleteOverride(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	limitID, node := q.Get("limit_id"), q.Get("node")
	if !overrideNodeParam(w, "node", node) {
		return
	}
	if limitID == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "limit_id is missing; DELETE %soverrides?limit_id=ID&node=NODE", Prefix)
		return
	}
	if !p.mayWrite(w, "node", node) {
		return
	}
	prev, err := h.DB.DeleteOverride(limitID, node, runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionOverrideDelete, limitID+"@"+node)
	v := overrideView(h.Armed(), nil, prev)
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

// overrideView shows a stored override against the armed plan a. ro, when
// the accountant tracks it, tells an override the armed plan holds
// but some live filter replica does not yet (armed) from one every live
// replica holds (in_force).
func overrideView(a *govern.Armed, ro *Rollout, o runtime.Override) OverrideView {
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
		v.State, v.Reason = rolloutState(ro, govern.Override{LimitID: o.LimitID, Node: o.Node, Amount: o.Amount})
		return v
	}
	if e := runtime.CheckOverride(runtime.ArmedPlan(a), govern.Override{LimitID: o.LimitID, Node: o.Node, Amount: o.Amount}); e != nil {
		v.State, v.Reason = StateDropped, e.Reason
		return v
	}
	v.State = StatePending
	return v
}
