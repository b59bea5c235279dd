package runtime

import (
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// Key is a minted virtual key as the management API shows it: never the key
// itself, never its hash.
type Key struct {
	KID       string      `json:"kid"`
	Owner     string      `json:"owner"`
	Scopes    vkey.Scopes `json:"scopes"`
	CreatedAt time.Time   `json:"created_at"`
	CreatedBy string      `json:"created_by"`
	RevokedAt *time.Time  `json:"revoked_at"`
	RevokedBy string      `json:"revoked_by,omitempty"`
}

// MintKey mints a virtual key owned by owner, a node of the armed tree (the
// config's tenants or the runtime plane), and stores only its SHA-256. The
// key is returned here and never again.
func (db *DB) MintKey(p Plan, owner string, scopes vkey.Scopes, s Stamp) (key string, k Key, err error) {
	key, k, _, err = db.MintKeyWithOverrides(p, owner, scopes, nil, s)
	return key, k, err
}

// MintKeyWithOverrides mints a key as MintKey does and, in the same
// transaction, sets the key's own overrides: each names a key-level
// template (attach: { level: key }) of a spend or quota type and an
// amount within its ceiling, and applies at the key's node
// (<owner>/key:<kid>). Each is checked by PutOverride's rules and audited
// as an override.put after the key.mint; one that fails refuses the whole
// mint, so no key is left without the limits it was minted with.
func (db *DB) MintKeyWithOverrides(p Plan, owner string, scopes vkey.Scopes, limits []govern.Override, s Stamp) (key string, k Key, set []Override, err error) {
	const op = "mint key"
	if err := checkNodeID(op, "owner", owner); err != nil {
		return "", Key{}, nil, err
	}
	if err := checkScopes(op, scopes); err != nil {
		return "", Key{}, nil, err
	}
	seen := map[string]bool{}
	for _, o := range limits {
		l := p.Limit(o.LimitID)
		switch {
		case l == nil:
			return "", Key{}, nil, refuse(NotFound, op, "limit %q is not armed; GET /tt/api/v1/governance/limits lists the armed limit ids", o.LimitID)
		case l.Level != govern.LevelKey:
			return "", Key{}, nil, refuse(Invalid, op, "limit %q is not a key-level template (attach: { level: key }), so a key has no instance of it to override; set a node's override with PUT /tt/api/v1/overrides", l.ID)
		case seen[l.ID]:
			return "", Key{}, nil, refuse(Invalid, op, "limit %q is named twice; give each limit one amount", l.ID)
		}
		seen[l.ID] = true
		if err := checkOverrideRule(op, l, o); err != nil {
			return "", Key{}, nil, err
		}
	}
	enc, err := json.Marshal(scopes)
	if err != nil {
		return "", Key{}, nil, fmt.Errorf("runtime: %s: encoding scopes: %w", op, err)
	}
	key, kid, err := vkey.Mint(rand.Reader)
	if err != nil {
		return "", Key{}, nil, fmt.Errorf("runtime: %s: %w", op, err)
	}
	k = Key{KID: kid, Owner: owner, Scopes: scopes, CreatedAt: s.At.UTC(), CreatedBy: s.Who}
	err = db.writeAll(func(tx *sql.Tx) ([]audit, []group, error) {
		ok, err := treeNode(tx, p, owner)
		if err != nil {
			return nil, nil, fmt.Errorf("runtime: %s: %w", op, err)
		}
		if !ok {
			return nil, nil, refuse(Invalid, op, "owner %q is not a node of the tenancy tree; declare it in the config's tenants or create it with POST /tt/api/v1/nodes first", owner)
		}
		_, err = tx.Exec(`INSERT INTO keys (kid, sha256, owner, scopes, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?)`,
			kid, vkey.Hash(key), owner, string(enc), fmtTime(s.At), s.Who)
		if err != nil {
			return nil, nil, fmt.Errorf("runtime: %s: %w", op, err)
		}
		audits := []audit{{Stamp: s, Action: ActionKeyMint, Target: kid, Node: owner, After: k}}
		groups := []group{groupKeys}
		set = set[:0]
		for _, o := range limits {
			o.Node = govern.KeyLeaf(owner, kid)
			out, a, err := putOverride(tx, op, o, s)
			if err != nil {
				return nil, nil, err
			}
			set = append(set, out)
			audits = append(audits, a)
		}
		if len(limits) > 0 {
			groups = append(groups, groupRuntime)
		}
		return audits, groups, nil
	})
	if err != nil {
		return "", Key{}, nil, err
	}
	return key, k, set, nil
}

// RevokeKey revokes a key. The row stays, marked revoked, so the filter
// refuses the key by name and the audit log keeps its history.
func (db *DB) RevokeKey(kid string, s Stamp) (Key, error) {
	const op = "revoke key"
	if !vkey.ValidKID(kid) {
		return Key{}, refuse(Invalid, op, "%q is not a kid (expected vk_ followed by 12 letters and digits)", kid)
	}
	var k Key
	err := db.write(func(tx *sql.Tx) (audit, []group, error) {
		before, err := getKey(tx, kid)
		if errors.Is(err, sql.ErrNoRows) {
			return audit{}, nil, refuse(NotFound, op, "no key %s; keys list shows the minted kids", kid)
		}
		if err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s %s: %w", op, kid, err)
		}
		if before.RevokedAt != nil {
			return audit{}, nil, refuse(Conflict, op, "key %s was already revoked at %s by %s", kid, before.RevokedAt.Format(time.RFC3339), before.RevokedBy)
		}
		if _, err := tx.Exec(`UPDATE keys SET revoked_at = ?, revoked_by = ? WHERE kid = ?`, fmtTime(s.At), s.Who, kid); err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s %s: %w", op, kid, err)
		}
		k = before
		at := s.At.UTC()
		k.RevokedAt, k.RevokedBy = &at, s.Who
		return audit{Stamp: s, Action: ActionKeyRevoke, Target: kid, Node: k.Owner, Before: before, After: k}, []group{groupKeys}, nil
	})
	if err != nil {
		return Key{}, err
	}
	return k, nil
}

// Key returns one key by kid; a Kind NotFound *Error when there is none.
func (db *DB) Key(kid string) (Key, error) {
	const op = "get key"
	if !vkey.ValidKID(kid) {
		return Key{}, refuse(Invalid, op, "%q is not a kid (expected vk_ followed by 12 letters and digits)", kid)
	}
	var k Key
	err := db.read(func(tx *sql.Tx) (err error) {
		k, err = getKey(tx, kid)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Key{}, refuse(NotFound, op, "no key %s; keys list shows the minted kids", kid)
	}
	if err != nil {
		return Key{}, fmt.Errorf("runtime: %s %s: %w", op, kid, err)
	}
	return k, nil
}

// ListKeys returns the keys whose owner is root or lies below it (every key
// when root is empty), ordered by owner then kid.
func (db *DB) ListKeys(root string) ([]Key, error) {
	var out []Key
	err := db.read(func(tx *sql.Tx) error {
		rows, err := tx.Query(`SELECT `+keyColumns+` FROM keys
			WHERE ? = '' OR owner = ? OR substr(owner, 1, ?) = ? ORDER BY owner, kid`,
			root, root, len(root)+1, root+"/")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			k, err := scanKey(rows)
			if err != nil {
				return err
			}
			out = append(out, k)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: list keys: %w", err)
	}
	return out, nil
}

const keyColumns = `kid, owner, scopes, created_at, created_by, revoked_at, revoked_by`

func getKey(tx *sql.Tx, kid string) (Key, error) {
	return scanKey(tx.QueryRow(`SELECT `+keyColumns+` FROM keys WHERE kid = ?`, kid))
}

func scanKey(r scanner) (Key, error) {
	var k Key
	var scopes, created string
	var revokedAt, revokedBy sql.NullString
	if err := r.Scan(&k.KID, &k.Owner, &scopes, &created, &k.CreatedBy, &revokedAt, &revokedBy); err != nil {
		return Key{}, err
	}
	var err error
	if k.Scopes, err = decodeScopes(scopes); err != nil {
		return Key{}, fmt.Errorf("key %s: %w", k.KID, err)
	}
	if k.CreatedAt, err = parseTime(created); err != nil {
		return Key{}, err
	}
	if k.RevokedAt, err = parseNullTime(revokedAt); err != nil {
		return Key{}, err
	}
	k.RevokedBy = revokedBy.String
	return k, nil
}

// checkScopes refuses scopes that would match no request and lock the key
// out silently (govern.ScopeProblems), naming the first problem.
func checkScopes(op string, sc vkey.Scopes) error {
	if ps := govern.ScopeProblems(sc); len(ps) > 0 {
		return refuse(Invalid, op, "scopes.%s: %s", ps[0].Field, ps[0].Message)
	}
	return nil
}

// ScopeWarnings says what a mint cannot check: a provider scope other than
// the names the gateway infers from the path matches only when the
// filter's providers mapping (its plugin configuration, which the
// accountant does not see) gives that exact name.
func ScopeWarnings(sc vkey.Scopes) []string {
	var out []string
	for _, v := range sc.Providers {
		if !slices.Contains(govern.InferredProviders, v) {
			out = append(out, fmt.Sprintf("provider %q is not one the gateway infers from the path (%s): the key reaches it only if the filter's providers mapping names a provider exactly %q",
				v, strings.Join(govern.InferredProviders, ", "), v))
		}
	}
	return out
}

func decodeScopes(s string) (vkey.Scopes, error) {
	var sc vkey.Scopes
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		return vkey.Scopes{}, fmt.Errorf("decoding scopes: %w", err)
	}
	return sc, nil
}
