package devserver

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/testwasm"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// BenchmarkAccountantAway: `tokentriage dev` in process serves as fast as
// 32 clients ask (closed loop, kept-alive connections) for 3 s, then
// every call to its accountant fails (503, as a killed accountant's
// restarting sidecar would answer) for TT_AWAY_SECONDS (default 6), then
// it is back for 3 s; the load stops and dev shuts down with its queues
// drained. Reported: the rate served, the requests served, those missing
// from the ledger (every summary row counted as its requests), the rows
// folded into overflow totals and dropped, and the summary rows. Before
// the totals, a VM's queue held 4,096 rows and dropped the rest: 14,369 of
// 86,097 served rows were lost with the accountant killed 6 s at about
// 3,500 requests a second.
//
//	go test ./internal/devserver -run '^$' -bench AccountantAway -benchtime 1x
func BenchmarkAccountantAway(b *testing.B) {
	away := 6 * time.Second
	if v, err := strconv.Atoi(os.Getenv("TT_AWAY_SECONDS")); err == nil && v > 0 {
		away = time.Duration(v) * time.Second
	}
	for b.Loop() {
		benchAway(b, away)
	}
}

func benchAway(b *testing.B, away time.Duration) {
	var down atomic.Bool
	fault := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				http.Error(w, `{"error":{"message":"the accountant is away"}}`, http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	s, err := Start(context.Background(), Options{ConfigPath: "testdata/dev.yaml", DataDir: b.TempDir(), Listen: "127.0.0.1:0",
		AccountantListen: "127.0.0.1:0", Workers: 2, Module: testwasm.Filter(b), AdminToken: "test-admin-token", AccountantFault: fault})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	k := mintKey(ctx, b, s, "org:acme/team:search")
	var served, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < 32; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := keepAliveClient()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if code, err := chatOn(ctx, client, s.URL(), k.Key, 0); err == nil && code == 200 {
					served.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	t0 := time.Now()
	time.Sleep(3 * time.Second)
	down.Store(true)
	time.Sleep(away)
	down.Store(false)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	elapsed := time.Since(t0)
	folded, _ := s.Host().Metric("tokentriage.ledger.rows_folded")
	dropped, _ := s.Host().Metric("tokentriage.ledger.rows_dropped")
	rows := closedRows(b, s)
	var summaries int64
	for i := range rows {
		if rows[i].Kind == ledger.KindSummary {
			summaries++
		}
	}
	b.ReportMetric(float64(served.Load())/elapsed.Seconds(), "served/s")
	b.ReportMetric(float64(served.Load()), "served")
	b.ReportMetric(float64(failed.Load()), "failed")
	b.ReportMetric(float64(served.Load()-servedRows(rows)), "rows-missing")
	b.ReportMetric(float64(folded), "rows-folded")
	b.ReportMetric(float64(dropped), "rows-dropped")
	b.ReportMetric(float64(summaries), "summary-rows")
}
