package wire

import (
	"strconv"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// Limits is the GET /tt/api/v1/governance/limits document (seed 002): the
// armed limit definitions, the stored per-node overrides, and a note saying
// how the two relate. Pretty-printed like Me.
type Limits struct {
	Definitions []Definition
	Overrides   []OverrideEntry
	Note        string
}

// Definition is one armed limit definition. A budget_usd amount renders as
// a USD object ("amount"), every other type's as "amount_count". Period is
// omitted when empty (concurrency). attach is "pinned" with node when Node
// is set, "template" with level otherwise. override_max (or
// override_max_count) appears only when overrides are allowed with a
// ceiling.
type Definition struct {
	LimitID string
	Type    LimitType
	Period  string
	Posture Posture
	Node    string // pinned
	Level   string // template: org, team, user, key
	// Amount is nanodollars for budget_usd, a count otherwise.
	Amount          int64
	OverrideAllowed bool
	// OverrideMax is the override ceiling (nanodollars or count), or -1
	// when none was declared.
	OverrideMax int64
	// Extra is what the definition says beyond seed 002's members, each
	// only when set (Customer, Tag, Overflow and Distinct are not used).
	Extra LimitExtra
}

// OverrideEntry is one stored per-node override of a spend or quota limit.
type OverrideEntry struct {
	LimitID string
	Type    LimitType
	Node    string
	Amount  int64 // nanodollars for budget_usd, a count otherwise
}

// LimitsNote is the note this project's accountant serves: overrides reach
// the gate at the filters' next sync, seconds after the write.
const LimitsNote = "definitions are the ARMED limits enforced now; overrides are persisted runtime writes that every filter applies at its next sync, seconds after the write; the amount of an overridden instance is the override's."

// AppendJSON appends the document.
func (d *Limits) AppendJSON(dst []byte) []byte {
	dst = append(dst, "{\n  \"definitions\": "...)
	dst = appendLines(dst, len(d.Definitions), func(dst []byte, i int) []byte { return d.Definitions[i].appendJSON(dst) })
	dst = append(dst, ",\n  \"overrides\": "...)
	dst = appendLines(dst, len(d.Overrides), func(dst []byte, i int) []byte { return d.Overrides[i].appendJSON(dst) })
	dst = append(dst, ",\n  \"note\": "...)
	dst = jsontok.AppendString(dst, d.Note)
	return append(dst, "\n}\n"...)
}

func (d *Definition) appendJSON(dst []byte) []byte {
	dst = jsontok.AppendKeyString(dst, `{"limit_id":`, d.LimitID)
	dst = jsontok.AppendKeyString(dst, `,"limit_type":`, string(d.Type))
	dst = jsontok.AppendKeyString(dst, `,"class":`, d.Type.Class())
	dst = jsontok.AppendKeyString(dst, `,"unit":`, d.Type.Unit())
	if d.Period != "" {
		dst = jsontok.AppendKeyString(dst, `,"period":`, d.Period)
	}
	dst = jsontok.AppendKeyString(dst, `,"posture":`, d.Posture.Label())
	if d.Node != "" {
		dst = jsontok.AppendKeyString(dst, `,"attach":"pinned","node":`, d.Node)
	} else {
		dst = jsontok.AppendKeyString(dst, `,"attach":"template","level":`, d.Level)
	}
	dst = appendAmount(dst, "amount", d.Type, d.Amount)
	dst = jsontok.AppendKeyBool(dst, `,"override_allowed":`, d.OverrideAllowed)
	if d.OverrideAllowed && d.OverrideMax >= 0 {
		dst = appendAmount(dst, "override_max", d.Type, d.OverrideMax)
	}
	dst = d.Extra.appendJSON(dst, false)
	return append(dst, '}')
}

func (o *OverrideEntry) appendJSON(dst []byte) []byte {
	dst = jsontok.AppendKeyString(dst, `{"limit_id":`, o.LimitID)
	dst = jsontok.AppendKeyString(dst, `,"limit_type":`, string(o.Type))
	dst = jsontok.AppendKeyString(dst, `,"node":`, o.Node)
	dst = appendAmount(dst, "amount", o.Type, o.Amount)
	return append(dst, '}')
}

// appendAmount appends ,"<name>":{usd…} for budget_usd and
// ,"<name>_count":N otherwise.
func appendAmount(dst []byte, name string, t LimitType, v int64) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	if t == BudgetUSD {
		dst = append(dst, '"', ':')
		return USD{Nanos: v}.appendJSON(dst)
	}
	dst = append(dst, "_count\":"...)
	return strconv.AppendInt(dst, v, 10)
}
