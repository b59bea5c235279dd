package filter

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// TestUnchangedAnswerWritesNothing: an accountant answer that changed
// nothing (most polls) writes neither the version record nor the feed
// state, so no VM reads anything again, and leaves every chain's
// resolution valid; one that moved only the snapshot's time writes the
// version record and still leaves the resolutions; one that changed a key
// writes both and makes every VM resolve again.
func TestUnchangedAnswerWritesNothing(t *testing.T) {
	store := newMemStore()
	clock := &manualClock{t: nativeT0}
	es := testEngines(t, 2, store, clock, `{"accountant":{"cluster":"a"}}`)
	poller, other := es[0], es[1]
	for _, e := range es {
		e.host.Caller = &fakeCaller{}
	}
	answer := syncwire.Sync{
		Plan:     syncwire.Plan{Version: "p1"},
		Prices:   syncwire.Prices{Version: "c1"},
		Runtime:  syncwire.RuntimePage{Page: syncwire.Page{Cursor: "db.1", Reset: true}},
		Snapshot: syncwire.SnapshotPage{Page: syncwire.Page{Cursor: "s.1", Reset: true}, GeneratedAt: nativeT0},
		Replicas: 1,
	}
	answer.Runtime.Keys = []syncwire.Key{{KID: "vk_000000000001", SHA256: vkey.Hash("vk_000000000001"), Owner: "org:acme/team:ml/user:dev1"}}
	apply := func() {
		t.Helper()
		b, err := json.Marshal(answer)
		if err != nil {
			t.Fatal(err)
		}
		if !poller.takeSyncLease(clock.Now()) {
			t.Fatal("the poller could not take the sync lease")
		}
		if _, err := poller.applySync(b, clock.Now()); err != nil {
			t.Fatalf("applySync: %v", err)
		}
		for _, e := range es {
			e.refresh(clock.Now())
		}
	}
	cas := func(key string) uint32 {
		_, c, found, _ := store.Get(key)
		if !found {
			t.Fatalf("%s is not in shared data", key)
		}
		return c
	}
	apply()
	if other.lookupKey("vk_000000000001") == nil {
		t.Fatal("the synced key is not found by the other VM")
	}
	ver, feeds, gen := cas(syncVerKey), cas(syncFeedsKey), other.resolveGen

	// The same state again: no item after either cursor.
	answer.Runtime = syncwire.RuntimePage{Page: syncwire.Page{Cursor: "db.1"}}
	answer.Snapshot.Reset = false
	clock.Advance(time.Second)
	apply()
	if cas(syncVerKey) != ver || cas(syncFeedsKey) != feeds {
		t.Errorf("an unchanged answer wrote the sync records (version cas %d → %d, feeds %d → %d)", ver, cas(syncVerKey), feeds, cas(syncFeedsKey))
	}
	if other.resolveGen != gen {
		t.Errorf("an unchanged answer made the other VM resolve again (resolveGen %d → %d)", gen, other.resolveGen)
	}

	// The snapshot's heartbeat: a new time, nothing else.
	answer.Snapshot.GeneratedAt = nativeT0.Add(5 * time.Second)
	clock.Advance(time.Second)
	apply()
	if cas(syncVerKey) == ver {
		t.Error("a new snapshot time was not written")
	}
	if !other.sync.loaded.generatedAt.Equal(answer.Snapshot.GeneratedAt) {
		t.Errorf("the other VM reads the snapshot of %v, want %v", other.sync.loaded.generatedAt, answer.Snapshot.GeneratedAt)
	}
	if other.resolveGen != gen {
		t.Errorf("a new snapshot time made the other VM resolve again (resolveGen %d → %d)", gen, other.resolveGen)
	}

	// A key revoked: both records move and every VM resolves again.
	ver = cas(syncVerKey)
	answer.Runtime = syncwire.RuntimePage{Page: syncwire.Page{Cursor: "db.2"}, Keys: []syncwire.Key{{KID: "vk_000000000001", Gone: true}}}
	clock.Advance(time.Second)
	apply()
	if cas(syncVerKey) == ver || cas(syncFeedsKey) == feeds {
		t.Error("a changed answer did not write both sync records")
	}
	if other.resolveGen == gen {
		t.Error("a revoked key left the other VM's resolutions in place")
	}
	if other.lookupKey("vk_000000000001") != nil {
		t.Error("the revoked key is still found by the other VM")
	}
}
