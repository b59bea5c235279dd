package runtime

import (
	"path/filepath"
	"testing"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// BenchmarkMintKey is one audited write transaction (synchronous=FULL).
func BenchmarkMintKey(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "governance.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	p := seedPlan()
	for b.Loop() {
		if _, _, err := db.MintKey(p, "org:acme", vkey.Scopes{}, admin(t0)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeys1000 reads the sync key table of 1,000 keys, as the
// accountant does after every write.
func BenchmarkKeys1000(b *testing.B) {
	db, err := Open(filepath.Join(b.TempDir(), "governance.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
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
	db, err := Open(filepath.Join(b.TempDir(), "governance.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
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
