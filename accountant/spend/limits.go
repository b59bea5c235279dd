package spend

import (
	"encoding/json"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// LimitStatus is one LedgerSettled instance (a budget or quota at one
// node, per model when its match.model is a pattern) in the current
// period: its amount and the live counter the gateways read.
type LimitStatus struct {
	LimitID string `json:"limit_id"`
	Type    string `json:"type"`
	Node    string `json:"node"`
	// Dims are the values of the dims the counter is kept per (a limit
	// with match.model counts per model); absent when there are none.
	Dims        map[string]string `json:"dims,omitempty"`
	Period      string            `json:"period"`
	PeriodStart time.Time         `json:"period_start"`
	ResetsAt    time.Time         `json:"resets_at"`
	Posture     Posture           `json:"posture"`
	// Unit is usd, tokens or requests; Amount and Used are in it (dollars
	// as exact decimals).
	Unit   string      `json:"unit"`
	Amount json.Number `json:"amount"`
	Used   json.Number `json:"used"`
	// Fraction is Used ÷ Amount, to four decimals.
	Fraction float64 `json:"fraction"`
	// Override is set when Amount is a per-node override's.
	Override bool `json:"override,omitempty"`
	// Counter is the counter's identity (govern.Identity), "" for a limit
	// counted per model that has counted nothing yet; Credited what resets
	// and credits took off it this period (the snapshot serves Used less
	// it), absent when nothing was.
	Counter    string      `json:"counter"`
	Credited   json.Number `json:"credited,omitempty"`
	Thresholds []float64   `json:"thresholds"`
	// UnpricedRows are rows of models with no price counted by a budget:
	// their dollars are not in Used.
	UnpricedRows int64 `json:"unpriced_rows,omitempty"`
}

// Posture is a limit's posture.
type Posture struct {
	Mode    string `json:"mode"`
	Enforce string `json:"enforce"`
	Fail    string `json:"fail"`
}

// Limits lists, for a caller scoped to scope ("" everything), every
// LedgerSettled instance at a node inside the scope in the period holding
// now, with the live counter of that period from entries (the snapshot
// the gateways read; a counter absent there has counted nothing yet),
// fullest first. An ancestor's or __global's limit binds the scope too but
// counts traffic outside it, so a delegated admin is not shown it.
func Limits(a *govern.Armed, entries []syncwire.Entry, now time.Time, scope string) []LimitStatus {
	out := []LimitStatus{}
	if a == nil {
		return out
	}
	type val struct{ v, unpriced, credit int64 }
	live := map[string]*val{}
	for _, e := range entries {
		if strings.Contains(e.ID, syncwire.ReplicaSuffix) || strings.HasSuffix(e.ID, syncwire.EstimatedSuffix) ||
			strings.HasSuffix(e.ID, syncwire.ResetsSuffix) || strings.HasSuffix(e.ID, syncwire.DistinctSuffix) {
			continue
		}
		if id, ok := strings.CutSuffix(e.ID, syncwire.SlideSuffix); ok {
			// A rolling window's oldest bucket: the share of it still in
			// the window counts (seed 003's sliding rule).
			if x := live[id]; x != nil {
				x.v += slideShare(e, now)
			} else {
				live[id] = &val{v: slideShare(e, now)}
			}
			continue
		}
		id, unpriced := strings.CutSuffix(e.ID, syncwire.UnpricedSuffix)
		id, credit := strings.CutSuffix(id, syncwire.CreditSuffix)
		x := live[id]
		if x == nil {
			x = &val{}
			live[id] = x
		}
		switch {
		case unpriced:
			x.unpriced = e.Value
		case credit:
			x.credit = e.Value
		default:
			x.v = e.Value
		}
	}
	for _, l := range a.Plan.Limits {
		if l.Type.Class() != govern.LedgerSettled || !l.Period.Counted() || l.Mode == govern.ModeOff {
			continue
		}
		for _, node := range a.Instances(l) {
			if scope != "" && !runtime.InSubtree(scope, node) {
				continue
			}
			st := LimitStatus{
				LimitID: l.ID, Type: l.Type.String(), Node: node,
				Period:      l.Period.String(),
				PeriodStart: l.Period.Start(now),
				ResetsAt:    l.Period.End(now),
				Posture:     Posture{Mode: l.Mode.String(), Enforce: l.Enforce.String(), Fail: l.Fail.String()},
				Unit:        l.Type.Unit(),
				Thresholds:  append([]float64{}, l.Thresholds...),
			}
			amount := l.Amount
			if v, ok := a.Override(l.ID, node); ok {
				amount, st.Override = v, true
			}
			st.Amount = amountNumber(l.Type, amount)
			// The counters of this instance: one, or one per model.
			full := govern.Identity(l, node, l.InstanceDims(govern.Dims{}, ""))
			var ids []string
			if l.PerValue() {
				prefix := govern.DistinctBase(l, node)
				for id := range live {
					if strings.HasPrefix(id, prefix) && !strings.Contains(id, "#") {
						ids = append(ids, id)
					}
				}
				sort.Strings(ids)
			} else if _, ok := live[full]; ok {
				ids = []string{full}
			}
			if len(ids) == 0 {
				st.Counter = full
				if strings.ContainsAny(l.Match.Model, `*?[\`) {
					st.Counter = ""
				}
				out = append(out, finish(st, l, amount, 0, 0, dimsOfLimit(l, "")))
				continue
			}
			for _, id := range ids {
				x := live[id]
				st.Counter, st.Credited = id, ""
				if x.credit > 0 {
					st.Credited = amountNumber(l.Type, x.credit)
				}
				out = append(out, finish(st, l, amount, x.v, x.unpriced, dimsOfLimit(l, identityDims(id))))
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Fraction != out[j].Fraction {
			return out[i].Fraction > out[j].Fraction
		}
		if out[i].LimitID != out[j].LimitID {
			return out[i].LimitID < out[j].LimitID
		}
		return out[i].Node < out[j].Node
	})
	return out
}

func finish(st LimitStatus, l *govern.Limit, amount, used, unpriced int64, dims map[string]string) LimitStatus {
	st.Used = amountNumber(l.Type, used)
	st.Fraction = fraction(used, amount)
	st.UnpricedRows = unpriced
	st.Dims = dims
	return st
}

// identityDims is the dims field of a counter identity: model=gpt-4o,...
func identityDims(id string) string {
	f := strings.SplitN(id, "|", 5)
	if len(f) < 5 {
		return ""
	}
	return f[3]
}

// dimsOfLimit is the dims a counter is kept per: those of the identity
// (percent-escapes undone), or the limit's match when it has no counter.
func dimsOfLimit(l *govern.Limit, field string) map[string]string {
	out := map[string]string{}
	if field == "" {
		if l.Match.Model != "" {
			out["model"] = l.Match.Model
		}
		if l.Match.Provider != "" {
			out["provider"] = l.Match.Provider
		}
		if l.Match.Endpoint != "" {
			out["endpoint"] = l.Match.Endpoint
		}
		if l.Match.Customer != "" {
			out["customer"] = l.Match.Customer
		}
		if l.Match.Tag != "" {
			out["tag"] = l.Match.Tag
		}
	}
	for _, kv := range strings.Split(field, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			out[k] = unescape(v)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// unescape undoes the percent-escapes of a counter identity's values.
func unescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func amountNumber(t govern.Type, v int64) json.Number { return json.Number(t.FormatAmount(v)) }

// fraction is used ÷ amount rounded half up to four decimals, exactly.
func fraction(used, amount int64) float64 {
	if amount <= 0 {
		return 0
	}
	n := new(big.Int).Mul(big.NewInt(used), big.NewInt(20000))
	n.Add(n, big.NewInt(amount))
	n.Quo(n, big.NewInt(2*amount))
	f, _ := new(big.Float).Quo(new(big.Float).SetInt(n), big.NewFloat(10000)).Float64()
	return f
}

// slideShare is the share of a rolling window's oldest bucket (an entry
// ending in syncwire.SlideSuffix, carrying the start of the current day
// bucket) still inside the window at now.
func slideShare(e syncwire.Entry, now time.Time) int64 {
	start := e.PeriodStart
	end := start.Add(24 * time.Hour)
	return calendar.Share(e.Value, end.Sub(now), end.Sub(start))
}
