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
