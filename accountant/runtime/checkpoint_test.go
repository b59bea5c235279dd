package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/vkey"
)

// copyFiles copies the named files of dir src into a new directory.
func copyFiles(t *testing.T, src string, names ...string) string {
	t.Helper()
	dst := t.TempDir()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestLostOrDamagedWALIsRefused: governance.db whose write-ahead log is
// lost, or damaged in its last commit, opens in SQLite as an older plane
// (a key minted since gone, a key revoked since valid again); Open refuses
// it with an error naming the recovery, unless the rollback is accepted,
// which checkpoints the plane as it is. An intact copy opens, and a
// database created again where the checkpoint names another is refused.
func TestLostOrDamagedWALIsRefused(t *testing.T) {
	p := seedPlan()
	db, path := openTemp(t)
	dir := filepath.Dir(path)
	if _, err := db.CreateNode(p, "org:beta", admin(t0)); err != nil {
		t.Fatal(err)
	}
	_, old, err := db.MintKey(p, "org:beta", vkey.Scopes{}, admin(t0))
	if err != nil {
		t.Fatal(err)
	}
	// Everything so far reaches the database file; what follows stays in
	// the WAL, as commits do until SQLite's next checkpoint.
	if _, err := db.sql.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	_, _, err = db.MintKey(p, "org:beta", vkey.Scopes{}, admin(t1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.RevokeKey(old.KID, admin(t2)); err != nil {
		t.Fatal(err)
	}
	intact := copyFiles(t, dir, "governance.db", "governance.db-wal", CheckpointFile)
	lost := copyFiles(t, dir, "governance.db", CheckpointFile)
	damaged := copyFiles(t, dir, "governance.db", "governance.db-wal", CheckpointFile)
	wal := filepath.Join(damaged, "governance.db-wal")
	b, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-100] ^= 0xff // inside the last frame: the revocation's commit
	if err := os.WriteFile(wal, b, 0o600); err != nil {
		t.Fatal(err)
	}

	if db2, err := Open(filepath.Join(intact, "governance.db")); err != nil {
		t.Fatalf("an intact copy: %v", err)
	} else {
		db2.Close()
	}
	for _, c := range []struct {
		name, dir string
		seq       int64
	}{{"lost", lost, 2}, {"damaged", damaged, 3}} {
		gpath := filepath.Join(c.dir, "governance.db")
		_, err := Open(gpath)
		var rb *RollbackError
		if !errors.As(err, &rb) || !errors.Is(err, ErrRollback) {
			t.Fatalf("%s WAL: Open = %v, want a rollback refused", c.name, err)
		}
		if rb.Seq != c.seq || rb.WantSeq != 4 {
			t.Errorf("%s WAL: at entry %d of %d, want %d of 4", c.name, rb.Seq, rb.WantSeq, c.seq)
		}
		for _, part := range []string{
			"runtime: open " + gpath + ": holds the runtime plane as of audit entry",
			"governance.checkpoint (written after every commit) says entry 4 was committed: its write-ahead log governance.db-wal is lost or damaged",
			"keys revoked since valid again",
			"Restore governance.db together with its governance.db-wal from a backup",
			"start once with --accept-plane-rollback",
		} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s WAL: the error does not say %q:\n%v", c.name, part, err)
			}
		}
		// What starting would have served: the revoked key valid again.
		db2, err := OpenWith(gpath, OpenOptions{AcceptRollback: true})
		if err != nil {
			t.Fatalf("%s WAL, accepted: %v", c.name, err)
		}
		if db2.RolledBack() == nil {
			t.Errorf("%s WAL, accepted: RolledBack is nil", c.name)
		}
		_, keys, err := db2.Keys()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k.KID == old.KID && k.Revoked {
				t.Errorf("%s WAL: the revocation survived; the test damaged nothing", c.name)
			}
		}
		db2.Close()
		if db3, err := Open(gpath); err != nil {
			t.Errorf("%s WAL: after the accepted rollback: %v", c.name, err)
		} else {
			db3.Close()
		}
	}

	// The database deleted with its WAL and created again.
	again := copyFiles(t, dir, CheckpointFile)
	_, err = Open(filepath.Join(again, "governance.db"))
	if !errors.Is(err, ErrRollback) || !strings.Contains(err.Error(), "the file was deleted and created again, or replaced") {
		t.Fatalf("a database created again: %v", err)
	}
}
