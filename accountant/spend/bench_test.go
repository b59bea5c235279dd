package spend

import (
	"context"
	"fmt"
	"math/rand"
	"net/url"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/cputime"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// monthRows is how many rows the month benchmarks sum: 10 million over
// 30 days, about 13,900 an hour.
const monthRows = 10_000_000

var bench struct {
	once  sync.Once
	r     *Rollup
	heap  float64 // MB the rollup holds
	cells int
	from  time.Time
}

// monthRollup builds, once per process, the rollup of a month of
// synthetic traffic: 5 orgs × 5 teams × 20 users, two keys each (1,000
// keys, their traffic Zipf-skewed, each with a model and an endpoint of
// its own it calls 85% and 90% of the time), 8 models, 3 endpoints; 95% admitted,
// 3% refused by one of 4 limits, 1% shadow-refused, 1% soft breaches; 90%
// priced, 5% estimated, 5% UNPRICED.
func monthRollup(b *testing.B) *Rollup {
	bench.once.Do(func() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		rng := rand.New(rand.NewSource(7))
		zipf := rand.NewZipf(rng, 1.1, 4, 999)
		models := []string{"gpt-4o-mini", "gpt-4o", "gpt-4.1", "gpt-4.1-mini", "o3-mini", "claude-sonnet-4", "claude-haiku-3.5", "text-embedding-3-small"}
		endpoints := []string{"/v1/chat/completions", "/v1/chat/completions", "/v1/chat/completions", "/v1/chat/completions", "/v1/responses", "/v1/embeddings"}
		limits := []string{"user_rpm", "team_tpm", "acme_month", "user_concurrency"}
		// A key is an application: it calls its own model and endpoint
		// most of the time (85% and 90%), any other now and then.
		type key struct{ node, kid, model, endpoint string }
		keys := make([]key, 1000)
		for i := range keys {
			u := i / 2
			keys[i] = key{fmt.Sprintf("org:o%d/team:t%d/user:u%d", u/100, u/20%5, u), fmt.Sprintf("vk_%012d", i),
				models[rng.Intn(len(models))], endpoints[rng.Intn(len(endpoints))]}
		}
		bench.from = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
		span := int64(30 * 24 * time.Hour)
		r := New(Options{HourlyDays: -1})
		rows := make([]ledger.Row, 0, 8192)
		for n := 0; n < monthRows; n++ {
			k := keys[zipf.Uint64()]
			m, ep := k.model, k.endpoint
			if rng.Intn(100) < 15 {
				m = models[rng.Intn(len(models))]
			}
			if rng.Intn(100) < 10 {
				ep = endpoints[rng.Intn(len(endpoints))]
			}
			row := ledger.Row{
				End: bench.from.Add(time.Duration(int64(n) * (span / monthRows))), Node: k.node, KID: k.kid,
				Model: m, Served: m + "-2025", Provider: "openai", Endpoint: ep,
				Decision: ledger.Admitted, Usage: ledger.Usage{Input: rng.Int63n(4000), Output: rng.Int63n(800)},
				Cost: &ledger.Cost{Nanos: rng.Int63n(5_000_000)},
			}
			switch p := rng.Intn(100); {
			case p < 3:
				row.Decision, row.ErrorType, row.Usage, row.Cost, row.Served = ledger.Refused, "rate_limited", ledger.Usage{}, nil, ""
				row.RefusedBy = &ledger.Ref{LimitID: limits[rng.Intn(len(limits))], LimitType: "rpm"}
			case p < 4:
				row.Decision = ledger.ShadowRefused
			case p < 5:
				row.Decision = ledger.SoftBreach
			}
			if row.Cost != nil {
				switch p := rng.Intn(100); {
				case p < 5:
					row.Cost = &ledger.Cost{Unpriced: true}
				case p < 10:
					row.Cost.Estimated = true
				}
			}
			rows = append(rows, row)
			if len(rows) == cap(rows) {
				r.Add(rows)
				rows = rows[:0]
			}
		}
		r.Add(rows)
		r.Compact(bench.from.AddDate(0, 0, 31)) // as the accountant's tick does
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		bench.r = r
		bench.heap = float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
		bench.cells = r.Stats().Cells
	})
	return bench.r
}

// monthQuery is the month's rollup and v as a query over its 30 days.
func monthQuery(b *testing.B, v url.Values) (*Rollup, Query) {
	r := monthRollup(b)
	v.Set("from", bench.from.Format(time.RFC3339))
	v.Set("to", bench.from.AddDate(0, 0, 30).Format(time.RFC3339))
	q, err := ParseQuery(v, bench.from)
	if err != nil {
		b.Fatal(err)
	}
	return r, q
}

// timeReports makes b.N reports through run, reports the wall and CPU
// milliseconds each took, and returns the last.
func timeReports(b *testing.B, run func() (*Report, error)) *Report {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Now()
	var rep *Report
	for i := 0; i < b.N; i++ {
		var err error
		if rep, err = run(); err != nil {
			b.Fatal(err)
		}
	}
	cpu := cputime.Now() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/report")
	if cputime.Supported() {
		// The CPU a report takes, every thread: what the wall clock would
		// read on an idle core (the machine may be shared).
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/report")
	}
	return rep
}

func benchmarkReport(b *testing.B, v url.Values) {
	r, q := monthQuery(b, v)
	rep := timeReports(b, func() (*Report, error) { return r.Run(q, "", bench.from) })
	if v.Get("node") == "" && rep.Total.Requests != monthRows {
		b.Fatalf("the report counts %d rows; want %d", rep.Total.Requests, monthRows)
	}
	b.ReportMetric(bench.heap, "rollup-MB")
	b.ReportMetric(float64(bench.cells), "cells")
}

// BenchmarkMonthReport: a month of 10 million rows by team and day, the
// dashboard's default view.
func BenchmarkMonthReport(b *testing.B) {
	benchmarkReport(b, url.Values{"group_by": {"team"}, "bucket": {"day"}})
}

// BenchmarkMonthReportByKeyHour: the widest cut of the same month: every
// key, every hour, the top 20 kept.
func BenchmarkMonthReportByKeyHour(b *testing.B) {
	benchmarkReport(b, url.Values{"group_by": {"key"}, "bucket": {"hour"}, "top": {"20"}})
}

// BenchmarkMonthReportSubtree: one team's month by user and model, as a
// delegated admin of that team sees it.
func BenchmarkMonthReportSubtree(b *testing.B) {
	benchmarkReport(b, url.Values{"group_by": {"user,model"}, "bucket": {"day"}, "node": {"org:o0/team:t0"}})
}

// BenchmarkRollupAdd is what the rollup costs per ingested row, off the
// ingest path (the accountant's fold goroutine pays it): batches of 512
// rows of the month's shape summed into an hour's and a day's cells.
func BenchmarkRollupAdd(b *testing.B) {
	rng := rand.New(rand.NewSource(9))
	models := []string{"gpt-4o-mini", "gpt-4o", "gpt-4.1", "claude-sonnet-4"}
	t0 := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]ledger.Row, 512)
	for i := range rows {
		u := rng.Intn(500)
		rows[i] = ledger.Row{End: t0.Add(time.Duration(i) * time.Second), Node: fmt.Sprintf("org:o%d/team:t%d/user:u%d", u/100, u/20%5, u),
			KID: fmt.Sprintf("vk_%012d", 2*u+rng.Intn(2)), Model: models[rng.Intn(len(models))], Served: "served", Provider: "openai",
			Endpoint: "/v1/chat/completions", Decision: ledger.Admitted, Usage: ledger.Usage{Input: 100, Output: 20}, Cost: &ledger.Cost{Nanos: 27000}}
	}
	r := New(Options{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Enqueue(rows, nil)
		r.Fold()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}

// benchmarkFleetReport is benchmarkReport over a fleet of three
// accountants, each holding the month (30 million rows in all): the
// shares are asked in parallel and pass through the JSON the accountants
// exchange, as over loopback.
func benchmarkFleetReport(b *testing.B, v url.Values) {
	r, q := monthQuery(b, v)
	peers := []Peer{jsonPeer("a", r), jsonPeer("b", r), jsonPeer("c", r)}
	// Asked as the month ends: a share with rows after its now is
	// implausible and left out.
	now := bench.from.AddDate(0, 0, 30)
	rep := timeReports(b, func() (*Report, error) {
		return FleetRun(context.Background(), q, "", now, peers, Plausibility{})
	})
	if rep.Total.Requests != 3*monthRows || rep.Partial {
		b.Fatalf("the fleet's report counts %d rows (partial %v, %+v); want %d", rep.Total.Requests, rep.Partial, rep.Source.Replicas, 3*monthRows)
	}
}

// BenchmarkFleetMonthReport: the dashboard's view over three replicas'
// months.
func BenchmarkFleetMonthReport(b *testing.B) {
	benchmarkFleetReport(b, url.Values{"group_by": {"team"}, "bucket": {"day"}})
}

// BenchmarkFleetMonthReportByKeyHour: every key, every hour, top 20, over
// three replicas' months (two rounds: ranks, then the kept series).
func BenchmarkFleetMonthReportByKeyHour(b *testing.B) {
	benchmarkFleetReport(b, url.Values{"group_by": {"key"}, "bucket": {"hour"}, "top": {"20"}})
}
