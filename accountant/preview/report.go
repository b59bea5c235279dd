package preview

import (
	"fmt"
	"io"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// Header lines of the three blocks. The first two are seed 000's labels.
const (
	ExactHeader       = "EXACT — LedgerSettled recomputation (hand-count-verifiable, exact):"
	ApproximateHeader = "APPROXIMATE — rate-class (label: rate_windows_approximated):"
	FlightsHeader     = "ESTIMATED — concurrency from overlapping flights (label: concurrency_from_flights):"
)

// Source describes what was replayed, for the report's heading.
type Source struct {
	Config string   // config file
	Plan   string   // plan hash
	Files  []string // ledger files
	Notes  []string // printed under the heading
	// Live is the running accountant's counters for the closing stanza;
	// nil closes the report with a line saying how to ask for them.
	Live *Live
}

// Stats returns what has been replayed so far.
func (r *Replay) Stats() Stats { return r.stats }

// Write prints the report: a heading, then the EXACT, APPROXIMATE and
// ESTIMATED blocks with one line per instance (a limit whose instances saw
// no row gets one line naming where it attaches), then the closing stanza:
// each EXACT figure beside the running accountant's live counter, with
// that counter's lag (src.Live), or a line saying how to ask for it. When
// the live counters could not be read the report is written all the same
// and the error is a *LiveError.
func (r *Replay) Write(w io.Writer, src Source) error {
	r.finish()
	var b strings.Builder
	st := r.stats
	fmt.Fprintf(&b, "govern preview: config %s (plan %s)\n", src.Config, short(src.Plan))
	fmt.Fprintf(&b, "ledger: %d file(s), %d rows (%d forwarded, %d refused, ", len(src.Files), st.Rows, st.Forwarded, st.Refused)
	if st.Passthrough > 0 {
		fmt.Fprintf(&b, "%d passthrough, ", st.Passthrough)
	}
	fmt.Fprintf(&b, "%d unpriced, %d unreadable)", st.Unpriced, st.Unreadable)
	if st.Rows > 0 {
		fmt.Fprintf(&b, ", %s .. %s", stamp(st.First), stamp(st.Last))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "at: %s (EXACT counts the calendar periods containing this instant)\n", stamp(r.at))
	for _, n := range src.Notes {
		b.WriteString("note: " + n + "\n")
	}
	if r.armed == nil || !r.armed.Plan.Enabled {
		b.WriteString("note: governance.enabled is not true in this config; the figures show what it would count once enabled\n")
	}
	b.WriteString("\n" + ExactHeader + "\n")
	for _, x := range r.exactRows() {
		b.WriteString(settledLine(x))
	}
	b.WriteString("\n" + ApproximateHeader + "\n")
	for _, x := range r.rateRows() {
		b.WriteString(rateLine(x.rated, x.rateResult))
	}
	b.WriteString("\n" + FlightsHeader + "\n")
	for _, x := range r.flightRows() {
		b.WriteString(flightLine(x.inflight, x.flightResult))
	}
	liveErr := r.writeLive(&b, src)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return liveErr
}

// limits are the limits of the armed plan, in plan order.
func (r *Replay) limits() []*govern.Limit {
	if r.armed == nil {
		return nil
	}
	return r.armed.Plan.Limits
}

// exactRows are the EXACT block's instances, limit by limit: those the
// ledger held rows for, or one naming where a limit attaches when it held
// none.
func (r *Replay) exactRows() []*settled {
	return blockRows(r, r.settled, func(l *govern.Limit) bool { return l.Type.Class() == govern.LedgerSettled }, newSettled)
}

// blockRows is a block's instances in m, limit by limit of the limits in
// the block: those the ledger held rows for, or the one empty makes where
// a limit attaches when it held none.
func blockRows[X interface{ inst() *instance }](r *Replay, m map[string]X, inBlock func(*govern.Limit) bool, empty func(instance) X) []X {
	var out []X
	for _, l := range r.limits() {
		if !inBlock(l) {
			continue
		}
		xs := ofLimit(m, l)
		if len(xs) == 0 {
			xs = []X{empty(instance{limit: l, node: attachName(l), amount: l.Amount})}
		}
		out = append(out, xs...)
	}
	return out
}

// rateRow is one instance of the APPROXIMATE block and its replay.
type rateRow struct {
	*rated
	rateResult
}

func (r *Replay) rateRows() []rateRow {
	var out []rateRow
	for _, x := range blockRows(r, r.rates, func(l *govern.Limit) bool { return l.Type == govern.RPM || l.Type == govern.TPM }, newRated) {
		out = append(out, rateRow{x, replayRate(x)})
	}
	return out
}

// flightRow is one instance of the ESTIMATED block and its replay.
type flightRow struct {
	*inflight
	flightResult
}

func (r *Replay) flightRows() []flightRow {
	var out []flightRow
	for _, x := range blockRows(r, r.flights, func(l *govern.Limit) bool { return l.Type == govern.Concurrency }, newInflight) {
		out = append(out, flightRow{x, replayFlights(x)})
	}
	return out
}

// settledLine is seed 002's line:
//
//	[quota_tokens] team_monthly_tokens @ org:acme/team:ml  observed 60 / ceiling 50000000  (frac 0.0000, rows 1)
func settledLine(x *settled) string {
	l := x.limit
	line := fmt.Sprintf("  [%s] %s @ %s%s  observed %s / ceiling %s  (frac %s, rows %d)",
		l.Type, l.ID, x.node, dimsSuffix(x.dims), amountString(l.Type, x.value), amountString(l.Type, x.amount), frac(x.value, x.amount), x.rows)
	if x.amount > 0 && x.value >= x.amount {
		line += "  OVER"
	}
	return line + posture(l) + "\n"
}

func rateLine(x *rated, res rateResult) string {
	l := x.limit
	return fmt.Sprintf("  [%s] %s @ %s%s  peak %d / %d per %s  (would refuse %d of %d arrivals; %s, burst %d)%s\n",
		l.Type, l.ID, x.node, dimsSuffix(x.dims), res.peak, x.amount, l.Period.Window, res.refused, res.arrivals, algName(l), l.Burst, posture(l))
}

func flightLine(x *inflight, res flightResult) string {
	l := x.limit
	return fmt.Sprintf("  [%s] %s @ %s%s  peak %d / %d in flight  (would refuse %d of %d flights)%s\n",
		l.Type, l.ID, x.node, dimsSuffix(x.dims), res.peak, x.amount, res.refused, res.flights, posture(l))
}

func algName(l *govern.Limit) string {
	if l.Algorithm == 0 {
		return "gcra"
	}
	return l.Algorithm.String()
}

// posture marks a limit that would not refuse: shadow records, soft admits,
// off is inert (compiled, never armed).
func posture(l *govern.Limit) string {
	switch {
	case l.Mode == govern.ModeOff:
		return "  [mode off: inert]"
	case l.Mode == govern.ModeShadow:
		return "  [shadow: records, never refuses]"
	case l.Enforce == govern.EnforceSoft:
		return "  [soft: admits over the cap]"
	}
	return ""
}

func attachName(l *govern.Limit) string {
	if l.Node != "" {
		return l.Node
	}
	return "level:" + l.Level
}

func dimsSuffix(d govern.Dims) string {
	var s string
	if d.Model != "" {
		s += " model=" + d.Model
	}
	if d.Provider != "" {
		s += " provider=" + d.Provider
	}
	if d.Endpoint != "" {
		s += " endpoint=" + d.Endpoint
	}
	if d.Customer != "" {
		s += " customer=" + d.Customer
	}
	if d.Tags != "" {
		s += " tag=" + d.Tags
	}
	return s
}

// amountString renders nanodollars as a plain decimal of dollars
// (0.0000126, 1000) and counts as integers.
func amountString(t govern.Type, v int64) string {
	if t == govern.BudgetUSD {
		return config.USD{Nanos: v}.String()
	}
	return fmt.Sprint(v)
}

// frac is observed ÷ ceiling to four decimals, rounded half up, exactly.
func frac(v, ceiling int64) string {
	if ceiling <= 0 {
		return "-"
	}
	n := new(big.Int).Mul(big.NewInt(v), big.NewInt(20000))
	n.Add(n, big.NewInt(ceiling))
	n.Quo(n, big.NewInt(2*ceiling)) // round(v/ceiling × 10000)
	q, m := new(big.Int).QuoRem(n, big.NewInt(10000), new(big.Int))
	return fmt.Sprintf("%s.%04d", q, m.Int64())
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// ofLimit returns the instances of m that are l's, by id.
func ofLimit[X interface{ inst() *instance }](m map[string]X, l *govern.Limit) []X {
	var out []X
	for _, x := range m {
		if x.inst().limit == l {
			out = append(out, x)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].inst().id < out[j].inst().id })
	return out
}

// inst is the instance a settled, rated or inflight counter embeds.
func (in *instance) inst() *instance { return in }
