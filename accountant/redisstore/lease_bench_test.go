package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/shared/rate"
)

// BenchmarkLease is one lease call (the fleet's epoch and one rate lease,
// pipelined) on a real redis-server: what a request that finds its lease
// empty waits for, less the way to the accountant. server_µs/script is
// Redis's own time per script (two per call: the epoch and the lease).
func BenchmarkLease(b *testing.B) {
	r := redistest.Start(b)
	c := testClient(b, r)
	for _, bc := range []struct {
		name string
		alg  rate.Algorithm
		p    rate.Params
	}{
		{"gcra_1m", rate.GCRA, rate.Params{Amount: 1 << 40, Period: time.Minute}},
		{"fixed_window_1m", rate.FixedWindow, rate.Params{Amount: 65535, Period: time.Minute}},
		{"fixed_window_1h", rate.FixedWindow, rate.Params{Amount: 65535, Period: time.Hour}},
		{"sliding_window_1h", rate.SlidingWindow, rate.Params{Amount: 65535, Period: time.Hour}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			op := LeaseOp{Kind: LeaseRate, ID: bc.name, Alg: bc.alg, Params: bc.p, Need: 1, Extra: 1, Hold: time.Second}
			r.Do("CONFIG", "RESETSTAT")
			for i := 0; i < b.N; i++ {
				if _, _, err := c.Lease(context.Background(), []LeaseOp{op}, 0); err != nil {
					b.Fatal(err)
				}
				if i%30000 == 29999 {
					r.Do("FLUSHALL")
				}
			}
			b.ReportMetric(r.CommandStat(b, "evalsha", "usec_per_call"), "server_µs/script")
		})
	}
}
