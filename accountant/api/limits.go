package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// getLimits serves GET governance/limits in seed 002's shape: every limit
// of the armed plan (a mode-off one shows posture "off"), the stored
// overrides the armed plan holds (a delegated admin sees those of its
// subtree, and of the limits pinned at a node only those that bind it:
// see LimitsDocumentFor), and wire.LimitsNote, which says what is true here: an override
// reaches the gate at the filters' next sync, seconds after the write, with
// no reload. A stored override the armed plan does not hold is not listed
// as if it applied; the note names it with its state and reason.
func (h *handler) getLimits(w http.ResponseWriter, r *http.Request, p principal) {
	a := h.Armed()
	if a == nil {
		h.armed(w) // answers 503
		return
	}
	ovs, err := h.DB.Overrides(p.scope)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	doc := limitsDocument(a, h.rollout(), ovs, p.scope)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(doc.AppendJSON(nil))
}

// LimitsDocument builds the governance/limits document from the armed plan
// and the stored overrides. Only the overrides in force are listed, so
// every amount the document shows is one the gate enforces. One the armed
// plan dropped (the config changed under it: a lower ceiling, a limit that
// no longer allows overrides or is gone) or has not armed yet is left out
// of the list and named in the note with its state and reason, the
// definition's amount being the one that applies; GET overrides shows it
// too. With every override in force the note is wire.LimitsNote exactly.
func LimitsDocument(a *govern.Armed, ovs []runtime.Override) *wire.Limits {
	return LimitsDocumentFor(a, ovs, "")
}

// LimitsDocumentFor is LimitsDocument as a delegated admin scoped to scope
// sees it ("" is the admin, who sees every definition). A limit pinned at
// a node is listed when the node is scope, below it, or one of its
// ancestors (a cap pinned there binds the subtree too), or __global;
// a limit pinned in another subtree is left out, so its node and amount
// are not shown. Templates (attached by level) are always listed. ovs are
// expected to be the overrides of the scope already.
func LimitsDocumentFor(a *govern.Armed, ovs []runtime.Override, scope string) *wire.Limits {
	return limitsDocument(a, nil, ovs, scope)
}

// limitsDocument is LimitsDocumentFor with the rollout: an override the
// armed plan holds but some live filter replica does not yet is armed, not
// listed, and named in the note apart from the dropped and pending ones,
// since a replica that does not hold it checks traffic against the amount
// it held before (the definition's, or an earlier override's). A nil ro
// lists every override the armed plan holds.
func limitsDocument(a *govern.Armed, ro *Rollout, ovs []runtime.Override, scope string) *wire.Limits {
	plan := a.Plan
	doc := &wire.Limits{
		Definitions: make([]wire.Definition, 0, len(plan.Limits)),
		Overrides:   make([]wire.OverrideEntry, 0, len(ovs)),
		Note:        wire.LimitsNote,
	}
	for _, l := range plan.Limits {
		if !pinnedVisible(scope, l.Node) {
			continue
		}
		doc.Definitions = append(doc.Definitions, wire.Definition{
			LimitID: l.ID,
			Type:    wire.LimitType(l.Type.String()),
			Period:  l.Period.String(),
			Posture: wire.Posture{Mode: l.Mode.String(), Enforce: l.Enforce.String(), Fail: l.Fail.String()},
			Node:    l.Node,
			Level:   l.Level,
			Amount:  l.Amount,
			// Only the spend and quota types take overrides, whatever the
			// config says (seed 002).
			OverrideAllowed: l.OverrideAllow && l.Type.Overridable(),
			OverrideMax:     l.OverrideMax,
			Extra:           definitionExtra(l),
		})
	}
	var out, armed []string
	for _, o := range ovs {
		v := overrideView(a, ro, o)
		if v.State == StateArmed {
			armed = append(armed, notInForce(plan, o, v))
			continue
		}
		if v.State != StateInForce {
			out = append(out, notInForce(plan, o, v))
			continue
		}
		e := wire.OverrideEntry{LimitID: o.LimitID, Node: o.Node, Amount: o.Amount}
		if l := plan.Limit(o.LimitID); l != nil {
			e.Type = wire.LimitType(l.Type.String())
		}
		doc.Overrides = append(doc.Overrides, e)
	}
	if len(out) > 0 {
		doc.Note += " " + overridesAre(len(out), "stored override") + " not in force and not listed, so the definition's amount applies: " +
			strings.Join(out, "; ") + "."
	}
	if len(armed) > 0 {
		doc.Note += " " + overridesAre(len(armed), "override") + " armed but not yet held by every live gateway replica, so not in force and not listed: " +
			strings.Join(armed, "; ") + "."
	}
	if len(out) > 0 || len(armed) > 0 {
		doc.Note += " GET " + Prefix + "overrides shows every stored override with its state."
	}
	return doc
}

// overridesAre is "1 <noun> is" or "<n> <noun>s are".
func overridesAre(n int, noun string) string {
	if n == 1 {
		return "1 " + noun + " is"
	}
	return fmt.Sprintf("%d %ss are", n, noun)
}

// pinnedVisible reports whether a limit pinned at node (empty for a
// template) is shown to a principal scoped to scope ("" is the admin).
func pinnedVisible(scope, node string) bool {
	return scope == "" || node == "" || node == govern.Global ||
		runtime.InSubtree(scope, node) || runtime.InSubtree(node, scope)
}

// notInForce names a stored override the armed plan does not hold: its
// limit, node and amount, its state and why.
func notInForce(plan *govern.Plan, o runtime.Override, v OverrideView) string {
	amount := strconv.FormatInt(o.Amount, 10)
	if l := plan.Limit(o.LimitID); l != nil && l.Type == govern.BudgetUSD {
		amount = "$" + config.USDFromNanos(o.Amount).String()
	}
	s := fmt.Sprintf("%s @ %s amount %s is %s", o.LimitID, o.Node, amount, v.State)
	switch {
	case v.Reason != "":
		s += " (" + v.Reason + ")"
	case v.State == StatePending:
		s += " (written and valid, not armed yet; every filter applies it at its next sync once the accountant re-arms)"
	}
	return s
}

// definitionExtra is what a definition says beyond seed 002's members: the
// limit's own details, and its bound when it keeps one counter per value.
func definitionExtra(l *govern.Limit) wire.LimitExtra {
	x := l.Extra()
	x.MaxDistinct = l.DisclosedMaxDistinct()
	return x
}
