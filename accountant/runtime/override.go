package runtime

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// Override is a per-node override as stored: it replaces the amount of one
// instance (limit, node) of a budget_usd, quota_tokens or quota_requests
// limit. Amount is a count, or nanodollars for budget_usd.
type Override struct {
	LimitID string    `json:"limit_id"`
	Node    string    `json:"node"`
	Amount  int64     `json:"amount"`
	SetBy   string    `json:"set_by"`
	SetAt   time.Time `json:"set_at"`
}

// PutOverride creates or replaces the override of one instance, after
// checking it against the armed plan with the rules govern applies when it
// arms: the limit is armed, its type takes overrides (seed 002's reason
// otherwise), it allows them, the amount is above zero and within the
// template's ceiling, and the limit has an instance at the node.
func (db *DB) PutOverride(p Plan, o govern.Override, s Stamp) (Override, error) {
	const op = "put override"
	if err := checkOverrideNode(op, o.Node); err != nil {
		return Override{}, err
	}
	l := p.Limit(o.LimitID)
	if l == nil {
		return Override{}, refuse(NotFound, op, "limit %q is not armed; GET /tt/api/v1/governance/limits lists the armed limit ids", o.LimitID)
	}
	if err := checkOverrideRule(op, l, o); err != nil {
		return Override{}, err
	}
	var out Override
	err := db.write(func(tx *sql.Tx) (audit, []group, error) {
		if err := checkInstance(op, l, o.Node, func(n string) (bool, error) { return instanceNode(tx, p, n) }); err != nil {
			return audit{}, nil, err
		}
		var a audit
		var err error
		out, a, err = putOverride(tx, op, o, s)
		return a, []group{groupRuntime}, err
	})
	if err != nil {
		return Override{}, err
	}
	return out, nil
}

// putOverride writes one checked override in tx and returns it with its
// audit entry.
func putOverride(tx *sql.Tx, op string, o govern.Override, s Stamp) (Override, audit, error) {
	out := Override{LimitID: o.LimitID, Node: o.Node, Amount: o.Amount, SetBy: s.Who, SetAt: s.At.UTC()}
	var before any
	prev, err := getOverride(tx, o.LimitID, o.Node)
	switch {
	case err == nil:
		before = prev
	case !errors.Is(err, sql.ErrNoRows):
		return Override{}, audit{}, fmt.Errorf("runtime: %s: %w", op, err)
	}
	_, err = tx.Exec(`INSERT INTO overrides (limit_id, node, amount, set_by, set_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (limit_id, node) DO UPDATE SET amount = excluded.amount, set_by = excluded.set_by, set_at = excluded.set_at`,
		o.LimitID, o.Node, o.Amount, s.Who, fmtTime(s.At))
	if err != nil {
		return Override{}, audit{}, fmt.Errorf("runtime: %s: %w", op, err)
	}
	return out, audit{Stamp: s, Action: ActionOverridePut, Target: o.LimitID + "@" + o.Node, Node: o.Node, Before: before, After: out}, nil
}

// instanceNode reports whether a node a limit may have an instance at
// exists: a node of the armed tree or the runtime plane, or the leaf of a
// key that is minted, owned by the leaf's owner, and not revoked.
func instanceNode(tx *sql.Tx, p Plan, n string) (bool, error) {
	owner, kid, ok := govern.SplitKeyLeaf(n)
	if !ok {
		return treeNode(tx, p, n)
	}
	k, err := getKey(tx, kid)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return k.Owner == owner && k.RevokedAt == nil, nil
}

// DeleteOverride removes an override; the instance returns to the
// template's amount at the filters' next sync.
func (db *DB) DeleteOverride(limitID, node string, s Stamp) (Override, error) {
	const op = "delete override"
	if err := checkOverrideNode(op, node); err != nil {
		return Override{}, err
	}
	var prev Override
	err := db.write(func(tx *sql.Tx) (audit, []group, error) {
		var err error
		prev, err = getOverride(tx, limitID, node)
		if errors.Is(err, sql.ErrNoRows) {
			return audit{}, nil, refuse(NotFound, op, "no override of limit %q at node %q", limitID, node)
		}
		if err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s: %w", op, err)
		}
		if _, err := tx.Exec(`DELETE FROM overrides WHERE limit_id = ? AND node = ?`, limitID, node); err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s: %w", op, err)
		}
		return audit{Stamp: s, Action: ActionOverrideDelete, Target: limitID + "@" + node, Node: node, Before: prev}, []group{groupRuntime}, nil
	})
	if err != nil {
		return Override{}, err
	}
	return prev, nil
}

// Overrides returns every override whose node is root or lies below it
// (all of them when root is empty), ordered by limit id then node.
func (db *DB) Overrides(root string) ([]Override, error) {
	var out []Override
	err := db.read(func(tx *sql.Tx) error {
		all, err := listOverrides(tx)
		for _, o := range all {
			if root == "" || InSubtree(root, o.Node) {
				out = append(out, o)
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: list overrides: %w", err)
	}
	return out, nil
}

// checkOverrideNode charset-checks an override's node; __global is the one
// id outside the charset a limit can be pinned to, and a key's node
// (<owner>/key:<kid>, a key-level template's instance) the one whose last
// segment may hold capitals.
func checkOverrideNode(op, node string) error {
	if node == govern.Global {
		return nil
	}
	if _, _, ok := govern.SplitKeyLeaf(node); ok {
		if err := govern.ValidKeyLeaf(node); err != nil {
			return refuse(Invalid, op, "node %q is not a valid key node: %v", node, err)
		}
		return nil
	}
	return checkNodeID(op, "node", node)
}

// checkOverrideRule applies the rules that need only the limit.
func checkOverrideRule(op string, l *govern.Limit, o govern.Override) error {
	if !l.Type.Overridable() {
		return refuse(Invalid, op, "%s", govern.OverrideRefusal(l.Type))
	}
	if !l.OverrideAllow {
		return refuse(Invalid, op, "limit %q does not allow per-node overrides; set override: { allow: true } on it in the config and reload", l.ID)
	}
	if o.Amount <= 0 {
		return refuse(Invalid, op, "override amount %s of limit %q must be greater than zero (zero or less would switch the cap off rather than lower it); delete the override to return to the template's amount", amountText(l, o.Amount), l.ID)
	}
	if l.OverrideMax >= 0 && o.Amount > l.OverrideMax {
		return refuse(Invalid, op, "override amount %s of limit %q exceeds its ceiling %s (%s); raise the ceiling in the config first", amountText(l, o.Amount), l.ID, amountText(l, l.OverrideMax), ceilingKey(l))
	}
	return nil
}

// checkInstance refuses a node the limit has no instance at: a pinned
// limit has one node; a template has every tree node at its level.
// inTree says whether a node is in the tree.
func checkInstance(op string, l *govern.Limit, node string, inTree func(string) (bool, error)) error {
	if l.Node != "" {
		if node != l.Node {
			return refuse(Invalid, op, "limit %q is pinned to node %q and has no instance at node %q", l.ID, l.Node, node)
		}
		return nil
	}
	if node == govern.Global {
		return refuse(Invalid, op, "limit %q is a template at level %q and has no instance at node %q", l.ID, l.Level, node)
	}
	if kind, _ := level(node); kind != l.Level {
		if l.Level == govern.LevelKey {
			return refuse(Invalid, op, "limit %q is a template at level \"key\" and has no instance at the %s node %q; name a key's node, <owner>/key:<kid> (keys list shows the kids)", l.ID, kind, node)
		}
		return refuse(Invalid, op, "limit %q is a template at level %q and has no instance at the %s node %q; name %s %s node", l.ID, l.Level, kind, node, article(l.Level), l.Level)
	}
	ok, err := inTree(node)
	if err != nil {
		return fmt.Errorf("runtime: %s: %w", op, err)
	}
	if !ok {
		if l.Level == govern.LevelKey {
			return refuse(Invalid, op, "node %q is not the node of a live key: no key with that kid is owned by that node, or it was revoked; keys list shows the keys and their owners", node)
		}
		return refuse(Invalid, op, "node %q is not a node of the tenancy tree; declare it in the config's tenants or create it with POST /tt/api/v1/nodes first", node)
	}
	return nil
}

// CheckOverride checks a stored override against a plan with the rules
// PutOverride applies, tree membership read from the plan alone. It tells
// the management API why the armed plan does not hold an override written
// under an earlier config; nil when the plan accepts it.
func CheckOverride(p Plan, o govern.Override) *Error {
	const op = "check override"
	if err := checkOverrideNode(op, o.Node); err != nil {
		return asRefusal(op, err)
	}
	l := p.Limit(o.LimitID)
	if l == nil {
		return refuse(NotFound, op, "limit %q is not in the armed plan; delete the override, or restore the limit in the config", o.LimitID)
	}
	if err := checkOverrideRule(op, l, o); err != nil {
		return asRefusal(op, err)
	}
	// A key's node is the runtime plane's to vouch for; the plan knows
	// only its shape.
	inPlan := func(n string) (bool, error) {
		if _, _, ok := govern.SplitKeyLeaf(n); ok {
			return true, nil
		}
		return p.TreeNode(n), nil
	}
	if err := checkInstance(op, l, o.Node, inPlan); err != nil {
		return asRefusal(op, err)
	}
	return nil
}

func ceilingKey(l *govern.Limit) string {
	if l.Type == govern.BudgetUSD {
		return "override.max_amount_usd"
	}
	return "override.max_amount"
}

// amountText renders an amount in the limit's unit: dollars for
// budget_usd, a plain count otherwise.
func amountText(l *govern.Limit, n int64) string {
	if l.Type != govern.BudgetUSD {
		return strconv.FormatInt(n, 10)
	}
	if n < 0 && n != math.MinInt64 {
		return "-$" + config.USDFromNanos(-n).String()
	}
	return "$" + config.USDFromNanos(n).String()
}

// article is the indefinite article before a word: "an org node", "a team
// node".
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func getOverride(tx *sql.Tx, limitID, node string) (Override, error) {
	return scanOverride(tx.QueryRow(`SELECT limit_id, node, amount, set_by, set_at FROM overrides WHERE limit_id = ? AND node = ?`, limitID, node))
}

func listOverrides(tx *sql.Tx) ([]Override, error) {
	return queryAll(tx, scanOverride, `SELECT limit_id, node, amount, set_by, set_at FROM overrides ORDER BY limit_id, node`)
}

func scanOverride(r scanner) (Override, error) {
	var o Override
	var at string
	if err := r.Scan(&o.LimitID, &o.Node, &o.Amount, &o.SetBy, &at); err != nil {
		return Override{}, err
	}
	t, err := parseTime(at)
	if err != nil {
		return Override{}, err
	}
	o.SetAt = t
	return o, nil
}
