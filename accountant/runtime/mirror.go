package runtime

import (
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A fleet has one runtime plane. The accountant that owns it writes
// governance.db through the management API; every other accountant keeps a
// mirror: a copy of the owner's tables (nodes, keys, overrides, admins and
// the audit log), replaced whole, in one transaction, each time the owner's
// plane version moves. A mirror's versions are the owner's (its database
// id and change counts), so a filter that synced with any accountant of the
// fleet reports versions every accountant understands.
//
// The plane version is the owner's database id and the sequence number of
// its last audit entry: every write of the plane commits an audit entry in
// the same transaction, so the version moves exactly when something
// changed, and a mirror that holds it holds everything up to that write.

// metaMirrorOf is the meta key a mirror keeps the owner's database id in.
const metaMirrorOf = "mirror_of"

// mirroredTables are the tables a plane copy carries whole, with their
// columns in the order the copy lists them. The audit log is carried from
// the sequence number the mirror holds on.
var mirroredTables = []struct {
	name    string
	columns []string
}{
	{"nodes", []string{"id", "created_at", "created_by"}},
	{"keys", []string{"kid", "sha256", "owner", "scopes", "created_at", "created_by", "revoked_at", "revoked_by",
		"name", "expires_at", "prev_sha256", "prev_until", "rotated_at", "rotated_by"}},
	{"overrides", []string{"limit_id", "node", "amount", "set_by", "set_at"}},
	{"admins", []string{"id", "sha256", "scope", "created_at", "created_by", "revoked_at", "revoked_by"}},
	{"counter_adjustments", []string{"seq", "kind", "limit_id", "node", "counter", "unit", "period_start", "period_end", "amount", "before", "at", "who"}},
	{"changes", []string{"kind", "id", "node", "seq"}},
}

var auditColumns = []string{"seq", "at", "who", "action", "target", "node", "before", "after"}

// MaxPlaneAudit is the most audit entries one plane copy carries; a mirror
// further behind gets the rest in the copies that follow (More is set).
const MaxPlaneAudit = 5000

// maxPlaneAudit is MaxPlaneAudit, smaller in tests.
var maxPlaneAudit = MaxPlaneAudit

// Plane is a copy of the runtime plane, as an owner hands it to a mirror.
type Plane struct {
	// Schema is the owner's schema version: a mirror applies only a copy of
	// its own schema.
	Schema int `json:"schema"`
	// ID is the owner's database id; Seq the sequence number of the last
	// audit entry the copy carries.
	ID  string `json:"id"`
	Seq int64  `json:"seq"`
	// Keys and Runtime are the owner's change counts of the key table and
	// of the nodes and overrides.
	Keys    int64 `json:"keys"`
	Runtime int64 `json:"runtime"`
	// Tables holds every row of nodes, keys, overrides and admins, by
	// table name; Audit the audit entries after the ones the mirror holds.
	Tables map[string]Rows `json:"tables"`
	Audit  Rows            `json:"audit"`
	// More: the owner has audit entries past Seq still to send.
	More bool `json:"more,omitempty"`
	// Since, when set, makes the copy of keys, nodes and overrides the
	// changes after the mirror's cursor into the owner's change feed
	// (feed.go): Tables holds their rows changed since, with the changes
	// rows themselves, and Removed the key columns of those changed since
	// that are gone; the other tables are whole. "" for a whole copy.
	Since   string          `json:"since,omitempty"`
	Removed map[string]Rows `json:"removed,omitempty"`
}

// Rows are the rows of one table: each a value per column, nil for NULL.
type Rows [][]*string

// Version is the plane version the copy brings a mirror to.
func (p *Plane) Version() string { return PlaneVersion(p.ID, p.Seq) }

// PlaneVersion renders a plane version: the database id, a dot, the audit
// sequence number.
func PlaneVersion(id string, seq int64) string { return id + "." + strconv.FormatInt(seq, 10) }

// ErrMirror is the error of a write to a mirror's governance.db: the plane
// is written on its owner, and reaches the mirror with the next copy.
var ErrMirror = errors.New("runtime: governance.db mirrors another accountant's runtime plane; write to the owner (the accountant started without --control)")

// ErrOwnPlane is returned by CheckMirror for a governance.db that holds a
// runtime plane of its own.
var ErrOwnPlane = errors.New("governance.db holds a runtime plane of its own")

// identity returns the id the database's versions carry: the owner's for a
// mirror, its own otherwise.
func (db *DB) identity(tx *sql.Tx) (string, error) {
	var id string
	err := tx.QueryRow(`SELECT COALESCE((SELECT v FROM meta WHERE k = ?), ?)`, metaMirrorOf, db.id).Scan(&id)
	return id, err
}

// MirrorOf returns the owner's database id when this database is a mirror,
// "" when it is (or was promoted to) an owner.
func (db *DB) MirrorOf() (string, error) {
	var id string
	err := db.read(func(tx *sql.Tx) error {
		err := tx.QueryRow(`SELECT v FROM meta WHERE k = ?`, metaMirrorOf).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("runtime: read the mirror state: %w", err)
	}
	return id, nil
}

// PlaneVersion returns the version of the plane this database holds.
func (db *DB) PlaneVersion() (string, error) {
	var v string
	err := db.read(func(tx *sql.Tx) error {
		id, err := db.identity(tx)
		if err != nil {
			return err
		}
		seq, err := lastAudit(tx)
		v = PlaneVersion(id, seq)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("runtime: read the plane version: %w", err)
	}
	return v, nil
}

func lastAudit(tx *sql.Tx) (int64, error) {
	var seq int64
	err := tx.QueryRow(`SELECT COALESCE(MAX(seq), 0) FROM audit`).Scan(&seq)
	return seq, err
}

// CheckMirror reports whether this database may become a mirror: an empty
// one, or one that mirrors already. A database with writes of its own (an
// owner's, or a promoted mirror's) returns ErrOwnPlane with what it holds,
// because mirroring would replace them.
func (db *DB) CheckMirror() error {
	var own bool
	var n [3]int64
	err := db.read(func(tx *sql.Tx) error {
		var mirror int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM meta WHERE k = ?`, metaMirrorOf).Scan(&mirror); err != nil {
			return err
		}
		if mirror > 0 {
			return nil
		}
		if err := tx.QueryRow(`SELECT (SELECT COUNT(*) FROM audit), (SELECT COUNT(*) FROM keys), (SELECT COUNT(*) FROM nodes) + (SELECT COUNT(*) FROM overrides)`).Scan(&n[0], &n[1], &n[2]); err != nil {
			return err
		}
		own = n[0] > 0 || n[1] > 0 || n[2] > 0
		return nil
	})
	if err != nil {
		return fmt.Errorf("runtime: read the mirror state: %w", err)
	}
	if own {
		return fmt.Errorf("%w (%d keys, %d nodes and overrides, %d audit entries)", ErrOwnPlane, n[1], n[2], n[0])
	}
	return nil
}

// Promote makes a mirror the owner of the plane it holds: its versions
// carry its own database id from now on (so every filter reloads the
// plane once), and its writes continue the audit log's sequence. It
// returns the owner id it mirrored, "" when it was no mirror.
func (db *DB) Promote() (string, error) {
	was, err := db.MirrorOf()
	if err != nil || was == "" {
		return "", err
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	if _, err := db.sql.Exec(`DELETE FROM meta WHERE k = ?`, metaMirrorOf); err != nil {
		return "", fmt.Errorf("runtime: promote the mirror: %w", err)
	}
	var seq int64
	if err := db.read(func(tx *sql.Tx) (err error) { seq, err = lastAudit(tx); return err }); err == nil {
		if err := db.writeCheckpoint(db.id, seq); err != nil {
			db.checkpointFailed(err)
		}
	}
	return was, nil
}

// Plane returns a copy of the runtime plane for a mirror that holds plane
// version have: every row of the mirrored tables, and the audit entries
// after the ones it holds (all of them when it holds another database's,
// or none), at most MaxPlaneAudit.
func (db *DB) Plane(have string) (Plane, error) { return db.PlaneSince(have, "") }

// PlaneSince is Plane for a mirror whose copy of the change feed is at
// cursor feed: keys, nodes and overrides come as the changes since
// (Plane.Since), so a write costs a mirror that write, not the tables. A
// cursor of another feed, or none, gets every row.
func (db *DB) PlaneSince(have, feed string) (Plane, error) {
	p := Plane{Schema: SchemaVersion(), Tables: map[string]Rows{}}
	err := db.read(func(tx *sql.Tx) error {
		var err error
		if p.ID, err = db.identity(tx); err != nil {
			return err
		}
		since, err := db.feedSince(tx, feed)
		if err != nil {
			return err
		}
		from := int64(0)
		if i := strings.LastIndexByte(have, '.'); i > 0 && have[:i] == p.ID {
			from, _ = strconv.ParseInt(have[i+1:], 10, 64)
		}
		if err := tx.QueryRow(`SELECT (SELECT n FROM versions WHERE grp = 'keys'), (SELECT n FROM versions WHERE grp = 'runtime')`).Scan(&p.Keys, &p.Runtime); err != nil {
			return err
		}
		for _, t := range mirroredTables {
			if since > 0 {
				if ok, err := changedRows(tx, &p, t.name, t.columns, since); ok || err != nil {
					if err != nil {
						return fmt.Errorf("%s: %w", t.name, err)
					}
					continue
				}
			}
			rows, err := selectRows(tx, `SELECT `+strings.Join(t.columns, ", ")+` FROM `+t.name, len(t.columns))
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			p.Tables[t.name] = rows
		}
		if since > 0 {
			p.Since = feed
		}
		p.Audit, err = selectRows(tx, `SELECT `+strings.Join(auditColumns, ", ")+` FROM audit WHERE seq > ? ORDER BY seq LIMIT ?`,
			len(auditColumns), from, maxPlaneAudit+1)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		if len(p.Audit) > maxPlaneAudit {
			p.Audit, p.More = p.Audit[:maxPlaneAudit], true
		}
		p.Seq = from
		if n := len(p.Audit); n > 0 {
			if p.Seq, err = strconv.ParseInt(*p.Audit[n-1][0], 10, 64); err != nil {
				return err
			}
		} else if p.Seq, err = lastAudit(tx); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return Plane{}, fmt.Errorf("runtime: read the plane for a mirror: %w", err)
	}
	return p, nil
}

func selectRows(tx *sql.Tx, query string, cols int, args ...any) (Rows, error) {
	rows, err := tx.Query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := Rows{}
	for rows.Next() {
		vals := make([]sql.NullString, cols)
		ptrs := make([]any, cols)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]*string, cols)
		for i, v := range vals {
			if v.Valid {
				s := v.String
				row[i] = &s
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// ApplyPlane makes this database a mirror holding p, in one transaction:
// the mirrored tables are replaced by p's rows, p's audit entries are
// added after the ones held (the whole log is replaced when p comes from
// another owner than the one mirrored so far), and the versions become
// the owner's. A copy that does not fit (another schema, a row of the
// wrong width, an audit entry out of sequence) is refused whole and the
// copy held stays.
func (db *DB) ApplyPlane(p Plane) error {
	if p.Schema != SchemaVersion() {
		return fmt.Errorf("runtime: the owner's governance.db has schema version %d, this build's is %d; run the same tokentriage release on every accountant of the fleet", p.Schema, SchemaVersion())
	}
	if p.ID == "" {
		return errors.New("runtime: a plane copy without the owner's database id")
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	tx, err := db.sql.Begin()
	if err != nil {
		return fmt.Errorf("runtime: begin applying the plane: %w", err)
	}
	defer tx.Rollback()
	var was sql.NullString
	if err := tx.QueryRow(`SELECT v FROM meta WHERE k = ?`, metaMirrorOf).Scan(&was); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("runtime: apply the plane: %w", err)
	}
	if !was.Valid || was.String != p.ID {
		if _, err := tx.Exec(`DELETE FROM audit`); err != nil {
			return fmt.Errorf("runtime: apply the plane: %w", err)
		}
	}
	if p.Since != "" {
		// The changes since the feed position this mirror holds: of
		// another owner, or another position, the copy does not apply.
		held, err := db.feedCursor(tx)
		if err != nil {
			return fmt.Errorf("runtime: apply the plane: %w", err)
		}
		if !was.Valid || was.String != p.ID || held != p.Since {
			return fmt.Errorf("runtime: the plane copy holds the changes since %s, this mirror holds %s: it pulls again", p.Since, held)
		}
	}
	for _, t := range mirroredTables {
		rows, ok := p.Tables[t.name]
		if !ok {
			return fmt.Errorf("runtime: the plane copy has no %s table", t.name)
		}
		if p.Since != "" && feedTable(t.name) {
			if err := applyChanged(tx, t.name, t.columns, rows, p.Removed[t.name]); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.Exec(`DELETE FROM ` + t.name); err != nil {
			return fmt.Errorf("runtime: apply the plane: %s: %w", t.name, err)
		}
		if err := insertRows(tx, t.name, t.columns, rows); err != nil {
			return err
		}
	}
	last, err := lastAudit(tx)
	if err != nil {
		return fmt.Errorf("runtime: apply the plane: %w", err)
	}
	if was.Valid && was.String == p.ID && p.Seq <= last {
		return nil // not newer than the copy held (a pull that crossed another)
	}
	// Entries the mirror already holds (a copy asked for before another
	// one arrived) are the owner's same append-only entries: skip them.
	audit := p.Audit
	for len(audit) > 0 && audit[0] != nil && len(audit[0]) > 0 && audit[0][0] != nil {
		seq, err := strconv.ParseInt(*audit[0][0], 10, 64)
		if err != nil || seq > last || !was.Valid || was.String != p.ID {
			break
		}
		audit = audit[1:]
	}
	p.Audit = audit
	for i, row := range p.Audit {
		if len(row) != len(auditColumns) || row[0] == nil {
			return fmt.Errorf("runtime: the plane copy's audit entry %d has %d columns, want %d", i, len(row), len(auditColumns))
		}
		seq, err := strconv.ParseInt(*row[0], 10, 64)
		if err != nil || seq <= last {
			return fmt.Errorf("runtime: the plane copy's audit entry %q does not follow entry %d", *row[0], last)
		}
		last = seq
	}
	if err := insertRows(tx, "audit", auditColumns, p.Audit); err != nil {
		return err
	}
	if last != p.Seq {
		return fmt.Errorf("runtime: the plane copy ends at audit entry %d but says %d", last, p.Seq)
	}
	if _, err := tx.Exec(`UPDATE versions SET n = CASE grp WHEN 'keys' THEN ? WHEN 'runtime' THEN ? ELSE n END`, p.Keys, p.Runtime); err != nil {
		return fmt.Errorf("runtime: apply the plane: versions: %w", err)
	}
	if _, err := tx.Exec(`INSERT INTO meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, metaMirrorOf, p.ID); err != nil {
		return fmt.Errorf("runtime: apply the plane: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("runtime: commit the plane: %w", err)
	}
	if err := db.writeCheckpoint(p.ID, last); err != nil {
		db.checkpointFailed(err)
	}
	return nil
}

func insertRows(tx *sql.Tx, table string, columns []string, rows Rows) error {
	return writeRows(tx, "INSERT", table, columns, rows)
}

// upsertRows is insertRows where a row replaces the one with its name (a
// change the copy brings, feed.go).
func upsertRows(tx *sql.Tx, table string, columns []string, rows Rows) error {
	return writeRows(tx, "INSERT OR REPLACE", table, columns, rows)
}

func writeRows(tx *sql.Tx, verb, table string, columns []string, rows Rows) error {
	if len(rows) == 0 {
		return nil
	}
	stmt, err := tx.Prepare(verb + ` INTO ` + table + ` (` + strings.Join(columns, ", ") + `) VALUES (?` + strings.Repeat(", ?", len(columns)-1) + `)`)
	if err != nil {
		return fmt.Errorf("runtime: apply the plane: %s: %w", table, err)
	}
	defer stmt.Close()
	args := make([]any, len(columns))
	for i, row := range rows {
		if len(row) != len(columns) {
			return fmt.Errorf("runtime: the plane copy's %s row %d has %d columns, want %d", table, i, len(row), len(columns))
		}
		for j, v := range row {
			if v == nil {
				args[j] = nil
			} else {
				args[j] = *v
			}
		}
		if _, err := stmt.Exec(args...); err != nil {
			return fmt.Errorf("runtime: apply the plane: %s row %d: %w", table, i, err)
		}
	}
	return nil
}
