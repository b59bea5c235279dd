package accountant

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/cputime"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// ingestBatches encodes n batches of 512 rows over four nodes and four
// models (one unpriced), as BenchmarkIngest sends them.
func ingestBatches(n int) [][]byte {
	nodes := []string{"org:acme/team:ml/user:dev1", "org:acme/team:ml/user:dev2", "org:acme/team:search", "org:acme/team:ml"}
	models := []string{"gpt-4o-mini", "gpt-4o", "claude-3-5-haiku-latest", "mystery"}
	out := make([][]byte, n)
	k := 0
	for i := range out {
		rows := make([]ledger.Row, 512)
		for j := range rows {
			k++
			rows[j] = row(reqID(k), t0.Add(-time.Duration(k%3600)*time.Second), nodes[k%len(nodes)], models[k%len(models)], int64(k%500), 20)
		}
		out[i] = batch(rows...)
	}
	return out
}

// quantile is the q-quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// BenchmarkIngestSenders: batches of 512 rows from 1, 2, 4 and 8 senders
// at once, each sending its next batch when the last is acknowledged (a
// filter VM's flush, one batch in flight), through IngestLines. It reports
// rows/s, rows per CPU second, and the acknowledgement latency of a batch
// (ack-p50, ack-p99: from the call to the durable answer).
//
//	go test ./accountant -run '^$' -bench IngestSenders -benchtime 400x
func BenchmarkIngestSenders(b *testing.B) {
	for _, senders := range []int{1, 2, 4, 8} {
		b.Run("senders="+strconv.Itoa(senders), func(b *testing.B) {
			f := newFixture(b, testConfig)
			batches := ingestBatches(b.N)
			var next atomic.Int64
			lat := make([]time.Duration, b.N)
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu0, start := cputime.Now(), time.Now()
			for s := 0; s < senders; s++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1) - 1)
						if i >= len(batches) {
							return
						}
						t := time.Now()
						ack, _, err := f.s.IngestLines(context.Background(), batches[i])
						lat[i] = time.Since(t)
						if err != nil || ack.Accepted != 512 {
							b.Errorf("ingest: %+v %v", ack, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), cputime.Now()-cpu0
			b.StopTimer()
			reportIngest(b, b.N*512, elapsed, cpu, lat)
		})
	}
}

// BenchmarkIngestLoad: an offered load of 25,000 to 200,000 rows/s in
// batches of 512, each batch sent on schedule whether or not earlier ones
// were acknowledged (as many filter VMs flushing at once would), for the
// acknowledgement latency at each load.
//
//	go test ./accountant -run '^$' -bench IngestLoad -benchtime 400x
func BenchmarkIngestLoad(b *testing.B) {
	for _, load := range []int{25_000, 50_000, 100_000, 200_000} {
		b.Run("rows/s="+strconv.Itoa(load), func(b *testing.B) {
			f := newFixture(b, testConfig)
			batches := ingestBatches(b.N)
			lat := make([]time.Duration, b.N)
			every := time.Duration(float64(time.Second) * 512 / float64(load))
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu0, start := cputime.Now(), time.Now()
			for i := range batches {
				if wait := time.Until(start.Add(time.Duration(i) * every)); wait > 0 {
					time.Sleep(wait)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					t := time.Now()
					ack, _, err := f.s.IngestLines(context.Background(), batches[i])
					lat[i] = time.Since(t)
					if err != nil || ack.Accepted != 512 {
						b.Errorf("ingest: %+v %v", ack, err)
					}
				}()
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), cputime.Now()-cpu0
			b.StopTimer()
			reportIngest(b, b.N*512, elapsed, cpu, lat)
		})
	}
}

func reportIngest(b *testing.B, rows int, elapsed, cpu time.Duration, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
	if cpu > 0 {
		b.ReportMetric(float64(rows)/cpu.Seconds(), "rows/cpu-s")
	}
	b.ReportMetric(float64(quantile(lat, 0.5).Microseconds())/1000, "ack-p50-ms")
	b.ReportMetric(float64(quantile(lat, 0.99).Microseconds())/1000, "ack-p99-ms")
}
