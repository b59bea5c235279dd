package preview

import (
	"fmt"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/sat"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// LiveHeader opens the closing stanza: the EXACT figures beside the
// running accountant's counters.
const LiveHeader = "LIVE — LedgerSettled recomputation against the running accountant's counters (label: live_counters):"

// NoLiveLine closes a report made without --accountant.
const NoLiveLine = "LIVE — not compared: pass --accountant URL (admin token from TT_ADMIN_TOKEN or --admin-token-file) to end this report with each EXACT figure beside the running accountant's live counter and that counter's lag."

// Live is the running accountant's side of the closing stanza: what GET
// /tt/api/v1/governance/counters answered, or why it could not be read.
type Live struct {
	// URL is the accountant's address.
	URL string
	// Counters is its answer; nil when Err is set.
	Counters *api.LiveCounters
	// Err is why the counters could not be read.
	Err error
}

// LiveError is a report whose closing stanza could not read the live
// counters: the report was written, the comparison is missing.
type LiveError struct {
	URL string
	Err error
}

func (e *LiveError) Error() string {
	return fmt.Sprintf("the live counters of %s could not be read: %v", e.URL, e.Err)
}

func (e *LiveError) Unwrap() error { return e.Err }

// liveEntry is a live counter: its value and its #unpriced companion.
type liveEntry struct {
	value, unpriced int64
}

// liveRow is one instance of the closing stanza: the recomputed figure
// beside the live counter of the same identity and period (ok false: the
// accountant has none; other names the period it counts instead).
type liveRow struct {
	limit      *govern.Limit
	name       string // node and dims
	recomputed int64
	live       liveEntry
	ok         bool
	other      string
}

// liveRows pairs, for every LedgerSettled instance, the recomputed figure
// with the live counter of the same identity and calendar period, then
// lists every live counter of these limits the ledger held no row for.
func (r *Replay) liveRows(c *api.LiveCounters) []liveRow {
	// The live counters by identity, for the period each one counts.
	type key struct {
		id    string
		start int64
	}
	live := map[key]liveEntry{}
	periods := map[string][]time.Time{}
	slides := map[string]syncwire.Entry{}
	for _, e := range c.Counters {
		if strings.Contains(e.ID, syncwire.ReplicaSuffix) || strings.HasSuffix(e.ID, syncwire.EstimatedSuffix) ||
			strings.HasSuffix(e.ID, syncwire.ResetsSuffix) || strings.HasSuffix(e.ID, syncwire.DistinctSuffix) {
			continue // one replica's share of a reserve-mode budget, inside its total; a count of estimated rows; a window's reset; a bound's count
		}
		if id, ok := strings.CutSuffix(e.ID, syncwire.SlideSuffix); ok {
			slides[id] = e // a rolling window's oldest bucket: its share is added below
			continue
		}
		id, unpriced := strings.CutSuffix(e.ID, syncwire.UnpricedSuffix)
		k := key{id, e.PeriodStart.Unix()}
		x := live[k]
		if unpriced {
			x.unpriced = e.Value
		} else {
			x.value = e.Value
			periods[id] = append(periods[id], e.PeriodStart)
		}
		live[k] = x
	}
	for id, e := range slides {
		k := key{id, e.PeriodStart.Unix()}
		if x, ok := live[k]; ok {
			l := r.armedLimit(id)
			if l != nil && l.Period.Rolling > 0 {
				cur, end := l.Period.Start(r.at), l.Period.End(r.at)
				x.value = sat.Add(x.value, calendar.Share(e.Value, end.Sub(r.at), end.Sub(cur)))
				live[k] = x
			}
		}
	}

	var out []liveRow
	for _, l := range r.limits() {
		if l.Type.Class() != govern.LedgerSettled || !l.Period.Counted() {
			continue
		}
		start := l.Period.Start(r.at).Unix()
		seen := map[string]bool{}
		n := 0
		for _, x := range ofLimit(r.settled, l) {
			seen[x.id] = true
			n++
			e, ok := live[key{x.id, start}]
			out = append(out, liveRow{limit: l, name: x.node + dimsSuffix(x.dims), recomputed: x.value, live: e, ok: ok,
				other: otherPeriod(periods[x.id], start, l.Period)})
		}
		// Live counters of this limit the ledger held no row for.
		names := r.instanceNames(l)
		prefix := l.ID + "|" + l.Type.String() + "|"
		for _, e := range c.Counters {
			if e.PeriodStart.Unix() != start || !strings.HasPrefix(e.ID, prefix) || strings.HasSuffix(e.ID, syncwire.UnpricedSuffix) || strings.HasSuffix(e.ID, syncwire.EstimatedSuffix) || strings.Contains(e.ID, syncwire.ReplicaSuffix) || seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			n++
			name, ok := names[e.ID]
			switch {
			case ok:
			case l.Level == govern.LevelKey && strings.Count(e.ID, "|") >= 3:
				// A key's instance: its node is the identity's third field
				// (a key leaf has nothing to escape).
				name = strings.SplitN(e.ID, "|", 4)[2]
			default:
				name = "counter " + e.ID
			}
			out = append(out, liveRow{limit: l, name: name, live: live[key{e.ID, start}], ok: true})
		}
		if n == 0 {
			out = append(out, liveRow{limit: l, name: attachName(l)})
		}
	}
	return out
}

// liveErr is why the closing stanza has no comparison, or nil.
func liveErr(lv *Live) error {
	if lv.Err == nil && lv.Counters == nil {
		return fmt.Errorf("no answer")
	}
	return lv.Err
}

// writeLive writes the closing stanza: the stanza's own lag, then every
// liveRow.
func (r *Replay) writeLive(b *strings.Builder, src Source) error {
	b.WriteString("\n")
	if src.Live == nil {
		b.WriteString(NoLiveLine + "\n")
		return nil
	}
	lv := src.Live
	if err := liveErr(lv); err != nil {
		fmt.Fprintf(b, "LIVE — not compared: the counters of %s could not be read: %v\n", lv.URL, err)
		return &LiveError{URL: lv.URL, Err: err}
	}
	c := lv.Counters
	b.WriteString(LiveHeader + "\n")
	fmt.Fprintf(b, "  accountant: %s (plan %s), read %s\n", lv.URL, short(c.Plan), stamp(c.ReadAt))
	fmt.Fprintf(b, "  lag: snapshot published %s, %s old when read; %d rows acknowledged and not folded; %d rows reported dropped by the filters (%d replica(s) live); %s\n",
		stamp(c.GeneratedAt), age(c.SnapshotAgeS), c.Lag.UnfoldedRows, c.Lag.DroppedRows, c.Lag.ReplicasLive, c.Lag.Note)
	if n := planNote(src.Plan, c.Plan); n != "" {
		b.WriteString("  note: " + n + "\n")
	}
	b.WriteString("  note: " + LiveDifferenceNote + "\n")
	for _, x := range r.liveRows(c) {
		b.WriteString(liveLine(x.limit, x.name, x.recomputed, x.live, x.ok, x.other))
	}
	return nil
}

// LiveDifferenceNote closes the lag of every LIVE stanza.
const LiveDifferenceNote = "a difference is rows one side holds and the other does not: written after the ledger was read, not yet flushed by a filter, dropped, or kept in another ledger"

// planNote says that the accountant runs another plan than the config's,
// or is empty.
func planNote(config, live string) string {
	if config == "" || live == "" || config == live {
		return ""
	}
	return fmt.Sprintf("the accountant runs plan %s, this config is plan %s: a limit whose id, node, period or match differs has no live counter (an amount change alone keeps it)", short(live), short(config))
}

// instanceNames maps the counter identity of each instance of l (a limit
// whose match.model is a glob has one per model, and is left out) to its
// node.
func (r *Replay) instanceNames(l *govern.Limit) map[string]string {
	out := map[string]string{}
	if r.armed == nil || l.Mode == govern.ModeOff {
		return out
	}
	if l.PerValue() {
		return out
	}
	d := l.InstanceDims(govern.Dims{}, "")
	for _, n := range r.armed.Instances(l) {
		out[govern.Identity(l, n, d)] = n + dimsSuffix(d)
	}
	return out
}

// liveLine is one instance of the closing stanza:
//
//	[quota_requests] team_daily_requests @ org:acme/team:ml  recomputed 1 / live 1  (same)
func liveLine(l *govern.Limit, name string, recomputed int64, e liveEntry, ok bool, other string) string {
	line := fmt.Sprintf("  [%s] %s @ %s  recomputed %s / live ", l.Type, l.ID, name, amountString(l.Type, recomputed))
	if !ok {
		line += "-  (no live counter"
		if other != "" {
			line += "; " + other
		}
		return line + ")\n"
	}
	line += amountString(l.Type, e.value)
	if e.unpriced > 0 {
		line += fmt.Sprintf(" + %d unpriced row(s)", e.unpriced)
	}
	switch d := e.value - recomputed; {
	case d == 0:
		line += "  (same)"
	case d > 0:
		line += "  (live +" + amountString(l.Type, d) + ")"
	default:
		line += "  (live −" + amountString(l.Type, -d) + ")"
	}
	return line + "\n"
}

// otherPeriod names the period the accountant counts for an identity when
// it is not the one --at picked.
func otherPeriod(starts []time.Time, start int64, p govern.Period) string {
	for _, s := range starts {
		if s.Unix() != start {
			return fmt.Sprintf("the accountant counts the %s from %s; --at picks another", p, stamp(s))
		}
	}
	return ""
}

func age(s float64) string {
	return (time.Duration(s*1000) * time.Millisecond).String()
}

// armedLimit is the limit a counter identity belongs to.
func (r *Replay) armedLimit(id string) *govern.Limit {
	if r.armed == nil {
		return nil
	}
	lid, _, _ := strings.Cut(id, "|")
	return r.armed.Plan.Limit(lid)
}
