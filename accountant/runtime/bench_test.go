package runtime

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// BenchmarkMintKey is one audited write transaction (synchronous=FULL).
func BenchmarkMintKey(b *testing.B) {
	db, _ := openTemp(b)
	p := seedPlan()
	for b.Loop() {
		if _, _, err := db.MintKey(p, "org:acme", vkey.Scopes{}, admin(t0)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeys1000 reads the whole key table of 1,000 keys (what the
// sync once sent after every write; the feed now sends the change,
// BenchmarkFeed).
func BenchmarkKeys1000(b *testing.B) {
	db, _ := openTemp(b)
	p := seedPlan()
	for range 1000 {
		if _, _, err := db.MintKey(p, "org:acme", vkey.Scopes{Models: []string{"gpt-*"}}, admin(t0)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, keys, err := db.Keys(); err != nil || len(keys) != 1000 {
			b.Fatal(len(keys), err)
		}
	}
}

// BenchmarkRuntime100 reads a runtime plane of 100 nodes and 100 overrides.
func BenchmarkRuntime100(b *testing.B) {
	db, _ := openTemp(b)
	p := seedPlan()
	for i := range 100 {
		id := "org:o" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		if _, err := db.CreateNode(p, id, admin(t0)); err != nil {
			b.Fatal(err)
		}
		if _, err := db.PutOverride(p, govern.Override{LimitID: "org_monthly_budget", Node: id, Amount: usd}, admin(t0)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, rt, err := db.Runtime(); err != nil || len(rt.Overrides) != 100 {
			b.Fatal(err)
		}
	}
}

// BenchmarkFeed is the accountant's side of issue 18's figure: a
// governance.db of a million keys under 100,000 runtime nodes (written
// in bulk, as a migration would), read whole from the change feed in
// pages of 256 KiB as a filter's first sync reads it, then one mint read
// from the cursor that first sync ended at. It does a fixed amount of
// work (TT_FEED_KEYS and TT_FEED_NODES scale it down):
//
//	go test ./accountant/runtime -run '^$' -bench Feed -benchtime 1x
func BenchmarkFeed(b *testing.B) {
	nKeys, nNodes := 1_000_000, 100_000
	if n, err := strconv.Atoi(os.Getenv("TT_FEED_KEYS")); err == nil && n > 0 {
		nKeys = n
	}
	if n, err := strconv.Atoi(os.Getenv("TT_FEED_NODES")); err == nil && n > 0 {
		nNodes = n
	}
	db, _ := openTemp(b)
	tx, err := db.sql.Begin()
	if err != nil {
		b.Fatal(err)
	}
	seq := 0
	for i := range nNodes {
		id := fmt.Sprintf("org:acme/team:t%d/user:u%d", i%100, i)
		seq++
		if _, err := tx.Exec(`INSERT INTO nodes (id, created_at, created_by) VALUES (?, ?, 'admin')`, id, fmtTime(t0)); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO changes (kind, id, node, seq) VALUES ('n', ?, ?, ?)`, id, id, seq); err != nil {
			b.Fatal(err)
		}
	}
	for i := range nKeys {
		kid := fmt.Sprintf("vk_%012d", i)
		owner := fmt.Sprintf("org:acme/team:t%d/user:u%d", i%nNodes%100, i%nNodes)
		seq++
		if _, err := tx.Exec(`INSERT INTO keys (kid, sha256, owner, scopes, created_at, created_by) VALUES (?, ?, ?, '{"models":null,"providers":null,"endpoints":null,"allow_passthrough":false}', ?, 'admin')`,
			kid, vkey.Hash("tt-"+kid+"-secret"), owner, fmtTime(t0)); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO changes (kind, id, node, seq) VALUES ('k', ?, ?, ?)`, kid, owner, seq); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	p := seedPlan()
	minted := 0 // each round mints one more key, which the next round's feed brings
	for b.Loop() {
		start := time.Now()
		cursor, pages, bytes, items := "", 0, 0, 0
		for {
			pg, _, err := db.Feed(cursor, syncwire.DefaultPageBytes)
			if err != nil {
				b.Fatal(err)
			}
			pages++
			items += len(pg.Keys) + len(pg.Nodes) + len(pg.Overrides)
			for _, k := range pg.Keys {
				bytes += len(k.KID) + len(k.SHA256) + len(k.Owner) + 110
			}
			cursor = pg.Cursor
			if !pg.More {
				break
			}
		}
		whole := time.Since(start)
		if items != nKeys+nNodes+minted {
			b.Fatalf("the feed brought %d items of %d", items, nKeys+nNodes+minted)
		}
		if _, _, err := db.MintKey(p, "org:acme", vkey.Scopes{}, admin(t1)); err != nil {
			b.Fatal(err)
		}
		minted++
		start = time.Now()
		pg, _, err := db.Feed(cursor, syncwire.DefaultPageBytes)
		mint := time.Since(start)
		if err != nil || len(pg.Keys) != 1 || pg.More {
			b.Fatalf("after a mint: %d keys, more %v, %v", len(pg.Keys), pg.More, err)
		}
		b.ReportMetric(whole.Seconds(), "first-sync-s")
		b.ReportMetric(float64(pages), "pages")
		b.ReportMetric(float64(items)/whole.Seconds(), "items/s")
		b.ReportMetric(float64(mint.Microseconds()), "mint-page-us")
	}
}
