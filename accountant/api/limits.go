package api

import (
	"net/http"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// getLimits serves GET governance/limits in seed 002's shape: every limit
// of the armed plan (a mode-off one shows posture "off"), the overrides
// stored in governance.db (a delegated admin sees those of its subtree),
// and wire.LimitsNote, which says what is true here: an override reaches
// the gate at the filters' next sync, seconds after the write, with no
// reload.
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
	doc := LimitsDocument(a.Plan, ovs)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(doc.AppendJSON(nil))
}

// LimitsDocument builds the governance/limits document from a plan and the
// stored overrides. An override whose limit is no longer in the plan is
// listed with the type it cannot be told: GET overrides says why it is not
// in force.
func LimitsDocument(plan *govern.Plan, ovs []runtime.Override) *wire.Limits {
	doc := &wire.Limits{
		Definitions: make([]wire.Definition, 0, len(plan.Limits)),
		Overrides:   make([]wire.OverrideEntry, 0, len(ovs)),
		Note:        wire.LimitsNote,
	}
	for _, l := range plan.Limits {
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
		})
	}
	for _, o := range ovs {
		e := wire.OverrideEntry{LimitID: o.LimitID, Node: o.Node, Amount: o.Amount}
		if l := plan.Limit(o.LimitID); l != nil {
			e.Type = wire.LimitType(l.Type.String())
		}
		doc.Overrides = append(doc.Overrides, e)
	}
	return doc
}
