package accountant

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// BenchmarkIngest measures ingest + price + fold + durable group commit
// through IngestLines (the ingest endpoint without the HTTP transport):
// several concurrent batches of 512 rows, each batch acknowledged only after
// its fsync. Reports rows/s.
//
//	go test ./accountant -run '^$' -bench Ingest -benchtime 200x
func BenchmarkIngest(b *testing.B) {
	const rowsPerBatch = 512
	f := newFixture(b, testConfig)
	nodes := []string{"org:acme/team:ml/user:dev1", "org:acme/team:ml/user:dev2", "org:acme/team:search", "org:acme/team:ml"}
	models := []string{"gpt-4o-mini", "gpt-4o", "claude-3-5-haiku-latest", "mystery"}
	var next atomic.Int64
	mk := func() []byte {
		rows := make([]ledger.Row, rowsPerBatch)
		for i := range rows {
			n := int(next.Add(1))
			rows[i] = row(reqID(n), t0.Add(-time.Duration(n%3600)*time.Second), nodes[n%len(nodes)], models[n%len(models)], int64(n%500), 20)
		}
		return batch(rows...)
	}
	// Batches are encoded before the clock starts: the filter encodes them.
	batches := make([][]byte, b.N)
	for i := range batches {
		batches[i] = mk()
	}
	ingestParallel(b, batches, rowsPerBatch, func(body []byte) error {
		ack, _, err := f.s.IngestLines(context.Background(), body)
		if err == nil && ack.Accepted != rowsPerBatch {
			err = fmt.Errorf("%+v", ack)
		}
		return err
	})
}

// ingestParallel sends the batches (b.N of them, encoded before the clock
// starts) through send from 4×GOMAXPROCS goroutines and reports rows/s and
// rows/cpu-s; a send's error fails the benchmark.
func ingestParallel(b *testing.B, batches [][]byte, rowsPerBatch int, send func(body []byte) error) {
	var idx atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := send(batches[idx.Add(1)-1]); err != nil {
				b.Errorf("ingest: %v", err)
				return
			}
		}
	})
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	rows := float64(b.N * rowsPerBatch)
	b.ReportMetric(rows/elapsed.Seconds(), "rows/s")
	// Rows per second of CPU (user + system, all threads): what the
	// pipeline costs, independent of how busy the machine is.
	b.ReportMetric(rows/cpu.Seconds(), "rows/cpu-s")
}

// cpuTime is the CPU time the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIngestHTTP is BenchmarkIngest through the real endpoint over
// loopback TCP: request parsing, the handler and the JSON acknowledgement
// included.
//
//	go test ./accountant -run '^$' -bench IngestHTTP -benchtime 400x
func BenchmarkIngestHTTP(b *testing.B) {
	const rowsPerBatch = 512
	f := newFixture(b, testConfig)
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	var next atomic.Int64
	batches := make([][]byte, b.N)
	for i := range batches {
		rows := make([]ledger.Row, rowsPerBatch)
		for j := range rows {
			n := int(next.Add(1))
			rows[j] = row(reqID(n), t0.Add(-time.Duration(n%3600)*time.Second), "org:acme/team:ml", "gpt-4o-mini", int64(n%500), 20)
		}
		batches[i] = batch(rows...)
	}
	client := &http.Client{Transport: bearer{testInternalToken, srv.Client().Transport}}
	ingestParallel(b, batches, rowsPerBatch, func(body []byte) error {
		resp, err := client.Post(srv.URL+syncwire.IngestPath, "application/x-ndjson", bytes.NewReader(body))
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// BenchmarkPlanePropagation mints a key on an owner and waits until its
// mirror serves it in its sync: the time a runtime-plane write takes to
// reach a mirror (the owner's write, the long poll's answer, the copy
// applied and re-armed), beside the write alone. Loopback, one process.
//
//	go test ./accountant -run '^$' -bench PlanePropagation -benchtime 200x
func BenchmarkPlanePropagation(b *testing.B) {
	owner, m := ownerAndMirror(b)
	admin := owner.admin()
	ctx := context.Background()
	var write, visible time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		k, err := admin.MintKey(ctx, "org:acme/team:ml", vkey.Scopes{})
		if err != nil {
			b.Fatal(err)
		}
		write += time.Since(start)
		for !m.s.holdsKey(k.KID) {
			runtime.Gosched()
		}
		visible += time.Since(start)
	}
	b.ReportMetric(float64(write.Microseconds())/float64(b.N)/1000, "write-ms/op")
	b.ReportMetric(float64(visible.Microseconds())/float64(b.N)/1000, "on-mirror-ms/op")
}

// holdsKey reports whether the key table s serves in its sync has kid.
func (s *Server) holdsKey(kid string) bool {
	_, err := s.db.Key(kid)
	return err == nil
}
