package accountant

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// TestLostWALStopsTheStart: an accountant whose governance.db lost its
// write-ahead log (the key minted last is in no file but the WAL) does not
// start on the older plane; the error names the recovery. Started with
// AcceptPlaneRollback it serves the plane it has and says loudly what was
// lost.
func TestLostWALStopsTheStart(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, overrideConfig)
	data := filepath.Join(dir, "data")
	n := startNode(t, cfg, data, "127.0.0.1:0", "")
	if _, err := n.admin().MintKey(context.Background(), "org:acme", vkey.Scopes{}); err != nil {
		t.Fatal(err)
	}
	n.close() // the WAL is folded into governance.db
	n = startNode(t, cfg, data, "127.0.0.1:0", "")
	if _, err := n.admin().MintKey(context.Background(), "org:acme", vkey.Scopes{}); err != nil {
		t.Fatal(err)
	}
	held := n.sync("r1", "", "").Runtime.Cursor // a filter holding both keys
	// A copy of the data directory without the WAL, taken while it runs.
	lost := filepath.Join(dir, "lost")
	if err := os.MkdirAll(lost, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"governance.db", runtime.CheckpointFile} {
		b, err := os.ReadFile(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(lost, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n.close()

	quiet := slog.New(slog.DiscardHandler)
	_, err := New(Options{ConfigPath: cfg, DataDir: lost, InternalToken: testInternalToken, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "holds the runtime plane as of audit entry 1, but governance.checkpoint (written after every commit) says entry 2 was committed") ||
		!strings.Contains(err.Error(), "--accept-plane-rollback") {
		t.Fatalf("started on a lost WAL: %v", err)
	}
	logs := &testkit.Buffer{}
	s, err := New(Options{ConfigPath: cfg, DataDir: lost, InternalToken: testInternalToken, AcceptPlaneRollback: true,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("with AcceptPlaneRollback: %v", err)
	}
	defer s.Close()
	if _, keys, err := s.db.Keys(); err != nil || len(keys) != 1 {
		t.Errorf("the rolled-back plane holds %d keys (%v), want 1", len(keys), err)
	}
	// Its filters start their copy over: the plane they hold is gone, and
	// the change numbers they hold are used again by the next write.
	if _, _, err := s.db.MintKey(runtime.ArmedPlan(s.Armed()), "org:acme", vkey.Scopes{}, runtime.Stamp{Who: "admin", At: s.now()}); err != nil {
		t.Fatal(err)
	}
	if pg, err := s.Sync(Held{Runtime: held}, syncwire.DefaultPageBytes); err != nil || !pg.Runtime.Reset || len(pg.Runtime.Keys) != 2 {
		t.Errorf("a filter holding the lost plane: %+v %v", pg.Runtime, err)
	}
	if got := logs.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "started on a rolled-back runtime plane") || !strings.Contains(got, "audit_entry=1 checkpointed_entry=2") {
		t.Errorf("the accepted rollback was not logged as an error:\n%s", got)
	}
}
