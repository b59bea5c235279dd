package runtime

import (
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// group is a set of tables sharing one change counter.
type group string

const (
	groupKeys    group = "keys"    // keys
	groupRuntime group = "runtime" // nodes, overrides
)

func (db *DB) version(tx *sql.Tx, g group) (string, error) {
	var n int64
	if err := tx.QueryRow(`SELECT n FROM versions WHERE grp = ?`, string(g)).Scan(&n); err != nil {
		return "", fmt.Errorf("reading the %s version: %w", g, err)
	}
	id, err := db.identity(tx)
	if err != nil {
		return "", fmt.Errorf("reading the %s version: %w", g, err)
	}
	return fmt.Sprintf("%s.%d", id, n), nil
}

// Keys returns the key table as the sync wire publishes it (hashes only,
// revoked keys included and marked), ordered by kid, with its version. The
// version changes exactly when a mint or a revocation commits.
func (db *DB) Keys() (version string, keys []syncwire.Key, err error) {
	err = db.read(func(tx *sql.Tx) error {
		if version, err = db.version(tx, groupKeys); err != nil {
			return err
		}
		rows, err := tx.Query(`SELECT kid, sha256, owner, scopes, revoked_at IS NOT NULL, name, expires_at, prev_sha256, prev_until FROM keys ORDER BY kid`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k syncwire.Key
			var scopes string
			var expires, prev, prevUntil sql.NullString
			if err := rows.Scan(&k.KID, &k.SHA256, &k.Owner, &scopes, &k.Revoked, &k.Name, &expires, &prev, &prevUntil); err != nil {
				return err
			}
			if k.ExpiresAt, err = unixOf(expires); err != nil {
				return fmt.Errorf("key %s: expires_at: %w", k.KID, err)
			}
			if prev.Valid {
				if k.PrevUntil, err = unixOf(prevUntil); err != nil {
					return fmt.Errorf("key %s: prev_until: %w", k.KID, err)
				}
				k.PrevSHA256 = prev.String
			}
			if k.Scopes, err = decodeScopes(scopes); err != nil {
				return fmt.Errorf("key %s: %w", k.KID, err)
			}
			keys = append(keys, k)
		}
		return rows.Err()
	})
	if err != nil {
		return "", nil, fmt.Errorf("runtime: read key table: %w", err)
	}
	return version, keys, nil
}

// Runtime returns the runtime plane govern arms with (API-created nodes in
// lexical order, overrides ordered by limit id then node) and its version.
// The version changes exactly when a node or override write commits.
func (db *DB) Runtime() (version string, rt govern.Runtime, err error) {
	err = db.read(func(tx *sql.Tx) error {
		if version, err = db.version(tx, groupRuntime); err != nil {
			return err
		}
		if rt.Nodes, err = nodeIDs(tx); err != nil {
			return err
		}
		ovs, err := listOverrides(tx)
		if err != nil {
			return err
		}
		for _, o := range ovs {
			rt.Overrides = append(rt.Overrides, govern.Override{LimitID: o.LimitID, Node: o.Node, Amount: o.Amount})
		}
		return nil
	})
	if err != nil {
		return "", govern.Runtime{}, fmt.Errorf("runtime: read runtime plane: %w", err)
	}
	sort.Strings(rt.Nodes)
	return version, rt, nil
}

// VersionSeq splits a keys or runtime version as Keys and Runtime return it
// (the database id, a dot, the change count) into its parts. ok is false
// for anything else, such as a version a filter reports that it made up.
// Counts of one database id only grow: a larger count carries every write
// a smaller one does.
func VersionSeq(v string) (id string, n int64, ok bool) {
	i := strings.LastIndexByte(v, '.')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(v[i+1:], 10, 64)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return v[:i], n, true
}

// unixOf is a stored time in Unix seconds, 0 for NULL (the sync wire's
// "never").
func unixOf(s sql.NullString) (int64, error) {
	t, err := parseNullTime(s)
	if err != nil || t == nil {
		return 0, err
	}
	return t.Unix(), nil
}
