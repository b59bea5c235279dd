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
	"unicode"
	"unicode/utf8"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// Key is a minted virtual key as the management API shows it: never the key
// itself, never its hash.
type Key struct {
	KID string `json:"kid"`
	// Name is unique among the owner's live keys; "" when the key has none.
	Name      string      `json:"name"`
	Owner     string      `json:"owner"`
	Scopes    vkey.Scopes `json:"scopes"`
	CreatedAt time.Time   `json:"created_at"`
	CreatedBy string      `json:"created_by"`
	// ExpiresAt is when the key stops authenticating; nil never.
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	RevokedBy string     `json:"revoked_by,omitempty"`
	// RotatedAt is the key's last rotation; PreviousUntil when the secret
	// it had before stops authenticating.
	RotatedAt     *time.Time `json:"rotated_at,omitempty"`
	RotatedBy     string     `json:"rotated_by,omitempty"`
	PreviousUntil *time.Time `json:"previous_secret_until,omitempty"`
}

// State is "revoked", "expired" or "live" at now.
func (k Key) State(now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return "expired"
	}
	return "live"
}

// KeySpec is what a key is minted with. A zero ExpiresAt never expires;
// Overrides are the key's own amounts of key-level templates.
type KeySpec struct {
	Owner     string
	Name      string
	Scopes    vkey.Scopes
	ExpiresAt time.Time
	Overrides []govern.Override
}

// MaxKeyName is the longest key name, in bytes.
const MaxKeyName = 64

// Rotation grace periods: how long the secret a key had before a rotation
// keeps authenticating, so the deployments using it can move to the new
// one without an outage (RATIONALE.md#why-a-rotated-keys-old-secret-lives-a-day).
const (
	DefaultRotationGrace = 24 * time.Hour
	MaxRotationGrace     = 7 * 24 * time.Hour
)

// MintKey mints a virtual key owned by owner, a node of the armed tree (the
// config's tenants or the runtime plane), and stores only its SHA-256. The
// key is returned here and never again.
func (db *DB) MintKey(p Plan, owner string, scopes vkey.Scopes, s Stamp) (key string, k Key, err error) {
	key, k, _, err = db.Mint(p, KeySpec{Owner: owner, Scopes: scopes}, s)
	return key, k, err
}

// MintKeyWithOverrides is Mint of a key with no name and no expiry.
func (db *DB) MintKeyWithOverrides(p Plan, owner string, scopes vkey.Scopes, limits []govern.Override, s Stamp) (key string, k Key, set []Override, err error) {
	return db.Mint(p, KeySpec{Owner: owner, Scopes: scopes, Overrides: limits}, s)
}

// Mint mints a key as spec says and, in the same transaction, sets the
// key's own overrides: each names a key-level template (attach: { level:
// key }) of a spend or quota type and an amount within its ceiling, and
// applies at the key's node (<owner>/key:<kid>). Each is checked by
// PutOverride's rules and audited as an override.put after the key.mint;
// one that fails refuses the whole mint, so no key is left without the
// limits it was minted with. A name must be free among the owner's live
// keys; an expiry must lie ahead of s.At.
func (db *DB) Mint(p Plan, spec KeySpec, s Stamp) (key string, k Key, set []Override, err error) {
	const op = "mint key"
	owner, scopes, limits := spec.Owner, spec.Scopes, spec.Overrides
	if err := checkNodeID(op, "owner", owner); err != nil {
		return "", Key{}, nil, err
	}
	if err := checkKeyName(op, spec.Name); err != nil {
		return "", Key{}, nil, err
	}
	if err := checkExpiry(op, spec.ExpiresAt, s.At); err != nil {
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
	k = Key{KID: kid, Name: spec.Name, Owner: owner, Scopes: scopes, CreatedAt: s.At.UTC(), CreatedBy: s.Who}
	var expires any
	if !spec.ExpiresAt.IsZero() {
		at := spec.ExpiresAt.UTC().Truncate(time.Second)
		k.ExpiresAt = &at
		expires = fmtTime(at)
	}
	err = db.writeAll(func(tx *sql.Tx) ([]audit, []group, error) {
		ok, err := treeNode(tx, p, owner)
		if err != nil {
			return nil, nil, fmt.Errorf("runtime: %s: %w", op, err)
		}
		if !ok {
			return nil, nil, refuse(Invalid, op, "owner %q is not a node of the tenancy tree; declare it in the config's tenants or create it with POST /tt/api/v1/nodes first", owner)
		}
		if err := nameFree(tx, op, owner, spec.Name, ""); err != nil {
			return nil, nil, err
		}
		_, err = tx.Exec(`INSERT INTO keys (kid, sha256, owner, scopes, created_at, created_by, name, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			kid, vkey.Hash(key), owner, string(enc), fmtTime(s.At), s.Who, spec.Name, expires)
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

// checkKeyName refuses a name that is too long, holds a control
// character or is not UTF-8, or starts or ends with a space. "" is no
// name.
func checkKeyName(op, name string) error {
	switch {
	case name == "":
		return nil
	case len(name) > MaxKeyName:
		return refuse(Invalid, op, "name %q is %d bytes; a key name is at most %d", name, len(name), MaxKeyName)
	case !utf8.ValidString(name):
		return refuse(Invalid, op, "name %q is not UTF-8 text", name)
	case strings.TrimSpace(name) != name:
		return refuse(Invalid, op, "name %q starts or ends with a space; send it without", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return refuse(Invalid, op, "name %q holds a control character; use letters, digits, spaces and punctuation", name)
		}
	}
	return nil
}

// checkExpiry refuses an expiry that is not after now (zero is none).
func checkExpiry(op string, at, now time.Time) error {
	if !at.IsZero() && !at.After(now) {
		return refuse(Invalid, op, "expires_at %s is not in the future (it is now %s); give a later time, or none for a key that never expires",
			at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// nameFree refuses name when another live key of owner (not kid) holds it.
func nameFree(tx *sql.Tx, op, owner, name, kid string) error {
	if name == "" {
		return nil
	}
	var other string
	err := tx.QueryRow(`SELECT kid FROM keys WHERE owner = ? AND name = ? AND revoked_at IS NULL AND kid != ?`, owner, name, kid).Scan(&other)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("runtime: %s: %w", op, err)
	}
	return refuse(Conflict, op, "owner %q already has a live key named %q (%s); pick another name, or revoke %s first", owner, name, other, other)
}

// RotateKey gives the key kid a new secret under the same kid, so it
// keeps its owner, scopes, limits, counters and history. The secret it
// had keeps authenticating for grace (at most MaxRotationGrace; 0 ends it
// at once), and any secret before that stops now. expiresAt, when not
// nil, is the rotated key's new expiry (a zero time: never); nil keeps
// the current one, which must not have passed. The new key is returned
// here and never again.
func (db *DB) RotateKey(kid string, grace time.Duration, expiresAt *time.Time, s Stamp) (key string, k Key, err error) {
	const op = "rotate key"
	if !vkey.ValidKID(kid) {
		return "", Key{}, refuse(Invalid, op, "%q is not a kid (expected vk_ followed by 12 letters and digits)", kid)
	}
	if grace < 0 || grace > MaxRotationGrace {
		return "", Key{}, refuse(Invalid, op, "grace %s is out of range; the previous secret may stay valid from 0 to %s (default %s)", grace, MaxRotationGrace, DefaultRotationGrace)
	}
	if expiresAt != nil {
		if err := checkExpiry(op, *expiresAt, s.At); err != nil {
			return "", Key{}, err
		}
	}
	key, err = vkey.Rotate(rand.Reader, kid)
	if err != nil {
		return "", Key{}, fmt.Errorf("runtime: %s: %w", op, err)
	}
	err = db.write(func(tx *sql.Tx) (audit, []group, error) {
		before, err := keyIn(tx, op, kid)
		if err != nil {
			return audit{}, nil, err
		}
		if before.RevokedAt != nil {
			return audit{}, nil, refuse(Conflict, op, "key %s was revoked at %s by %s; a revoked key stays revoked: mint a new one", kid, before.RevokedAt.Format(time.RFC3339), before.RevokedBy)
		}
		k = before
		if expiresAt != nil {
			k.ExpiresAt = nil
			if !expiresAt.IsZero() {
				at := expiresAt.UTC().Truncate(time.Second)
				k.ExpiresAt = &at
			}
		} else if k.ExpiresAt != nil && !s.At.Before(*k.ExpiresAt) {
			return audit{}, nil, refuse(Invalid, op, "key %s expired at %s; give the rotated key a new expiry (expires_at or expires_in, or --expires), or none to never expire",
				kid, k.ExpiresAt.UTC().Format(time.RFC3339))
		}
		var prevHash string
		if err := tx.QueryRow(`SELECT sha256 FROM keys WHERE kid = ?`, kid).Scan(&prevHash); err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s %s: %w", op, kid, err)
		}
		at := s.At.UTC()
		until := at.Add(grace).Truncate(time.Second)
		k.RotatedAt, k.RotatedBy, k.PreviousUntil = &at, s.Who, &until
		var prev, prevUntil, expires any
		if grace > 0 {
			prev, prevUntil = prevHash, fmtTime(until)
		} else {
			k.PreviousUntil = nil
		}
		if k.ExpiresAt != nil {
			expires = fmtTime(*k.ExpiresAt)
		}
		if _, err := tx.Exec(`UPDATE keys SET sha256 = ?, prev_sha256 = ?, prev_until = ?, rotated_at = ?, rotated_by = ?, expires_at = ? WHERE kid = ?`,
			vkey.Hash(key), prev, prevUntil, fmtTime(at), s.Who, expires, kid); err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s %s: %w", op, kid, err)
		}
		return audit{Stamp: s, Action: ActionKeyRotate, Target: kid, Node: k.Owner, Before: before, After: k}, []group{groupKeys}, nil
	})
	if err != nil {
		return "", Key{}, err
	}
	return key, k, nil
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
		before, err := keyIn(tx, op, kid)
		if err != nil {
			return audit{}, nil, err
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
	return readAll(db, "list keys", scanKey, `SELECT `+keyColumns+` FROM keys
		WHERE ? = '' OR owner = ? OR substr(owner, 1, ?) = ? ORDER BY owner, kid`,
		root, root, len(root)+1, root+"/")
}

// KeyNames returns the names of the keys kids that have one, by kid
// (unknown kids and unnamed keys are left out).
func (db *DB) KeyNames(kids []string) (map[string]string, error) {
	out := map[string]string{}
	err := db.read(func(tx *sql.Tx) error {
		for len(kids) > 0 {
			n := min(len(kids), 500)
			args := make([]any, n)
			for i, k := range kids[:n] {
				args[i] = k
			}
			rows, err := tx.Query(`SELECT kid, name FROM keys WHERE name != '' AND kid IN (?`+strings.Repeat(", ?", n-1)+`)`, args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var kid, name string
				if err := rows.Scan(&kid, &name); err != nil {
					rows.Close()
					return err
				}
				out[kid] = name
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			kids = kids[n:]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: read key names: %w", err)
	}
	return out, nil
}

const keyColumns = `kid, owner, scopes, created_at, created_by, revoked_at, revoked_by, name, expires_at, rotated_at, rotated_by, prev_until`

// keyIn reads key kid for op: a Kind NotFound *Error when there is none.
func keyIn(tx *sql.Tx, op, kid string) (Key, error) {
	k, err := getKey(tx, kid)
	if errors.Is(err, sql.ErrNoRows) {
		return Key{}, refuse(NotFound, op, "no key %s; keys list shows the minted kids", kid)
	}
	if err != nil {
		return Key{}, fmt.Errorf("runtime: %s %s: %w", op, kid, err)
	}
	return k, nil
}

func getKey(tx *sql.Tx, kid string) (Key, error) {
	return scanKey(tx.QueryRow(`SELECT `+keyColumns+` FROM keys WHERE kid = ?`, kid))
}

func scanKey(r scanner) (Key, error) {
	var k Key
	var scopes, created string
	var revokedAt, revokedBy, expiresAt, rotatedAt, rotatedBy, prevUntil sql.NullString
	if err := r.Scan(&k.KID, &k.Owner, &scopes, &created, &k.CreatedBy, &revokedAt, &revokedBy, &k.Name, &expiresAt, &rotatedAt, &rotatedBy, &prevUntil); err != nil {
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
	if k.ExpiresAt, err = parseNullTime(expiresAt); err != nil {
		return Key{}, err
	}
	if k.RotatedAt, err = parseNullTime(rotatedAt); err != nil {
		return Key{}, err
	}
	k.RotatedBy = rotatedBy.String
	if k.PreviousUntil, err = parseNullTime(prevUntil); err != nil {
		return Key{}, err
	}
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
