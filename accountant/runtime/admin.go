package runtime

import (
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/vkey"
)

// Admin is a delegated admin: a bearer token that may manage the subtree
// rooted at Scope through the management API. Only its hash is stored.
type Admin struct {
	ID        string     `json:"id"`
	Scope     string     `json:"scope"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by"`
	RevokedAt *time.Time `json:"revoked_at"`
	RevokedBy string     `json:"revoked_by,omitempty"`
}

// A delegated admin token is "tt-adm_" + 12 + "-" + 32 base62 characters,
// drawn like a virtual key (vkey.Mint) but under its own prefix, so one can
// never be mistaken for the other. The id, "adm_" + the 12, is public.
const (
	adminTokenPrefix = "tt-adm_"
	adminIDPrefix    = "adm_"
	vkeyPrefix       = "tt-vk_"
)

// CreateAdmin creates a delegated admin scoped to the subtree at scope, a
// node of the armed tree, and returns its token: here, and never again.
func (db *DB) CreateAdmin(p Plan, scope string, s Stamp) (token string, a Admin, err error) {
	const op = "create admin"
	if err := checkNodeID(op, "scope", scope); err != nil {
		return "", Admin{}, err
	}
	key, _, err := vkey.Mint(rand.Reader)
	if err != nil {
		return "", Admin{}, fmt.Errorf("runtime: %s: %w", op, err)
	}
	token = adminTokenPrefix + strings.TrimPrefix(key, vkeyPrefix)
	id, _ := adminID(token)
	a = Admin{ID: id, Scope: scope, CreatedAt: s.At.UTC(), CreatedBy: s.Who}
	err = db.write(func(tx *sql.Tx) (audit, []group, error) {
		ok, err := treeNode(tx, p, scope)
		if err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s: %w", op, err)
		}
		if !ok {
			return audit{}, nil, refuse(Invalid, op, "scope %q is not a node of the tenancy tree; declare it in the config's tenants or create it with POST /tt/api/v1/nodes first", scope)
		}
		_, err = tx.Exec(`INSERT INTO admins (id, sha256, scope, created_at, created_by) VALUES (?, ?, ?, ?, ?)`,
			id, vkey.Hash(token), scope, fmtTime(s.At), s.Who)
		if err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s: %w", op, err)
		}
		return audit{Stamp: s, Action: ActionAdminCreate, Target: id, Node: scope, After: a}, nil, nil
	})
	if err != nil {
		return "", Admin{}, err
	}
	return token, a, nil
}

// RevokeAdmin revokes a delegated admin; its token stops working at once.
func (db *DB) RevokeAdmin(id string, s Stamp) (Admin, error) {
	const op = "revoke admin"
	if !validAdminID(id) {
		return Admin{}, refuse(Invalid, op, "%q is not an admin id (expected adm_ followed by 12 letters and digits)", id)
	}
	var a Admin
	err := db.write(func(tx *sql.Tx) (audit, []group, error) {
		before, _, err := getAdmin(tx, id)
		if errors.Is(err, sql.ErrNoRows) {
			return audit{}, nil, refuse(NotFound, op, "no delegated admin %s; GET /tt/api/v1/admins lists them", id)
		}
		if err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s %s: %w", op, id, err)
		}
		if before.RevokedAt != nil {
			return audit{}, nil, refuse(Conflict, op, "delegated admin %s was already revoked at %s by %s", id, before.RevokedAt.Format(time.RFC3339), before.RevokedBy)
		}
		if _, err := tx.Exec(`UPDATE admins SET revoked_at = ?, revoked_by = ? WHERE id = ?`, fmtTime(s.At), s.Who, id); err != nil {
			return audit{}, nil, fmt.Errorf("runtime: %s %s: %w", op, id, err)
		}
		a = before
		at := s.At.UTC()
		a.RevokedAt, a.RevokedBy = &at, s.Who
		return audit{Stamp: s, Action: ActionAdminRevoke, Target: id, Node: a.Scope, Before: before, After: a}, nil, nil
	})
	if err != nil {
		return Admin{}, err
	}
	return a, nil
}

// Admins returns every delegated admin, revoked ones included, by id.
func (db *DB) Admins() ([]Admin, error) {
	return readAll(db, "list admins", func(r scanner) (Admin, error) {
		a, _, err := scanAdmin(r)
		return a, err
	}, `SELECT `+adminColumns+` FROM admins ORDER BY id`)
}

// AdminByToken returns the live delegated admin a bearer token belongs to.
// The token's id selects the row and its hash is compared in constant time;
// ok is false for a malformed, unknown or revoked token.
func (db *DB) AdminByToken(token string) (a Admin, ok bool, err error) {
	id, valid := adminID(token)
	if !valid {
		return Admin{}, false, nil
	}
	var sum string
	err = db.read(func(tx *sql.Tx) (err error) {
		a, sum, err = getAdmin(tx, id)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Admin{}, false, nil
	}
	if err != nil {
		return Admin{}, false, fmt.Errorf("runtime: look up admin %s: %w", id, err)
	}
	if !vkey.Verify(token, sum) || a.RevokedAt != nil {
		return Admin{}, false, nil
	}
	return a, true, nil
}

// adminID derives the public id from a token, checking its shape with the
// virtual key grammar it shares.
func adminID(token string) (string, bool) {
	if !strings.HasPrefix(token, adminTokenPrefix) {
		return "", false
	}
	kid, err := vkey.KID(vkeyPrefix + strings.TrimPrefix(token, adminTokenPrefix))
	if err != nil {
		return "", false
	}
	return adminIDPrefix + strings.TrimPrefix(kid, "vk_"), true
}

func validAdminID(id string) bool {
	return strings.HasPrefix(id, adminIDPrefix) && vkey.ValidKID("vk_"+strings.TrimPrefix(id, adminIDPrefix))
}

const adminColumns = `id, scope, created_at, created_by, revoked_at, revoked_by, sha256`

func getAdmin(tx *sql.Tx, id string) (Admin, string, error) {
	return scanAdmin(tx.QueryRow(`SELECT `+adminColumns+` FROM admins WHERE id = ?`, id))
}

func scanAdmin(r scanner) (Admin, string, error) {
	var a Admin
	var created, sum string
	var revokedAt, revokedBy sql.NullString
	if err := r.Scan(&a.ID, &a.Scope, &created, &a.CreatedBy, &revokedAt, &revokedBy, &sum); err != nil {
		return Admin{}, "", err
	}
	var err error
	if a.CreatedAt, err = parseTime(created); err != nil {
		return Admin{}, "", err
	}
	if a.RevokedAt, err = parseNullTime(revokedAt); err != nil {
		return Admin{}, "", err
	}
	a.RevokedBy = revokedBy.String
	return a, sum, nil
}
