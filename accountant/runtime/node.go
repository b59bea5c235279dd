package runtime

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
)

// Node is a tree node created through the management API.
type Node struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
}

// checkNodeID refuses a node id outside seed 004's charset.
func checkNodeID(op, what, id string) error {
	if err := govern.ValidNodeID(id); err != nil {
		return refuse(Invalid, op, "%s %q is not a valid node id: %v", what, id, err)
	}
	return nil
}

// CreateNode adds a node to the runtime plane. The id must pass
// govern.ValidNodeID, follow the tree's shape (org:<id>, then team:<id>,
// then user:<id>) and hang from a node that exists, in the config or in the
// runtime plane. A node the config already declares is refused as a
// Conflict, never skipped: the config's node is the one in force.
func (db *DB) CreateNode(p Plan, id string, s Stamp) (Node, error) {
	const op = "create node"
	if err := checkNodeID(op, "node", id); err != nil {
		return Node{}, err
	}
	kind, depth := level(id)
	if depth > len(levels) {
		return Node{}, refuse(Invalid, op, "node %q is deeper than a user; the tree is org:<id>/team:<id>/user:<id>, and a user's keys are minted with keys mint --owner", id)
	}
	if kind != levels[depth-1] {
		return Node{}, refuse(Invalid, op, "node %q ends in a %q segment at depth %d; the tree is org:<id>/team:<id>/user:<id>, so write %s:<id> there", id, kind, depth, levels[depth-1])
	}
	if p.ConfigNode(id) {
		return Node{}, refuse(Conflict, op, "node %q is declared in the config's tenants and is already in force; no runtime node was created", id)
	}
	n := Node{ID: id, CreatedAt: s.At.UTC(), CreatedBy: s.Who}
	err := db.write(func(tx *sql.Tx) (audit, []group, error) {
		if ok, err := runtimeNode(tx, id); err != nil {
			return audit{}, nil, err
		} else if ok {
			return audit{}, nil, refuse(Conflict, op, "node %q already exists in the runtime plane", id)
		}
		if up := parent(id); up != "" && !p.ConfigNode(up) {
			ok, err := runtimeNode(tx, up)
			if err != nil {
				return audit{}, nil, err
			}
			if !ok {
				return audit{}, nil, refuse(Invalid, op, "parent node %q of %q does not exist; create %q first", up, id, up)
			}
		}
		if _, err := tx.Exec(`INSERT INTO nodes (id, created_at, created_by) VALUES (?, ?, ?)`, id, fmtTime(s.At), s.Who); err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s %q: %w", op, id, err)
		}
		return audit{Stamp: s, Action: ActionNodeCreate, Target: id, Node: id, After: n}, []group{groupRuntime}, nil
	})
	if err != nil {
		return Node{}, err
	}
	return n, nil
}

// DeleteNode removes a runtime node that nothing uses: no child node, no
// key that is not revoked, no override and no delegated admin that is not
// revoked may name it.
func (db *DB) DeleteNode(id string, s Stamp) (Node, error) {
	const op = "delete node"
	if err := checkNodeID(op, "node", id); err != nil {
		return Node{}, err
	}
	var n Node
	err := db.write(func(tx *sql.Tx) (audit, []group, error) {
		var err error
		n, err = getNode(tx, id)
		if errors.Is(err, sql.ErrNoRows) {
			return audit{}, nil, refuse(NotFound, op, "no runtime node %q; a node declared in the config is removed by editing its tenants", id)
		}
		if err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s %q: %w", op, id, err)
		}
		var children, keys, overrides, admins int
		err = tx.QueryRow(`SELECT
			(SELECT count(*) FROM nodes WHERE substr(id, 1, ?) = ?),
			(SELECT count(*) FROM keys WHERE owner = ? AND revoked_at IS NULL),
			(SELECT count(*) FROM overrides WHERE node = ?),
			(SELECT count(*) FROM admins WHERE scope = ? AND revoked_at IS NULL)`,
			len(id)+1, id+"/", id, id, id).Scan(&children, &keys, &overrides, &admins)
		if err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s %q: %w", op, id, err)
		}
		if uses := usage([]use{{children, "child node"}, {keys, "live key"}, {overrides, "override"}, {admins, "delegated admin"}}); uses != "" {
			return audit{}, nil, refuse(Conflict, op, "node %q is still in use (%s); delete its child nodes, revoke its keys and admins and delete its overrides first", id, uses)
		}
		if _, err := tx.Exec(`DELETE FROM nodes WHERE id = ?`, id); err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s %q: %w", op, id, err)
		}
		return audit{Stamp: s, Action: ActionNodeDelete, Target: id, Node: id, Before: n}, []group{groupRuntime}, nil
	})
	if err != nil {
		return Node{}, err
	}
	return n, nil
}

// use counts one kind of thing that still names a node.
type use struct {
	n    int
	what string
}

// usage renders counts as "1 live key, 2 overrides", skipping zeros.
func usage(uses []use) string {
	var parts []string
	for _, u := range uses {
		switch {
		case u.n == 1:
			parts = append(parts, "1 "+u.what)
		case u.n > 1:
			parts = append(parts, fmt.Sprintf("%d %ss", u.n, u.what))
		}
	}
	return strings.Join(parts, ", ")
}

// Nodes returns the runtime nodes in lexical order.
func (db *DB) Nodes() ([]Node, error) {
	return readAll(db, "list nodes", scanNode, `SELECT id, created_at, created_by FROM nodes ORDER BY id`)
}

// HasNode reports whether id is a runtime node.
func (db *DB) HasNode(id string) (bool, error) {
	var ok bool
	err := db.read(func(tx *sql.Tx) (err error) {
		ok, err = runtimeNode(tx, id)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("runtime: look up node %q: %w", id, err)
	}
	return ok, nil
}

type scanner interface{ Scan(...any) error }

func scanNode(r scanner) (Node, error) {
	var n Node
	var at string
	if err := r.Scan(&n.ID, &at, &n.CreatedBy); err != nil {
		return Node{}, err
	}
	t, err := parseTime(at)
	if err != nil {
		return Node{}, err
	}
	n.CreatedAt = t
	return n, nil
}

func getNode(tx *sql.Tx, id string) (Node, error) {
	return scanNode(tx.QueryRow(`SELECT id, created_at, created_by FROM nodes WHERE id = ?`, id))
}

func runtimeNode(tx *sql.Tx, id string) (bool, error) {
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM nodes WHERE id = ?`, id).Scan(&n); err != nil {
		return false, err
	}
	return n > 0, nil
}

func nodeIDs(tx *sql.Tx) ([]string, error) {
	return queryAll(tx, scanString, `SELECT id FROM nodes ORDER BY id`)
}

// treeNode reports whether id is a node of the tree: armed now, or created
// in the runtime plane since the plan was armed.
func treeNode(tx *sql.Tx, p Plan, id string) (bool, error) {
	if p.TreeNode(id) {
		return true, nil
	}
	return runtimeNode(tx, id)
}
