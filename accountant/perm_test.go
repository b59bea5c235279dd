//go:build unix

package accountant

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDataIsTheAccountantsAlone: the data directory is created 0700 and
// every file the accountant writes in it (the ledger, governance.db with
// its WAL and shared memory, the checkpoint, the lock) 0600, whatever the
// umask lets through: they hold key hashes, delegated admins' token hashes
// and every tenant's traffic.
func TestDataIsTheAccountantsAlone(t *testing.T) {
	f := newFixture(t, testConfig)
	f.ingest(t, batch(row(reqID(1), t0, "org:acme/team:ml", "gpt-4o-mini", 10, 5)))
	data := filepath.Join(f.dir, "data")
	if st, err := os.Stat(data); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the data directory: %v %v; want 0700", st.Mode().Perm(), err)
	}
	entries, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		seen[e.Name()] = true
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v; want 0600", e.Name(), info.Mode().Perm())
		}
	}
	for _, want := range []string{"decisions.jsonl", "governance.db", "governance.db-wal", "governance.db-shm", "governance.checkpoint", LockName} {
		if !seen[want] {
			t.Errorf("no %s in the data directory (saw %v)", want, seen)
		}
	}
}
