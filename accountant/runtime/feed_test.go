package runtime

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// feedAll pages through the feed from cursor with pages of maxBytes and
// returns every page.
func feedAll(t *testing.T, db *DB, cursor string, maxBytes int) []syncwire.RuntimePage {
	t.Helper()
	var out []syncwire.RuntimePage
	for {
		p, skipped, err := db.Feed(cursor, maxBytes)
		if err != nil || len(skipped) > 0 {
			t.Fatalf("feed after %q: %v %v", cursor, err, skipped)
		}
		out = append(out, p)
		if !p.More {
			return out
		}
		if p.Cursor == cursor {
			t.Fatalf("a page with more did not move from %q", cursor)
		}
		cursor = p.Cursor
	}
}

// TestFeedSendsChangesNotTables: a mint, a revoke, a node and an override
// are each one item of the feed after the cursor held before them; a
// deleted override and node are sent as gone; every node above a node
// written comes with it.
func TestFeedSendsChangesNotTables(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	for i := range 50 {
		if _, _, err := db.MintKey(p, "org:acme", vkey.Scopes{}, admin(t0)); err != nil {
			t.Fatal(i, err)
		}
	}
	first := feedAll(t, db, "", syncwire.MaxPageBytes)
	if len(first) != 1 || !first[0].Reset || len(first[0].Keys) != 50 {
		t.Fatalf("first sync: %d pages, reset %v, %d keys", len(first), first[0].Reset, len(first[0].Keys))
	}
	held := first[0].Cursor
	if c, _ := db.FeedCursor(); c != held {
		t.Errorf("FeedCursor %s, the first sync's cursor %s", c, held)
	}

	_, k, err := db.MintKey(p, "org:acme/team:ml", vkey.Scopes{Models: []string{"gpt-*"}}, admin(t1))
	if err != nil {
		t.Fatal(err)
	}
	mint := feedAll(t, db, held, syncwire.MaxPageBytes)
	if len(mint) != 1 || mint[0].Reset || len(mint[0].Keys) != 1 || mint[0].Keys[0].KID != k.KID ||
		mint[0].Keys[0].Owner != "org:acme/team:ml" || len(mint[0].Keys[0].Scopes.Models) != 1 {
		t.Fatalf("after a mint: %+v", mint)
	}
	held = mint[0].Cursor
	if _, err := db.RevokeKey(k.KID, admin(t2)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateNode(p, "org:beta", admin(t2)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateNode(p, "org:beta/team:x", admin(t2)); err != nil {
		t.Fatal(err)
	}
	o := govern.Override{LimitID: "team_daily_requests", Node: "org:acme/team:ml", Amount: 30000}
	if _, err := db.PutOverride(p, o, admin(t2)); err != nil {
		t.Fatal(err)
	}
	got := feedAll(t, db, held, syncwire.MaxPageBytes)[0]
	if len(got.Keys) != 1 || !got.Keys[0].Revoked || got.Keys[0].KID != k.KID {
		t.Errorf("the revoke: %+v", got.Keys)
	}
	want := []syncwire.Node{{ID: "org:beta", Tree: true}, {ID: "org:beta/team:x", Tree: true}}
	if fmt.Sprint(got.Nodes) != fmt.Sprint(want) {
		t.Errorf("nodes %+v, want %+v (org:beta written again with its child)", got.Nodes, want)
	}
	if len(got.Overrides) != 1 || got.Overrides[0] != (syncwire.Override{LimitID: o.LimitID, Node: o.Node, Amount: 30000}) {
		t.Errorf("overrides %+v", got.Overrides)
	}
	held = got.Cursor

	if _, err := db.DeleteOverride(o.LimitID, o.Node, admin(t3)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteNode("org:beta/team:x", admin(t3)); err != nil {
		t.Fatal(err)
	}
	got = feedAll(t, db, held, syncwire.MaxPageBytes)[0]
	if len(got.Overrides) != 1 || !got.Overrides[0].Gone || got.Overrides[0].LimitID != o.LimitID || got.Overrides[0].Node != o.Node {
		t.Errorf("the deleted override: %+v", got.Overrides)
	}
	// org:beta stays a runtime node; its child is gone.
	want = []syncwire.Node{{ID: "org:beta", Tree: true}, {ID: "org:beta/team:x", Tree: false}}
	if fmt.Sprint(got.Nodes) != fmt.Sprint(want) {
		t.Errorf("nodes after the delete %+v, want %+v", got.Nodes, want)
	}
	if len(got.Keys) != 0 {
		t.Errorf("keys sent again: %+v", got.Keys)
	}
	// Nothing moved: an empty page at the same cursor.
	if again := feedAll(t, db, got.Cursor, syncwire.MaxPageBytes); len(again) != 1 || again[0].Cursor != got.Cursor ||
		len(again[0].Keys)+len(again[0].Nodes)+len(again[0].Overrides) != 0 {
		t.Errorf("a current cursor: %+v", again)
	}
}

// TestFeedPagesAreBounded: a feed read in pages of a few kilobytes brings
// every item exactly once, in its current state, each page near its bound.
func TestFeedPagesAreBounded(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	kids := map[string]bool{}
	for i := range 300 {
		_, k, err := db.MintKey(p, "org:acme/team:search", vkey.Scopes{Models: []string{"gpt-4o", "o3"}}, admin(t0))
		if err != nil {
			t.Fatal(i, err)
		}
		kids[k.KID] = true
	}
	pages := feedAll(t, db, "", syncwire.MinPageBytes)
	if len(pages) < 10 {
		t.Fatalf("%d pages of %d bytes for 300 keys", len(pages), syncwire.MinPageBytes)
	}
	seen := map[string]int{}
	for i, pg := range pages {
		if pg.Reset != (i == 0) {
			t.Errorf("page %d: reset %v", i, pg.Reset)
		}
		size := 0
		for _, k := range pg.Keys {
			seen[k.KID]++
			size += len(k.KID) + len(k.SHA256) + len(k.Owner) + 60
		}
		if size > 2*syncwire.MinPageBytes {
			t.Errorf("page %d holds about %d bytes", i, size)
		}
	}
	for kid := range kids {
		if seen[kid] != 1 {
			t.Errorf("key %s came %d times", kid, seen[kid])
		}
	}
}

// TestFeedStartsOver: a cursor of another database, ahead of the feed, or
// none, is answered from the start with Reset.
func TestFeedStartsOver(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	if _, _, err := db.MintKey(p, "org:acme", vkey.Scopes{}, admin(t0)); err != nil {
		t.Fatal(err)
	}
	cur, _ := db.FeedCursor()
	id, seq, _ := syncwire.ParseCursor(cur)
	for _, c := range []string{"", "garbage", "otherdb.1", syncwire.FormatCursor(id, seq+5)} {
		pg, _, err := db.Feed(c, syncwire.DefaultPageBytes)
		if err != nil || !pg.Reset || len(pg.Keys) != 1 || pg.Cursor != cur {
			t.Errorf("cursor %q: %+v %v", c, pg, err)
		}
	}
	pg, _, _ := db.Feed(cur, syncwire.DefaultPageBytes)
	if pg.Reset || len(pg.Keys) != 0 {
		t.Errorf("the current cursor: %+v", pg)
	}
}

// TestFeedMigration: a governance.db from before the feed gets it with
// every key, node and override it holds.
func TestFeedMigration(t *testing.T) {
	p := seedPlan()
	db, path := openTemp(t)
	if _, err := db.CreateNode(p, "org:beta", admin(t0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.MintKey(p, "org:beta", vkey.Scopes{}, admin(t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutOverride(p, govern.Override{LimitID: "org_monthly_budget", Node: "org:beta", Amount: 5}, admin(t0)); err != nil {
		t.Fatal(err)
	}
	// Back to the schema before the feed, as an older release left it.
	if _, err := db.sql.Exec(`DROP TABLE changes; PRAGMA user_version = ` + strconv.Itoa(SchemaVersion()-1)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pg, _, err := db.Feed("", syncwire.DefaultPageBytes)
	if err != nil || len(pg.Keys) != 1 || len(pg.Nodes) != 1 || !pg.Nodes[0].Tree || len(pg.Overrides) != 1 || pg.Overrides[0].Amount != 5 {
		t.Fatalf("after the migration: %+v %v", pg, err)
	}
	if !strings.HasSuffix(pg.Cursor, ".3") {
		t.Errorf("cursor %s, want the three items numbered 1 to 3", pg.Cursor)
	}
}

// TestFeedCarriesKeyLife: a key's name and expiry, and after a rotation
// the hash of its previous secret with the end of its grace, are in the
// feed, the rotation as one change.
func TestFeedCarriesKeyLife(t *testing.T) {
	p := seedPlan()
	db, _ := openTemp(t)
	expires := t0.Add(30 * 24 * time.Hour)
	key, k, _, err := db.Mint(p, KeySpec{Owner: "org:acme", Name: "ci", ExpiresAt: expires}, admin(t0))
	if err != nil {
		t.Fatal(err)
	}
	pg, _, err := db.Feed("", syncwire.DefaultPageBytes)
	if err != nil || len(pg.Keys) != 1 {
		t.Fatalf("%+v %v", pg, err)
	}
	if got := pg.Keys[0]; got.Name != "ci" || got.ExpiresAt != expires.Unix() || got.PrevSHA256 != "" || got.SHA256 != vkey.Hash(key) {
		t.Errorf("the minted key: %+v", got)
	}
	if _, _, err := db.RotateKey(k.KID, time.Hour, nil, admin(t1)); err != nil {
		t.Fatal(err)
	}
	next, _, err := db.Feed(pg.Cursor, syncwire.DefaultPageBytes)
	if err != nil || len(next.Keys) != 1 {
		t.Fatalf("after the rotation: %+v %v", next, err)
	}
	if got := next.Keys[0]; got.PrevSHA256 != vkey.Hash(key) || got.PrevUntil != t1.Add(time.Hour).Unix() || got.SHA256 == vkey.Hash(key) {
		t.Errorf("the rotated key: %+v", got)
	}
}

// pullSince is pull as a mirror of this release pulls: with its cursor
// into the owner's change feed.
func pullSince(t *testing.T, owner, mirror *DB) Plane {
	t.Helper()
	have, err := mirror.PlaneVersion()
	if err != nil {
		t.Fatal(err)
	}
	feed, err := mirror.FeedCursor()
	if err != nil {
		t.Fatal(err)
	}
	p, err := owner.PlaneSince(have, feed)
	if err != nil {
		t.Fatal(err)
	}
	applyFromTheWire(t, mirror, p)
	return p
}

// TestMirrorCopiesChanges: once a mirror holds a copy, each later copy
// brings the keys, nodes and overrides that changed (the others are not
// sent), removes what the owner deleted, and leaves the mirror answering
// what the owner does, feed included; a copy of the changes since another
// position is refused whole.
func TestMirrorCopiesChanges(t *testing.T) {
	p := seedPlan()
	owner, _ := openTemp(t)
	mirror, _ := openTemp(t)
	for range 40 {
		if _, _, err := owner.MintKey(p, "org:acme", vkey.Scopes{}, admin(t0)); err != nil {
			t.Fatal(err)
		}
	}
	mustDo(t, func() error { _, err := owner.CreateNode(p, "org:beta", admin(t0)); return err })
	mustDo(t, func() error { _, err := owner.CreateNode(p, "org:beta/team:x", admin(t0)); return err })
	o := govern.Override{LimitID: "team_daily_requests", Node: "org:beta/team:x", Amount: 30000}
	mustDo(t, func() error { _, err := owner.PutOverride(p, o, admin(t0)); return err })
	first := pullSince(t, owner, mirror)
	if first.Since != "" || len(first.Tables["keys"]) != 40 {
		t.Fatalf("the first copy: since %q, %d keys", first.Since, len(first.Tables["keys"]))
	}
	sameState(t, "the first copy", owner, mirror)

	_, k, err := owner.MintKey(p, "org:beta", vkey.Scopes{}, admin(t1))
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, func() error { _, err := owner.DeleteOverride(o.LimitID, o.Node, admin(t2)); return err })
	mustDo(t, func() error { _, err := owner.DeleteNode("org:beta/team:x", admin(t2)); return err })
	next := pullSince(t, owner, mirror)
	if next.Since == "" || len(next.Tables["keys"]) != 1 || *next.Tables["keys"][0][0] != k.KID || len(next.Tables["overrides"]) != 0 ||
		len(next.Removed["overrides"]) != 1 || len(next.Removed["nodes"]) != 1 || *next.Removed["nodes"][0][0] != "org:beta/team:x" {
		t.Fatalf("the next copy: since %q, tables %v, removed %v", next.Since, next.Tables, next.Removed)
	}
	sameState(t, "the changes", owner, mirror)
	of, _ := owner.FeedCursor()
	if mf, _ := mirror.FeedCursor(); mf != of {
		t.Errorf("the mirror's feed is at %s, the owner's at %s", mf, of)
	}

	// A copy of the changes since a position the mirror does not hold
	// is refused, and the copy held stays; the next pull is right.
	mustDo(t, func() error { _, err := owner.RevokeKey(k.KID, admin(t3)); return err })
	have, _ := mirror.PlaneVersion()
	id, seq, _ := syncwire.ParseCursor(of)
	stale, err := owner.PlaneSince(have, syncwire.FormatCursor(id, seq-1))
	if err != nil || stale.Since == "" {
		t.Fatalf("a copy since an earlier position: %q %v", stale.Since, err)
	}
	if err := mirror.ApplyPlane(stale); err == nil || !strings.Contains(err.Error(), "it pulls again") {
		t.Errorf("a copy of the changes since another position applied: %v", err)
	}
	pullSince(t, owner, mirror)
	sameState(t, "after the revoke", owner, mirror)
}
