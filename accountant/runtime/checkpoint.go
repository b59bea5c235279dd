package runtime

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// governance.db commits land in its write-ahead log (governance.db-wal)
// and reach the database file only at SQLite's next checkpoint. A lost
// WAL, or one damaged past its last good frame (SQLite stops reading at
// the first frame whose checksum fails, silently), opens as the plane of
// some earlier commit: keys minted since gone, keys revoked since valid
// again, and no error from SQLite, whose integrity checks see a
// consistent older database. So after every commit the DB writes the
// plane version it reached to governance.checkpoint beside the file, and
// Open refuses a database behind it. See
// RATIONALE.md#why-does-the-accountant-refuse-a-rolled-back-governancedb.

// CheckpointFile is the name of the plane checkpoint, beside governance.db.
const CheckpointFile = "governance.checkpoint"

// checkpoint is what governance.checkpoint holds: the database file's id,
// the plane identity (the owner's for a mirror) and the sequence number of
// the last audit entry committed.
type checkpoint struct {
	DBID  string `json:"db_id"`
	Plane string `json:"plane"`
	Seq   int64  `json:"seq"`
}

// RollbackError is the error Open returns for a governance.db that holds
// less than governance.checkpoint says was committed.
type RollbackError struct {
	Path       string
	Checkpoint string // the checkpoint file
	// What was found, and what the checkpoint holds.
	DBID, WantDBID string
	Seq, WantSeq   int64
}

func (e *RollbackError) Error() string {
	what := fmt.Sprintf("holds the runtime plane as of audit entry %d, but %s (written after every commit) says entry %d was committed: its write-ahead log %s-wal is lost or damaged", e.Seq, e.Checkpoint, e.WantSeq, filepath.Base(e.Path))
	if e.DBID != e.WantDBID {
		what = fmt.Sprintf("is database %s, but %s (written after every commit) names database %s at audit entry %d: the file was deleted and created again, or replaced", e.DBID, e.Checkpoint, e.WantDBID, e.WantSeq)
	}
	return fmt.Sprintf("runtime: open %s: %s; starting would serve a rolled-back runtime plane (keys minted since gone, keys revoked since valid again, overrides undone). "+
		"Restore governance.db together with its governance.db-wal from a backup (a mirror: move governance.db aside and it copies the plane from its owner again); "+
		"or, to accept the loss, start once with --accept-plane-rollback, which logs it and checkpoints the plane as it is", e.Path, what)
}

// ErrRollback matches a *RollbackError with errors.Is.
var ErrRollback = errors.New("runtime: governance.db is behind its checkpoint")

func (e *RollbackError) Is(target error) bool { return target == ErrRollback }

func (db *DB) checkpointPath() string {
	return filepath.Join(filepath.Dir(db.path), CheckpointFile)
}

// readCheckpoint reads governance.checkpoint; ok is false when there is
// none, or it cannot be read (a crash during its first write): the check
// is then skipped, never failed.
func (db *DB) readCheckpoint() (c checkpoint, ok bool) {
	b, err := os.ReadFile(db.checkpointPath())
	if err != nil || json.Unmarshal(b, &c) != nil || c.DBID == "" {
		return checkpoint{}, false
	}
	return c, true
}

// checkRollback compares the database with its checkpoint. A mirror whose
// plane identity changed (a new owner, a promotion) since the checkpoint
// is not compared by sequence: its audit log restarted with the owner's.
func (db *DB) checkRollback() error {
	c, ok := db.readCheckpoint()
	if !ok {
		return nil
	}
	var plane string
	var seq int64
	if err := db.read(func(tx *sql.Tx) (err error) { plane, seq, err = db.planeOf(tx); return err }); err != nil {
		return fmt.Errorf("reading the plane version: %w", err)
	}
	if c.DBID != db.id || c.Plane == plane && seq < c.Seq {
		return &RollbackError{Path: db.path, Checkpoint: CheckpointFile, DBID: db.id, WantDBID: c.DBID, Seq: seq, WantSeq: c.Seq}
	}
	return nil
}

// writeCheckpoint records the plane version tx reached; called with wmu
// held, after the commit, so that the file is never ahead of the
// database. It is written to a temporary file and renamed over the last,
// with no fsync: after a power loss it can only be older than the
// database (whose commits are fsynced), which a later write corrects.
func (db *DB) writeCheckpoint(plane string, seq int64) error {
	b, err := json.Marshal(checkpoint{DBID: db.id, Plane: plane, Seq: seq})
	if err != nil {
		return err
	}
	path := db.checkpointPath()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("runtime: writing %s: %w", CheckpointFile, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("runtime: writing %s: %w", CheckpointFile, err)
	}
	return nil
}

// planeOf reads the plane identity and last audit entry in tx.
func (db *DB) planeOf(tx *sql.Tx) (string, int64, error) {
	plane, err := db.identity(tx)
	if err != nil {
		return "", 0, err
	}
	seq, err := lastAudit(tx)
	return plane, seq, err
}

// checkpointNow writes the checkpoint of the plane as it is.
func (db *DB) checkpointNow() error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	var plane string
	var seq int64
	if err := db.read(func(tx *sql.Tx) (err error) { plane, seq, err = db.planeOf(tx); return err }); err != nil {
		return fmt.Errorf("runtime: reading the plane version: %w", err)
	}
	return db.writeCheckpoint(plane, seq)
}

// checkpointFailed is how a failed checkpoint write is reported: the
// commit stands, and the checkpoint lags (a weaker check, never a false
// one) until a later write succeeds.
func (db *DB) checkpointFailed(err error) {
	if db.onCheckpointError != nil {
		db.onCheckpointError(err)
	}
}
