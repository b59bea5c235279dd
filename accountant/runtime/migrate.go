package runtime

import (
	"crypto/rand"
	"fmt"
)

// migrations are the schema versions of governance.db, in order. The file's
// PRAGMA user_version is the number applied; Open applies the rest, each in
// its own transaction with the version bump. Never edit an applied entry:
// append a new one.
var migrations = []string{
	// 1: the runtime plane, the version counters and the audit log.
	`CREATE TABLE meta (
		k TEXT PRIMARY KEY,
		v TEXT NOT NULL
	);
	CREATE TABLE versions (
		grp TEXT PRIMARY KEY,
		n   INTEGER NOT NULL
	);
	INSERT INTO versions (grp, n) VALUES ('keys', 0), ('runtime', 0);
	CREATE TABLE nodes (
		id         TEXT PRIMARY KEY,
		created_at TEXT NOT NULL,
		created_by TEXT NOT NULL
	);
	CREATE TABLE keys (
		kid        TEXT PRIMARY KEY,
		sha256     TEXT NOT NULL UNIQUE,
		owner      TEXT NOT NULL,
		scopes     TEXT NOT NULL,
		created_at TEXT NOT NULL,
		created_by TEXT NOT NULL,
		revoked_at TEXT,
		revoked_by TEXT
	);
	CREATE INDEX keys_owner ON keys (owner);
	CREATE TABLE overrides (
		limit_id TEXT NOT NULL,
		node     TEXT NOT NULL,
		amount   INTEGER NOT NULL CHECK (amount > 0),
		set_by   TEXT NOT NULL,
		set_at   TEXT NOT NULL,
		PRIMARY KEY (limit_id, node)
	);
	CREATE INDEX overrides_node ON overrides (node);
	CREATE TABLE admins (
		id         TEXT PRIMARY KEY,
		sha256     TEXT NOT NULL UNIQUE,
		scope      TEXT NOT NULL,
		created_at TEXT NOT NULL,
		created_by TEXT NOT NULL,
		revoked_at TEXT,
		revoked_by TEXT
	);
	CREATE TABLE audit (
		seq    INTEGER PRIMARY KEY AUTOINCREMENT,
		at     TEXT NOT NULL,
		who    TEXT NOT NULL,
		action TEXT NOT NULL,
		target TEXT NOT NULL,
		node   TEXT NOT NULL,
		before TEXT,
		after  TEXT
	);
	CREATE INDEX audit_node ON audit (node);`,
	// 2: key names, expiry and rotation (the hash of the secret before the
	// last rotation, accepted until prev_until); a name is unique among an
	// owner's live keys.
	`ALTER TABLE keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
	ALTER TABLE keys ADD COLUMN expires_at TEXT;
	ALTER TABLE keys ADD COLUMN prev_sha256 TEXT;
	ALTER TABLE keys ADD COLUMN prev_until TEXT;
	ALTER TABLE keys ADD COLUMN rotated_at TEXT;
	ALTER TABLE keys ADD COLUMN rotated_by TEXT;
	CREATE UNIQUE INDEX keys_owner_name ON keys (owner, name) WHERE name != '' AND revoked_at IS NULL;`,
	// 3: resets and credits of LedgerSettled counters, each for one counter
	// (its identity) in one calendar period, kept until the period ends.
	`CREATE TABLE counter_adjustments (
		seq          INTEGER PRIMARY KEY AUTOINCREMENT,
		kind         TEXT NOT NULL,
		limit_id     TEXT NOT NULL,
		node         TEXT NOT NULL,
		counter      TEXT NOT NULL,
		unit         TEXT NOT NULL,
		period_start INTEGER NOT NULL,
		period_end   INTEGER NOT NULL,
		amount       INTEGER NOT NULL CHECK (amount >= 0),
		before       INTEGER NOT NULL,
		at           TEXT NOT NULL,
		who          TEXT NOT NULL
	);
	CREATE INDEX counter_adjustments_end ON counter_adjustments (period_end);`,
	// 4: the runtime plane's change feed (feed.go).
	changesMigration,
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int { return len(migrations) }

func (db *DB) migrate() error {
	var have int
	if err := db.sql.QueryRow(`PRAGMA user_version`).Scan(&have); err != nil {
		return fmt.Errorf("reading schema version: %w", err)
	}
	if have > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this build's %d; run a tokentriage at least as new as the one that wrote it", have, len(migrations))
	}
	for v := have + 1; v <= len(migrations); v++ {
		if err := db.apply(v); err != nil {
			return fmt.Errorf("migrating schema to version %d: %w", v, err)
		}
	}
	return nil
}

func (db *DB) apply(v int) error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	tx, err := db.sql.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(migrations[v-1]); err != nil {
		return err
	}
	if v == 1 {
		id, err := newDBID(rand.Reader)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO meta (k, v) VALUES ('db_id', ?)`, id); err != nil {
			return err
		}
	}
	// PRAGMA takes no bound parameters; v is an int from this table.
	if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v)); err != nil {
		return err
	}
	return tx.Commit()
}
