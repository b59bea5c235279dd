package preview

import (
	"encoding/json"
	"io"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
)

// Document is the report as JSON (govern preview --format json): the same
// figures as the text, one object per line of it. Dollars are exact
// decimals; a limit whose instances saw no row has one entry with seen
// false, naming where it attaches.
type Document struct {
	Config      string          `json:"config"`
	Plan        string          `json:"plan"`
	Ledger      LedgerSummary   `json:"ledger"`
	At          time.Time       `json:"at"`
	Notes       []string        `json:"notes"`
	Exact       []ExactEntry    `json:"exact"`
	Approximate []RateEntry     `json:"approximate"`
	Estimated   []FlightEntry   `json:"estimated"`
	Live        *LiveComparison `json:"live"`
}

// LedgerSummary describes the rows replayed.
type LedgerSummary struct {
	Files      []string   `json:"files"`
	Rows       int        `json:"rows"`
	Forwarded  int        `json:"forwarded"`
	Refused    int        `json:"refused"`
	Unpriced   int        `json:"unpriced"`
	Unreadable int        `json:"unreadable"`
	First      *time.Time `json:"first"`
	Last       *time.Time `json:"last"`
}

// Instance names one limit instance of a Document.
type Instance struct {
	LimitID string `json:"limit_id"`
	Type    string `json:"type"`
	// Node is the instance's node, or where the limit attaches
	// ("level:team") when Seen is false.
	Node string            `json:"node"`
	Dims map[string]string `json:"dims,omitempty"`
	Seen bool              `json:"seen"`
	// Posture is on, shadow (records, never refuses), soft (admits over
	// the cap) or off (inert).
	Posture string `json:"posture"`
}

// ExactEntry is one line of EXACT.
type ExactEntry struct {
	Instance
	Unit     string       `json:"unit"`
	Observed json.Number  `json:"observed"`
	Ceiling  json.Number  `json:"ceiling"`
	Frac     *json.Number `json:"frac"`
	Rows     int          `json:"rows"`
	Over     bool         `json:"over"`
}

// RateEntry is one line of APPROXIMATE.
type RateEntry struct {
	Instance
	Peak      int64  `json:"peak"`
	Amount    int64  `json:"amount"`
	Window    string `json:"window"`
	Refused   int    `json:"would_refuse"`
	Arrivals  int    `json:"arrivals"`
	Algorithm string `json:"algorithm"`
	Burst     int64  `json:"burst"`
}

// FlightEntry is one line of ESTIMATED.
type FlightEntry struct {
	Instance
	Peak    int   `json:"peak"`
	Amount  int64 `json:"amount"`
	Refused int   `json:"would_refuse"`
	Flights int   `json:"flights"`
}

// LiveComparison is the closing stanza. URL is absent when no accountant
// was asked; Error says why its counters could not be read.
type LiveComparison struct {
	URL          string         `json:"url"`
	Error        string         `json:"error,omitempty"`
	Plan         string         `json:"plan,omitempty"`
	ReadAt       *time.Time     `json:"read_at,omitempty"`
	GeneratedAt  *time.Time     `json:"generated_at,omitempty"`
	SnapshotAgeS float64        `json:"snapshot_age_s"`
	UnfoldedRows int64          `json:"unfolded_rows"`
	DroppedRows  int64          `json:"dropped_rows"`
	ReplicasLive int            `json:"replicas_live"`
	Notes        []string       `json:"notes"`
	Counters     []LiveEntryDoc `json:"counters"`
}

// LiveEntryDoc is one instance of the closing stanza: the recomputed
// figure and the live counter (null when the accountant has none).
type LiveEntryDoc struct {
	LimitID      string       `json:"limit_id"`
	Type         string       `json:"type"`
	Name         string       `json:"name"`
	Recomputed   json.Number  `json:"recomputed"`
	Live         *json.Number `json:"live"`
	UnpricedRows int64        `json:"unpriced_rows"`
	Note         string       `json:"note,omitempty"`
}

// WriteJSON writes the report as one JSON Document. When the live
// counters could not be read the document is written all the same, its
// live.error saying why, and the error is a *LiveError.
func (r *Replay) WriteJSON(w io.Writer, src Source) error {
	r.finish()
	st := r.stats
	doc := Document{Config: src.Config, Plan: src.Plan, At: r.at.UTC(), Notes: append([]string{}, src.Notes...),
		Ledger: LedgerSummary{Files: src.Files, Rows: st.Rows, Forwarded: st.Forwarded, Refused: st.Refused, Unpriced: st.Unpriced, Unreadable: st.Unreadable},
		Exact:  []ExactEntry{}, Approximate: []RateEntry{}, Estimated: []FlightEntry{}}
	if doc.Ledger.Files == nil {
		doc.Ledger.Files = []string{}
	}
	if !st.First.IsZero() {
		t := st.First.UTC()
		doc.Ledger.First = &t
	}
	if !st.Last.IsZero() {
		t := st.Last.UTC()
		doc.Ledger.Last = &t
	}
	if r.armed == nil || !r.armed.Plan.Enabled {
		doc.Notes = append(doc.Notes, "governance.enabled is not true in this config; the figures show what it would count once enabled")
	}
	for _, x := range r.exactRows() {
		l := x.limit
		doc.Exact = append(doc.Exact, ExactEntry{Instance: instanceDoc(&x.instance, x.rows > 0), Unit: l.Type.Unit(),
			Observed: number(l.Type, x.value), Ceiling: number(l.Type, x.amount), Frac: fracNumber(x.value, x.amount),
			Rows: x.rows, Over: x.amount > 0 && x.value >= x.amount})
	}
	for _, x := range r.rateRows() {
		l := x.limit
		doc.Approximate = append(doc.Approximate, RateEntry{Instance: instanceDoc(&x.instance, len(x.rated.arrivals) > 0),
			Peak: x.peak, Amount: x.amount, Window: l.Period.Window.String(), Refused: x.refused, Arrivals: x.rateResult.arrivals,
			Algorithm: algName(l), Burst: l.Burst})
	}
	for _, x := range r.flightRows() {
		doc.Estimated = append(doc.Estimated, FlightEntry{Instance: instanceDoc(&x.instance, len(x.inflight.flights) > 0),
			Peak: x.peak, Amount: x.amount, Refused: x.refused, Flights: x.flightResult.flights})
	}
	var liveError error
	if lv := src.Live; lv != nil {
		lc := &LiveComparison{URL: lv.URL, Notes: []string{}, Counters: []LiveEntryDoc{}}
		doc.Live = lc
		if err := liveErr(lv); err != nil {
			lc.Error = err.Error()
			liveError = &LiveError{URL: lv.URL, Err: err}
		} else {
			c := lv.Counters
			ra, ga := c.ReadAt.UTC(), c.GeneratedAt.UTC()
			lc.Plan, lc.ReadAt, lc.GeneratedAt, lc.SnapshotAgeS = c.Plan, &ra, &ga, c.SnapshotAgeS
			lc.UnfoldedRows, lc.DroppedRows, lc.ReplicasLive = c.Lag.UnfoldedRows, c.Lag.DroppedRows, c.Lag.ReplicasLive
			lc.Notes = append(lc.Notes, c.Lag.Note)
			if n := planNote(src.Plan, c.Plan); n != "" {
				lc.Notes = append(lc.Notes, n)
			}
			lc.Notes = append(lc.Notes, LiveDifferenceNote)
			for _, x := range r.liveRows(c) {
				e := LiveEntryDoc{LimitID: x.limit.ID, Type: x.limit.Type.String(), Name: x.name,
					Recomputed: number(x.limit.Type, x.recomputed), Note: x.other}
				if x.ok {
					v := number(x.limit.Type, x.live.value)
					e.Live, e.UnpricedRows = &v, x.live.unpriced
				}
				lc.Counters = append(lc.Counters, e)
			}
		}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return err
	}
	return liveError
}

func instanceDoc(x *instance, seen bool) Instance {
	l := x.limit
	in := Instance{LimitID: l.ID, Type: l.Type.String(), Node: x.node, Seen: seen, Posture: "on"}
	switch {
	case l.Mode == govern.ModeOff:
		in.Posture = "off"
	case l.Mode == govern.ModeShadow:
		in.Posture = "shadow"
	case l.Enforce == govern.EnforceSoft:
		in.Posture = "soft"
	}
	d := map[string]string{}
	if x.dims.Model != "" {
		d["model"] = x.dims.Model
	}
	if x.dims.Provider != "" {
		d["provider"] = x.dims.Provider
	}
	if x.dims.Endpoint != "" {
		d["endpoint"] = x.dims.Endpoint
	}
	if len(d) > 0 {
		in.Dims = d
	}
	return in
}

func number(t govern.Type, v int64) json.Number { return json.Number(t.FormatAmount(v)) }

// fracNumber is frac as a JSON number, nil (null) with no ceiling.
func fracNumber(v, ceiling int64) *json.Number {
	if ceiling <= 0 {
		return nil
	}
	n := json.Number(frac(v, ceiling))
	return &n
}
