package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant"
	"github.com/tokentriage/tokentriage/internal/devserver"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// The distinct-values flood (issue: no tenant can take the gateway down):
// one key sends a stream of distinct model names the upstream refuses
// (404) and of distinct customers it serves, under a per-model budget and
// a per-customer budget; another tenant calls throughout. The gateway
// serves the other tenant every time, no counter is made for what the
// upstream refused, and the counters, the snapshot and the host's shared
// data stay within the limits' max_distinct, as README says.

const distinctConfig = policyTenants + `  limits:
    - { id: model_daily, attach: { level: user }, type: budget_usd, amount_usd: 100, period: day, match: { model: "*" }, max_distinct: %[1]d }
    - { id: customer_daily, attach: { level: user }, type: budget_usd, amount_usd: 5, period: day, match: { customer: "*" }, max_distinct: %[1]d }
    - { id: customer_rpm, attach: { level: user }, type: rpm, amount: 100000, period: 1m, match: { customer: "cus-*" }, max_distinct: %[1]d }
`

// distinctRun is one flood: models made-up names and customers distinct
// customers, from dev1's key, with the search team's key calling every
// every-th request.
type distinctRun struct {
	models, customers, bound, every int
	// heapMB and the rest are what the run measured.
	heapMB                 float64
	pages                  []uint32
	sharedKeys, entries    int
	otherServed, otherSent int64
}

func floodDistinct(ctx context.Context, t testing.TB, x *distinctRun) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "distinct.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(distinctConfig, x.bound)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startDev(t, path, "")
	key := mint(ctx, t, s, dev1)
	other := mint(ctx, t, s, search)
	total := x.models + x.customers
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				if x.every > 0 && i%x.every == 0 {
					x.otherSent++
					st, body := post(ctx, s, other, chatJSON("gpt-4o-mini", "hi", `,"max_tokens":4`))
					if st == 200 {
						atomic.AddInt64(&x.otherServed, 1)
					} else {
						select {
						case errs <- fmt.Sprintf("the other tenant's call %d: %d %s", i, st, body):
						default:
						}
					}
				}
				var st int
				var body string
				if i < x.models {
					st, body = post(ctx, s, key, chatJSON("made-up-"+strconv.Itoa(i), "hi"), "X-Stub-Status", "404")
					if st != 404 {
						select {
						case errs <- fmt.Sprintf("made-up model %d: %d %s", i, st, body):
						default:
						}
					}
					continue
				}
				st, body = post(ctx, s, key, chatJSON("gpt-4o-mini", "hi", `,"max_tokens":4`), "X-Tt-Customer", "cus-"+strconv.Itoa(i))
				if st != 200 {
					select {
					case errs <- fmt.Sprintf("customer %d: %d %s", i, st, body):
					default:
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// Every row reaches the accountant, then its snapshot is read.
	eventually(ctx, t, "every row folded", func() (bool, string) {
		st := s.Accountant().CoreStats()
		return st.Accepted >= int64(total)+x.otherSent, fmt.Sprintf("%d rows of %d", st.Accepted, int64(total)+x.otherSent)
	})
	var entries []syncwire.Entry
	for cursor := ""; ; {
		page, err := s.Accountant().Sync(accountant.Held{Snapshot: cursor}, syncwire.MaxPageBytes)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, page.Snapshot.Entries...)
		if !page.Snapshot.More {
			break
		}
		cursor = page.Snapshot.Cursor
	}
	perValue := map[string]int{}
	for _, e := range entries {
		limit, _, _ := strings.Cut(e.ID, "|")
		perValue[limit]++
		if strings.Contains(e.ID, "made-up-") {
			t.Errorf("a counter for a model the upstream refused: %s", e.ID)
		}
	}
	x.entries = len(entries)
	// Per limit: its own counters, the overflow, #distinct, and the
	// budgets' #estimated and #unpriced companions of those.
	for limit, n := range perValue {
		if n > 3*(x.bound+2) {
			t.Errorf("%s has %d snapshot entries, over its bound %d", limit, n, x.bound)
		}
	}
	keys := s.Host().SharedDataKeys()
	x.sharedKeys = len(keys)
	cells := 0
	for _, k := range keys {
		if strings.Contains(k, "customer_rpm|") {
			cells++
		}
	}
	if cells > 2*x.bound+1 {
		t.Errorf("%d shared-data keys of customer_rpm, over 2 × max_distinct + 1", cells)
	}
	if x.otherServed != x.otherSent {
		t.Errorf("the other tenant was served %d times of %d", x.otherServed, x.otherSent)
	}
	for n := 1; n <= s.Workers(); n++ {
		x.pages = append(x.pages, s.Host().MemoryPages(n))
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	x.heapMB = float64(ms.HeapInuse) / (1 << 20)
}

func post(ctx context.Context, s *devserver.Server, key, body string, headers ...string) (int, string) {
	r, err := doHTTP(ctx, http.MethodPost, s.URL()+"/v1/chat/completions", key, body, headers...)
	if err != nil {
		return 0, err.Error()
	}
	return r.status, r.body
}

// TestDistinctFloodBounded is the flood scaled down for the default suite:
// 1,500 made-up models and 1,500 customers against a bound of 200.
func TestDistinctFloodBounded(t *testing.T) {
	x := &distinctRun{models: 1500, customers: 1500, bound: 200, every: 50}
	floodDistinct(testContext(t), t, x)
	t.Logf("heap %.1f MB, VM pages %v, %d shared-data keys, %d snapshot entries", x.heapMB, x.pages, x.sharedKeys, x.entries)
}

// BenchmarkDistinctFlood is the flood at the scale:
//
//	TT_DISTINCT_MODELS=200000 TT_DISTINCT_CUSTOMERS=100000 \
//	  go test ./e2e -run '^$' -bench DistinctFlood -benchtime 1x -timeout 60m
//
// with max_distinct at govern.DefaultMaxDistinctCustomer. It reports the
// process heap after a collection (dev: gateway, VMs' memories and the
// accountant), the VMs' pages, the shared-data keys and the snapshot's
// entries.
func BenchmarkDistinctFlood(b *testing.B) {
	atoi := func(name string, def int) int {
		if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
			return n
		}
		return def
	}
	for i := 0; i < b.N; i++ {
		x := &distinctRun{models: atoi("TT_DISTINCT_MODELS", 20_000), customers: atoi("TT_DISTINCT_CUSTOMERS", 10_000),
			bound: atoi("TT_DISTINCT_BOUND", govern.DefaultMaxDistinctCustomer), every: 100}
		start := time.Now()
		floodDistinct(testContext(b), b, x)
		maxPages := uint32(0)
		for _, p := range x.pages {
			maxPages = max(maxPages, p)
		}
		b.ReportMetric(x.heapMB, "heap-MB")
		b.ReportMetric(float64(maxPages)*64/1024, "vm-MB")
		b.ReportMetric(float64(x.sharedKeys), "shared-keys")
		b.ReportMetric(float64(x.entries), "snapshot-entries")
		b.ReportMetric(float64(x.models+x.customers)/time.Since(start).Seconds(), "req/s")
	}
}
