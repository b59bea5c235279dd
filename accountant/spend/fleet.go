package spend

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/shared/sat"
)

// A fleet keeps one ledger, and one rollup, per accountant. A fleet report
// asks every accountant for its share of the report (a Partial) and adds
// the shares up: each row is in one ledger, so the sums add exactly (see
// RATIONALE.md, "Why does a fleet report add up partial reports?"). A
// report with top= takes two rounds: every share's group ranks first,
// which the asker adds up and ranks the fleet's groups by, then every
// share's series of the groups kept and of the rest summed as one.

// Phases of a fleet report.
const (
	// PhaseRanks asks for every group's ranking figures.
	PhaseRanks = "ranks"
	// PhaseSeries asks for the series of every group, or of the groups
	// PartialRequest.Select names and of the rest summed.
	PhaseSeries = "series"
)

// PartialRequest asks one accountant for its share of a report.
type PartialRequest struct {
	// Query is the report's query as URL parameters (Query.Values).
	Query string `json:"query"`
	// Scope is the subtree the caller may see ("" everything): the share
	// holds rows owned inside it only.
	Scope string `json:"scope"`
	Phase string `json:"phase"`
	// Select, in the series phase of a top= report, are the keys of the
	// groups kept, in order: the share has a row for each, then one row
	// summing every other group. Nil: a row per group, named in Keys.
	Select [][]string `json:"select,omitempty"`
	// Now is the asker's clock, which stamps the query's defaults.
	Now time.Time `json:"now"`
}

// Partial is one rollup's share of a report, in a form that adds up with
// the other accountants' shares.
type Partial struct {
	// Instance names the accountant process that answered: an accountant
	// reached under two addresses is counted once.
	Instance string `json:"instance,omitempty"`
	// Name is the accountant's name in the owner's list (its host and
	// listen address), which the asker checks against the one it meant.
	Name string `json:"name,omitempty"`
	// Rows, First and Last describe the whole rollup, as Source does (absent
	// for a scoped caller); HourlyFrom is the rollup's hourly window.
	Rows       int64      `json:"rows,omitempty"`
	First      *time.Time `json:"first,omitempty"`
	Last       *time.Time `json:"last,omitempty"`
	HourlyFrom *time.Time `json:"hourly_from,omitempty"`
	// Feeds counts the rows of each filter replica (ledger.Row.Replica) in
	// the rollup; absent for a scoped caller.
	Feeds map[string]int64 `json:"feeds,omitempty"`
	// Keys are the groups' values of the group_by dims: of Ranks, or of the
	// table's rows in the series phase without Select.
	Keys  [][]string `json:"keys,omitempty"`
	Ranks []rank3    `json:"ranks,omitempty"`
	// Table is, per row, its non-empty buckets as [bucket index, then the
	// fifteen figures of Values in their JSON order, dollars in nanos].
	Table [][][]int64 `json:"table,omitempty"`
}

// rank3 is a rank on the wire: dollars spent in nanos, UNPRICED tokens,
// requests.
type rank3 [3]int64

// Partial answers one accountant's share of a report.
func (r *Rollup) Partial(req PartialRequest) (*Partial, error) {
	v, err := url.ParseQuery(req.Query)
	if err != nil {
		return nil, &QueryError{Problems: []string{"query: " + err.Error()}}
	}
	q, err := ParseQuery(v, req.Now)
	if err != nil {
		return nil, err
	}
	rep, node, err := newReport(q, req.Scope, req.Now)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.foldLocked()
	if err := r.sourceLocked(rep, q, req.Scope); err != nil {
		return nil, err
	}
	p := &Partial{Rows: rep.Source.Rows, First: rep.Source.First, Last: rep.Source.Last, HourlyFrom: rep.Source.HourlyFrom}
	if req.Scope == "" {
		p.Feeds = make(map[string]int64, len(r.feeds))
		for f, n := range r.feeds {
			p.Feeds[f] = n
		}
	}
	sc := r.scanner(&q, node, rep.Buckets)
	switch req.Phase {
	case PhaseRanks:
		rk := sc.ranks()
		p.Keys = sc.keys
		p.Ranks = make([]rank3, len(rk))
		for i, x := range rk {
			p.Ranks[i] = rank3{x.spent, x.unTok, x.requests}
		}
		return p, nil
	case PhaseSeries:
	default:
		return nil, &QueryError{Problems: []string{fmt.Sprintf("phase %q is not %s or %s", req.Phase, PhaseRanks, PhaseSeries)}}
	}
	t := &table{nb: len(rep.Buckets)}
	place := func(g int32) int32 { return g }
	if req.Select != nil {
		sel := make(map[string]int32, len(req.Select))
		for i, k := range req.Select {
			sel[strings.Join(k, "\x00")] = int32(i)
		}
		other := int32(len(req.Select))
		place = func(g int32) int32 {
			if i, ok := sel[strings.Join(sc.keys[g], "\x00")]; ok {
				return i
			}
			return other
		}
	}
	if !sc.series(t, place) {
		return nil, tooMany(rep)
	}
	if req.Select == nil {
		p.Keys = sc.keys
	}
	p.Table = make([][][]int64, t.rows())
	for row := range p.Table {
		cells := [][]int64{}
		for b := 0; b < t.nb; b++ {
			if a := t.get(row, b); a != nil {
				c := make([]int64, 1+fNone)
				c[0] = int64(b)
				copy(c[1:], a[:fNone])
				cells = append(cells, c)
			}
		}
		p.Table[row] = cells
	}
	return p, nil
}

// Peer is one accountant of a fleet report.
type Peer struct {
	// Accountant names it (its announced base URL).
	Accountant string
	// Self marks the accountant answering the report.
	Self bool
	// LastSeen is when the fleet last heard from it (zero: unknown).
	LastSeen time.Time
	// Ask fetches its share. A *QueryError is a query the share cannot
	// answer exactly (it fails the report); any other error leaves the
	// accountant out, and the report says so.
	Ask func(ctx context.Context, req PartialRequest) (*Partial, error)
}

// ReplicaAnswer is what a fleet report says of one accountant.
type ReplicaAnswer struct {
	Accountant string     `json:"accountant"`
	Self       bool       `json:"self,omitempty"`
	Answered   bool       `json:"answered"`
	Error      string     `json:"error,omitempty"`
	LastSeen   *time.Time `json:"last_seen,omitempty"`
	// Rows is every row its rollup holds (absent for a scoped caller).
	Rows int64 `json:"rows,omitempty"`
}

// Overlap is a filter replica whose rows are in more than one
// accountant's ledger: the same request may then be counted twice.
type Overlap struct {
	Replica     string   `json:"replica"`
	Accountants []string `json:"accountants"`
}

// FleetRun answers q over the shares of peers for a caller scoped to
// scope, adding them up. An accountant that does not answer, or whose
// share is not plausible (pl), is left out and listed as such, and the
// report is marked Partial.
func FleetRun(ctx context.Context, q Query, scope string, now time.Time, peers []Peer, pl Plausibility) (*Report, error) {
	rep, _, err := newReport(q, scope, now)
	if err != nil {
		return nil, err
	}
	pc := &shareCheck{pl: pl, q: &q, scope: scope, now: now, buckets: rep.Buckets, own: map[string]bool{}}
	base := PartialRequest{Query: q.Values().Encode(), Scope: scope, Now: now}
	answers := make([]ReplicaAnswer, len(peers))
	for i, p := range peers {
		answers[i] = ReplicaAnswer{Accountant: p.Accountant, Self: p.Self}
		if !p.LastSeen.IsZero() {
			t := p.LastSeen.UTC()
			answers[i].LastSeen = &t
		}
	}
	alias := make([]bool, len(peers))
	live := make([]bool, len(peers))
	for i := range live {
		live[i] = true
	}
	// round asks every live peer at once; a peer that fails is left out
	// of this round and the next.
	round := func(req PartialRequest, check func(*Partial) error, plausible func(*Partial) error) ([]*Partial, error) {
		out := make([]*Partial, len(peers))
		errs := make([]error, len(peers))
		var wg sync.WaitGroup
		for i, p := range peers {
			if !live[i] {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				part, err := p.Ask(ctx, req)
				if err == nil {
					err = check(part)
				}
				out[i], errs[i] = part, err
			}()
		}
		wg.Wait()
		for i, p := range out {
			if p != nil && errs[i] == nil && peers[i].Self {
				pc.ownNodes(p)
			}
		}
		for i, p := range out {
			if p != nil && errs[i] == nil && !peers[i].Self {
				if err := plausible(p); err != nil {
					errs[i] = fmt.Errorf("its share was left out: %w", err)
					if pl.OnRefused != nil {
						pl.OnRefused(peers[i].Accountant, err)
					}
				}
			}
		}
		for i, p := range out {
			if p == nil || p.Instance == "" || errs[i] != nil {
				continue
			}
			for j := range i {
				if out[j] != nil && errs[j] == nil && out[j].Instance == p.Instance {
					// One accountant under two addresses: its first
					// answer stands.
					live[i], out[i], alias[i] = false, nil, true
					break
				}
			}
		}
		for i, err := range errs {
			if err == nil {
				continue
			}
			if qe, ok := err.(*QueryError); ok {
				probs := make([]string, len(qe.Problems))
				for j, s := range qe.Problems {
					probs[j] = peers[i].Accountant + ": " + s
				}
				return nil, &QueryError{Problems: probs}
			}
			live[i], out[i] = false, nil
			answers[i].Error = err.Error()
		}
		return out, nil
	}
	nb := len(rep.Buckets)
	t := &table{nb: nb}
	var kept []RowGroup
	var other *RowGroup
	var parts []*Partial
	if q.Top > 0 && len(q.GroupBy) > 0 {
		req := base
		req.Phase = PhaseRanks
		ranked, err := round(req, func(p *Partial) error { return checkRanks(p, len(q.GroupBy)) }, func(p *Partial) error {
			return errors.Join(pc.period(p), pc.keys(p))
		})
		if err != nil {
			return nil, err
		}
		var keys groupKeys
		var rk []rank
		for _, p := range ranked {
			if p == nil {
				continue
			}
			for i, k := range p.Keys {
				g := keys.of(k)
				if g == len(rk) {
					rk = append(rk, rank{})
				}
				x := &rk[g]
				x.spent = sat.Add(x.spent, p.Ranks[i][0])
				x.unTok = sat.Add(x.unTok, p.Ranks[i][1])
				x.requests = sat.Add(x.requests, p.Ranks[i][2])
			}
		}
		order := rankGroups(keys.keys, rk)
		k := min(q.Top, len(order))
		req = base
		req.Phase = PhaseSeries
		req.Select = make([][]string, k)
		for i, g := range order[:k] {
			req.Select[i] = keys.keys[g]
		}
		rows := k + 1
		if parts, err = round(req, func(p *Partial) error { return checkTable(p, rows, nb) }, func(p *Partial) error {
			return errors.Join(pc.period(p), pc.cells(p))
		}); err != nil {
			return nil, err
		}
		if rows*nb > MaxAnswer {
			return nil, tooMany(rep)
		}
		t.grow(rows)
		for _, p := range parts {
			if p != nil {
				t.addRows(p.Table, func(row int) int { return row })
			}
		}
		kept = make([]RowGroup, k)
		for i := range kept {
			kept[i] = RowGroup{Key: req.Select[i], Total: t.rowTotal(i), Row: i}
		}
		if k < len(order) {
			other = &RowGroup{Row: k, Groups: len(order) - k, Total: t.rowTotal(k)}
		}
	} else {
		req := base
		req.Phase = PhaseSeries
		if parts, err = round(req, func(p *Partial) error { return checkSeries(p, len(q.GroupBy), nb) }, func(p *Partial) error {
			return errors.Join(pc.period(p), pc.keys(p), pc.cells(p))
		}); err != nil {
			return nil, err
		}
		var keys groupKeys
		for _, p := range parts {
			if p == nil {
				continue
			}
			rowOf := make([]int, len(p.Keys))
			for i, k := range p.Keys {
				rowOf[i] = keys.of(k)
			}
			if len(keys.keys)*nb > MaxAnswer {
				return nil, tooMany(rep)
			}
			t.grow(len(keys.keys))
			t.addRows(p.Table, func(row int) int { return rowOf[row] })
		}
		kept = rankRows(keys.keys, t)
	}
	rep.fill(&q, t, kept, other)
	rep.Source = Source{}
	feeds := map[string][]string{}
	for i, p := range parts {
		if p == nil {
			continue
		}
		answers[i].Answered, answers[i].Rows = true, p.Rows
		rep.Source.Ledgers++
		rep.Source.Rows = sat.Add(rep.Source.Rows, p.Rows)
		if p.First != nil && (rep.Source.First == nil || p.First.Before(*rep.Source.First)) {
			rep.Source.First = p.First
		}
		if p.Last != nil && (rep.Source.Last == nil || p.Last.After(*rep.Source.Last)) {
			rep.Source.Last = p.Last
		}
		if p.HourlyFrom != nil && (rep.Source.HourlyFrom == nil || p.HourlyFrom.After(*rep.Source.HourlyFrom)) {
			rep.Source.HourlyFrom = p.HourlyFrom
		}
		for f := range p.Feeds {
			feeds[f] = append(feeds[f], peers[i].Accountant)
		}
	}
	for f, accts := range feeds {
		if len(accts) > 1 {
			sort.Strings(accts)
			rep.Source.Overlaps = append(rep.Source.Overlaps, Overlap{Replica: f, Accountants: accts})
		}
	}
	sort.Slice(rep.Source.Overlaps, func(i, j int) bool { return rep.Source.Overlaps[i].Replica < rep.Source.Overlaps[j].Replica })
	for i, a := range answers {
		if alias[i] {
			continue
		}
		rep.Source.Replicas = append(rep.Source.Replicas, a)
		if !a.Answered {
			rep.Source.Missing++
		}
	}
	rep.Partial = rep.Source.Missing > 0
	rep.Fleet = true
	return rep, nil
}

// addRows adds a share's table into t, its row i into t's row rowOf(i).
func (t *table) addRows(rows [][][]int64, rowOf func(int) int) {
	for i, cells := range rows {
		row := rowOf(i)
		for _, c := range cells {
			var a acc
			copy(a[:fNone], c[1:])
			t.at(row, int(c[0])).merge(&a)
		}
	}
}

// checkRanks checks a share's ranks phase.
func checkRanks(p *Partial, dims int) error {
	if len(p.Ranks) != len(p.Keys) {
		return fmt.Errorf("its answer has %d ranks for %d groups", len(p.Ranks), len(p.Keys))
	}
	for i, k := range p.Keys {
		if len(k) != dims {
			return fmt.Errorf("its answer has a group of %d values; the report groups by %d dims", len(k), dims)
		}
		for _, x := range p.Ranks[i] {
			if x < 0 {
				return fmt.Errorf("its answer has a negative figure")
			}
		}
	}
	return nil
}

// checkSeries checks a share's series phase without Select.
func checkSeries(p *Partial, dims, nb int) error {
	for _, k := range p.Keys {
		if len(k) != dims {
			return fmt.Errorf("its answer has a group of %d values; the report groups by %d dims", len(k), dims)
		}
	}
	return checkTable(p, len(p.Keys), nb)
}

// checkTable checks a share's table: rows rows, cells of a bucket of the
// report and fifteen non-negative figures each.
func checkTable(p *Partial, rows, nb int) error {
	if len(p.Table) > rows {
		return fmt.Errorf("its answer has %d rows; the report has %d", len(p.Table), rows)
	}
	for _, cells := range p.Table {
		for _, c := range cells {
			if len(c) != 1+fNone {
				return fmt.Errorf("its answer has a cell of %d figures; want %d", len(c), 1+fNone)
			}
			if c[0] < 0 || c[0] >= int64(nb) {
				return fmt.Errorf("its answer has bucket %d; the report has %d", c[0], nb)
			}
			for _, x := range c[1:] {
				if x < 0 {
					return fmt.Errorf("its answer has a negative figure")
				}
			}
		}
	}
	return nil
}

// groupKeys numbers the groups of the accountants' shares in the order
// they are first seen: the same key from several accountants is one group.
type groupKeys struct {
	keys  [][]string
	index map[string]int
}

// of is k's group, a new one when k was not seen.
func (x *groupKeys) of(k []string) int {
	s := strings.Join(k, "\x00")
	g, ok := x.index[s]
	if !ok {
		if x.index == nil {
			x.index = map[string]int{}
		}
		g = len(x.keys)
		x.index[s] = g
		x.keys = append(x.keys, k)
	}
	return g
}
