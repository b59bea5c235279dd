// Package runtime owns governance.db, the runtime plane of the accountant:
// nodes created through the management API, virtual keys (a SHA-256 of each
// key, never the key), per-node overrides of spend and quota limits,
// delegated admins scoped to a subtree, and an audit log holding one row for
// every write, committed in the same transaction as the write itself.
//
// Two change counters, one for the key table and one for the runtime plane
// (nodes and overrides), give the versions the sync wire publishes: a
// version changes when, and only when, a write to its tables commits.
//
// Writes that depend on the governance configuration (a key's owner must be
// a tree node, an override must fit its limit) are checked against the armed
// plan the caller passes in, with the rules govern applies when it arms.
package runtime

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"
	"time"

	"modernc.org/sqlite" // the pure-Go SQLite driver; RATIONALE.md#why-modernc-sqlite
	sqlite3 "modernc.org/sqlite/lib"
)

// DB is an open governance.db. It is safe for concurrent use: writes are
// serialised (one transaction each, audit row included), reads run
// concurrently against consistent snapshots (WAL mode).
type DB struct {
	sql  *sql.DB
	path string
	id   string // random per database file; prefixes every version

	wmu sync.Mutex // one write transaction at a time

	onCheckpointError func(error)
	rolledBack        *RollbackError
}

// OpenOptions are the choices of OpenWith.
type OpenOptions struct {
	// AcceptRollback opens a governance.db that is behind its checkpoint
	// (RolledBack then says by how much) instead of refusing it, and
	// checkpoints it as it is.
	AcceptRollback bool
	// OnCheckpointError is told when governance.checkpoint could not be
	// written after a commit (the commit stands).
	OnCheckpointError func(error)
}

// Stamp says who makes a write and when. Who is "admin" for the admin token
// or the id of a delegated admin; At is the caller's clock.
type Stamp struct {
	Who string
	At  time.Time
}

// Open opens (creating when absent) the governance.db at path, switches it
// to WAL mode and applies every schema migration it lacks. A database
// behind its checkpoint (a lost or damaged governance.db-wal) is refused
// with a *RollbackError; see checkpoint.go.
func Open(path string) (*DB, error) { return OpenWith(path, OpenOptions{}) }

// OpenWith is Open with options.
func OpenWith(path string, o OpenOptions) (*DB, error) {
	if path == "" {
		return nil, errors.New("runtime: open governance.db: empty path; pass the file under the accountant's --data directory")
	}
	// SQLite creates a database file 0644, and its -wal and -shm files
	// with the database file's mode: created here first, 0600, the plane
	// (key hashes, delegated admins' token hashes, the audit log) is the
	// accountant's user's alone.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("runtime: open %s: %w", path, err)
	}
	db := &DB{sql: sdb, path: path, onCheckpointError: o.OnCheckpointError}
	var mode string
	if err := sdb.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		sdb.Close()
		return nil, openError(path, err)
	}
	if mode != "wal" {
		sdb.Close()
		return nil, fmt.Errorf("runtime: open %s: journal mode is %q, not wal; is the file on a filesystem without shared memory support?", path, mode)
	}
	if err := db.migrate(); err != nil {
		sdb.Close()
		return nil, openError(path, err)
	}
	if err := sdb.QueryRow(`SELECT v FROM meta WHERE k = 'db_id'`).Scan(&db.id); err != nil {
		sdb.Close()
		return nil, openError(path, fmt.Errorf("reading the database id: %w", err))
	}
	if err := db.checkRollback(); err != nil {
		var rb *RollbackError
		if !o.AcceptRollback || !errors.As(err, &rb) {
			sdb.Close()
			return nil, err
		}
		db.rolledBack = rb
		// Filters may hold changes the database lost: they start over.
		if err := db.newFeedEpoch(); err != nil {
			sdb.Close()
			return nil, err
		}
	}
	if err := db.checkpointNow(); err != nil {
		sdb.Close()
		return nil, err
	}
	return db, nil
}

// RolledBack is the rollback OpenWith accepted (AcceptRollback), or nil.
func (db *DB) RolledBack() *RollbackError { return db.rolledBack }

// openError says why governance.db could not be opened and what to do.
func openError(path string, err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("runtime: open %s: %w", path, err)
	}
	hint := ""
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
		hint = "the file is damaged or is not a governance.db; restore it from a backup, or move it aside to start with an empty runtime plane (it holds the runtime nodes, overrides, minted keys and delegated admins)"
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		hint = "another process holds it locked (a tool with it open, or an accountant on another data directory path to the same file); close that and start again"
	case sqlite3.SQLITE_CANTOPEN:
		hint = "it cannot be opened: check that it is a file (not a directory) and that the data directory is writable"
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM:
		hint = "it is read-only; the accountant writes it (give it write permission, or pass another --data)"
	case sqlite3.SQLITE_FULL:
		hint = "the disk is full; free space and start again"
	}
	if hint == "" {
		return fmt.Errorf("runtime: open %s: %w", path, err)
	}
	return fmt.Errorf("runtime: open %s: %w: %s", path, err, hint)
}

// Close closes the database.
func (db *DB) Close() error { return db.sql.Close() }

// Path is the file the database was opened from.
func (db *DB) Path() string { return db.path }

// write runs fn in one write transaction. fn returns the audit record of the
// change and the version groups it touched; both are written in the same
// transaction, so a write and its audit row commit together or not at all.
func (db *DB) write(fn func(tx *sql.Tx) (audit, []group, error)) error {
	return db.writeAll(func(tx *sql.Tx) ([]audit, []group, error) {
		a, groups, err := fn(tx)
		return []audit{a}, groups, err
	})
}

// writeAll is write for a change audited as several entries, in order (a
// key minted with its own overrides).
func (db *DB) writeAll(fn func(tx *sql.Tx) ([]audit, []group, error)) error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	tx, err := db.sql.BeginTx(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("runtime: begin write: %w", err)
	}
	defer tx.Rollback()
	var owner string
	switch err := tx.QueryRow(`SELECT v FROM meta WHERE k = ?`, metaMirrorOf).Scan(&owner); {
	case err == nil:
		return ErrMirror
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("runtime: begin write: %w", err)
	}
	audits, groups, err := fn(tx)
	if err != nil {
		return err
	}
	for _, a := range audits {
		if err := a.insert(tx); err != nil {
			return err
		}
	}
	if err := recordChanges(tx, audits); err != nil {
		return err
	}
	for _, g := range groups {
		if _, err := tx.Exec(`UPDATE versions SET n = n + 1 WHERE grp = ?`, string(g)); err != nil {
			return fmt.Errorf("runtime: bump %s version: %w", g, err)
		}
	}
	plane, seq, err := db.planeOf(tx)
	if err != nil {
		return fmt.Errorf("runtime: reading the plane version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("runtime: commit %s: %w", audits[0].Action, err)
	}
	if err := db.writeCheckpoint(plane, seq); err != nil {
		db.checkpointFailed(err)
	}
	return nil
}

// read runs fn in one read transaction: every query in it sees the same
// snapshot, so a version and the rows it names always agree.
func (db *DB) read(fn func(tx *sql.Tx) error) error {
	tx, err := db.sql.BeginTx(context.Background(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("runtime: begin read: %w", err)
	}
	defer tx.Rollback()
	return fn(tx)
}

// newDBID names a database file for its lifetime: versions from a file that
// was deleted and recreated never equal the old ones.
func newDBID(r io.Reader) (string, error) {
	b := make([]byte, 6)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("reading randomness: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// readAll runs query in one read transaction (see read) and returns its
// rows as scan reads each; what is an error names what was being read.
func readAll[T any](db *DB, what string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	var out []T
	err := db.read(func(tx *sql.Tx) (err error) {
		out, err = queryAll(tx, scan, query, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: %s: %w", what, err)
	}
	return out, nil
}

// queryAll runs query in tx and returns its rows as scan reads each.
func queryAll[T any](tx *sql.Tx, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := tx.Query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanString reads a row of one text column.
func scanString(r scanner) (string, error) {
	var s string
	err := r.Scan(&s)
	return s, err
}
