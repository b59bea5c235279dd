package accountant

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/shared/ledger"
	shared "github.com/tokentriage/tokentriage/shared/pricing"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// The prices part carries every name the accountant's catalog knows
// exactly, aliases expanded, so a filter applying shared/pricing.Lookup to
// it prices every row as the accountant does; a filter that holds the
// version gets the version alone.
func TestSyncPrices(t *testing.T) {
	f := newFixture(t, testConfig)
	full := f.sync(t, "replica=r1")
	p := full.Prices
	if p.Version == "" || len(p.Models) == 0 {
		t.Fatalf("first poll: prices = %+v, want the whole table", p)
	}
	for name, want := range map[string]syncwire.ModelRates{
		"gpt-4o-mini":                {Input: 150_000_000, Output: 600_000_000, Cached: 75_000_000},
		"claude-3-5-haiku-20241022":  {Input: 800_000_000, Output: 4_000_000_000, Cached: 80_000_000},         // an alias
		"gpt-4-0613":                 {Input: 30_000_000_000, Output: 60_000_000_000, Cached: 30_000_000_000}, // no cached rate: input's
		"claude-sonnet-4-5-20250929": {Input: 3_000_000_000, Output: 15_000_000_000, Cached: 300_000_000},
	} {
		if got, ok := p.Models[name]; !ok || got != want {
			t.Errorf("prices[%q] = %+v (present %v), want %+v", name, got, ok, want)
		}
	}
	for name := range p.Models {
		if name != strings.ToLower(name) {
			t.Errorf("price name %q is not lowercase", name)
		}
	}

	// Same rates for every name through the same lookup rules.
	cat := pricing.Default()
	exact := func(n string) (syncwire.ModelRates, bool) { r, ok := p.Models[n]; return r, ok }
	for _, name := range []string{"gpt-4o-mini", "GPT-4o-mini-2024-07-18", "openai/gpt-4o", "claude-3-5-haiku-latest",
		"claude-opus-4-0", "gpt-5-chat-latest", "o1-preview", "gpt-4o-2024-05-13", "gpt-4o-2024-08-06", "no-such-model"} {
		m, ok := cat.Lookup(name)
		r, rok := shared.Lookup(name, exact)
		if ok != rok || ok && (r != syncwire.ModelRates{Input: m.Rates.Input, Output: m.Rates.Output, Cached: m.Rates.Cached}) {
			t.Errorf("%s: synced %+v (%v), catalog %+v (%v)", name, r, rok, m, ok)
		}
	}

	// A current filter gets the version alone, and the version is stable.
	q := fmt.Sprintf("replica=r1&plan=%s&runtime=%s&snapshot=%s&prices=%s",
		full.Plan.Version, full.Runtime.Cursor, full.Snapshot.Cursor, p.Version)
	code, body := f.do(t, http.MethodGet, syncwire.SyncPath+"?"+q, nil)
	if code != http.StatusOK {
		t.Fatalf("sync: %d %s", code, body)
	}
	if len(body) > 512 || strings.Contains(string(body), `"models"`) {
		t.Errorf("a current poll got %d bytes:\n%s", len(body), body)
	}
	small := f.sync(t, q)
	if small.Prices.Version != p.Version || small.Prices.Models != nil {
		t.Errorf("current poll: prices = %+v, want version %s alone", small.Prices, p.Version)
	}
	// Only the prices part moves when only it is stale.
	stale := f.sync(t, strings.Replace(q, "prices="+p.Version, "prices=old", 1))
	if len(stale.Prices.Models) != len(p.Models) || stale.Plan.Governance != nil {
		t.Errorf("stale prices: %d models, plan sent %v", len(stale.Prices.Models), stale.Plan.Governance != nil)
	}
	f.restart(t)
	if v := f.sync(t, "replica=r1").Prices.Version; v != p.Version {
		t.Errorf("version after a restart = %s, want %s", v, p.Version)
	}
}

// A --pricing file's entries, new models, repriced ones and their aliases,
// are what the filter is sent, and they change the version.
func TestSyncPricesFromFile(t *testing.T) {
	base := newFixture(t, testConfig).sync(t, "replica=r1").Prices

	dir := t.TempDir()
	path := filepath.Join(dir, "pricing.yaml")
	doc := `models:
  gpt-4o-mini: { input: 0.30, output: 1.20 }
  Acme-LLM: { input: 1, output: 2, cached_input: 0.5, aliases: [ACME-LLM-V1] }
  claude-3-5-haiku-20241022: { input: 0.5, output: 2 }
`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: dir, config: filepath.Join(dir, "tokentriage.yaml"), pricing: path, clock: &clock{t: t0}, logs: &bytes.Buffer{}}
	f.setConfig(t, testConfig)
	f.start(t)
	p := f.sync(t, "replica=r1").Prices
	if p.Version == base.Version {
		t.Errorf("the version did not change with the pricing file")
	}
	for name, want := range map[string]syncwire.ModelRates{
		"gpt-4o-mini":               {Input: 300_000_000, Output: 1_200_000_000, Cached: 300_000_000},
		"acme-llm":                  {Input: 1_000_000_000, Output: 2_000_000_000, Cached: 500_000_000},
		"acme-llm-v1":               {Input: 1_000_000_000, Output: 2_000_000_000, Cached: 500_000_000},
		"claude-3-5-haiku-20241022": {Input: 500_000_000, Output: 2_000_000_000, Cached: 500_000_000}, // the alias repriced alone
		"claude-3-5-haiku":          {Input: 800_000_000, Output: 4_000_000_000, Cached: 80_000_000},
	} {
		if got := p.Models[name]; got != want {
			t.Errorf("prices[%q] = %+v, want %+v", name, got, want)
		}
	}

	// The filter's bound and the accountant's price of a row agree.
	cat, err := pricing.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := ledger.Usage{Input: 1234, CachedInput: 200, Output: 567}
	for _, name := range []string{"acme-llm-v1", "claude-3-5-haiku-20241022", "claude-3-5-haiku-latest", "gpt-4o-mini-2024-07-18"} {
		r, ok := shared.Lookup(name, func(n string) (syncwire.ModelRates, bool) { r, ok := p.Models[n]; return r, ok })
		if !ok {
			t.Errorf("%s: not in the synced prices", name)
			continue
		}
		got := shared.Cost(shared.Rates{Input: r.Input, Output: r.Output, Cached: r.Cached}, u)
		if want := cat.Price(name, u).Nanos; got != want {
			t.Errorf("%s: synced rates cost %d, the accountant prices %d", name, got, want)
		}
	}
}
