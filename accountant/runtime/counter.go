package runtime

import (
	"database/sql"
	"fmt"
	"time"
)

// The kinds of counter adjustment.
const (
	// AdjustReset takes a counter back to zero: its amount is what the
	// counter held when the reset was taken.
	AdjustReset = "reset"
	// AdjustCredit gives back part of a counter: its amount, at most what
	// the counter held.
	AdjustCredit = "credit"
)

// Adjustment is a reset or a credit of one LedgerSettled counter (a
// budget's dollars, a quota's tokens or requests) in one calendar period:
// Amount is taken off the counter, in its unit (nanodollars for
// budget_usd), until the period ends. Before is what the counter held when
// the adjustment was taken. Adjustments are kept in governance.db with the
// runtime plane, so they survive a restart and the ledger's replay (which
// rebuilds the counter from the rows; the adjustment is taken off again),
// and reach every accountant of a fleet with the plane.
type Adjustment struct {
	Seq         int64     `json:"seq"`
	Kind        string    `json:"kind"`
	LimitID     string    `json:"limit_id"`
	Node        string    `json:"node"`
	Counter     string    `json:"counter"`
	Period      string    `json:"period"`
	PeriodStart time.Time `json:"period_start"`
	PeriodEnd   time.Time `json:"period_end"`
	Amount      int64     `json:"amount"`
	Before      int64     `json:"before"`
	At          time.Time `json:"at"`
	Who         string    `json:"who"`
}

// AdjustCounter records a, stamped by s, with its audit entry
// (counter.reset or counter.credit, under the instance's node), and drops
// the adjustments of periods that have ended. It returns a with its Seq.
func (db *DB) AdjustCounter(a Adjustment, s Stamp) (Adjustment, error) {
	op := "adjust counter"
	action := ActionCounterCredit
	switch a.Kind {
	case AdjustReset:
		action = ActionCounterReset
	case AdjustCredit:
	default:
		return Adjustment{}, refuse(Invalid, op, "kind %q is not reset or credit", a.Kind)
	}
	if a.Amount < 0 || a.Counter == "" || !a.PeriodEnd.After(a.PeriodStart) {
		return Adjustment{}, refuse(Invalid, op, "an adjustment needs a counter, a period and an amount of 0 or more")
	}
	a.At, a.Who = s.At.UTC(), s.Who
	a.PeriodStart, a.PeriodEnd = a.PeriodStart.UTC(), a.PeriodEnd.UTC()
	err := db.write(func(tx *sql.Tx) (audit, []group, error) {
		if _, err := tx.Exec(`DELETE FROM counter_adjustments WHERE period_end <= ?`, s.At.Unix()); err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s: %w", op, err)
		}
		res, err := tx.Exec(`INSERT INTO counter_adjustments (kind, limit_id, node, counter, unit, period_start, period_end, amount, before, at, who)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.Kind, a.LimitID, a.Node, a.Counter, a.Period, a.PeriodStart.Unix(), a.PeriodEnd.Unix(), a.Amount, a.Before, fmtTime(a.At), a.Who)
		if err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s: %w", op, err)
		}
		if a.Seq, err = res.LastInsertId(); err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s: %w", op, err)
		}
		return audit{Stamp: s, Action: action, Target: a.Counter, Node: a.Node, After: a}, nil, nil
	})
	if err != nil {
		return Adjustment{}, err
	}
	return a, nil
}

// Adjustments returns the adjustments of periods that have not ended at
// now, in the order they were taken.
func (db *DB) Adjustments(now time.Time) ([]Adjustment, error) {
	return readAll(db, "read counter adjustments", scanAdjustment, `SELECT seq, kind, limit_id, node, counter, unit, period_start, period_end, amount, before, at, who
		FROM counter_adjustments WHERE period_end > ? ORDER BY seq`, now.Unix())
}

func scanAdjustment(r scanner) (Adjustment, error) {
	var a Adjustment
	var start, end int64
	var at string
	if err := r.Scan(&a.Seq, &a.Kind, &a.LimitID, &a.Node, &a.Counter, &a.Period, &start, &end, &a.Amount, &a.Before, &at, &a.Who); err != nil {
		return Adjustment{}, err
	}
	a.PeriodStart, a.PeriodEnd = time.Unix(start, 0).UTC(), time.Unix(end, 0).UTC()
	var err error
	if a.At, err = parseTime(at); err != nil {
		return Adjustment{}, err
	}
	return a, nil
}
