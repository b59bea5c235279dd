package filter_test

import (
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/cputime"
)

// BenchmarkIdle is what a VM costs per second while no request comes: its
// ticks and the sync answers, the accountant's answer saying nothing
// changed. Each op is one second of the host's clock in ticks of 100 ms
// (two worker VMs); tick-us and answer-us are the guest's mean wall time
// in proxy_on_tick and proxy_on_http_call_response, cpu-us/s the
// process's CPU per second of the clock (the fake accountant's included).
func BenchmarkIdle(b *testing.B) {
	r := newRig(b, rigOptions{governance: gov(limTeamRPM), keys: []testKey{dev1Key}, accountant: true, workers: 2})
	r.sync()
	for range 3 {
		mustStatus(b, r.chat(dev1Key, chatBody("gpt-4o-mini", "hi")), 200)
	}
	r.sync()
	r.sync()
	before, _ := r.h.Profile()
	b.ResetTimer()
	cpu := cputime.Now()
	for range b.N {
		for range 10 {
			r.step(100 * time.Millisecond)
		}
	}
	cpu = cputime.Now() - cpu
	b.StopTimer()
	after, _ := r.h.Profile()
	mean := func(export string) float64 {
		var calls int64
		var total time.Duration
		for _, p := range after {
			if p.Export == export {
				calls, total = p.Calls, p.Total
			}
		}
		for _, p := range before {
			if p.Export == export {
				calls, total = calls-p.Calls, total-p.Total
			}
		}
		if calls == 0 {
			return 0
		}
		return float64(total.Nanoseconds()) / float64(calls) / 1e3
	}
	b.ReportMetric(mean("proxy_on_tick"), "tick-us")
	b.ReportMetric(mean("proxy_on_http_call_response"), "answer-us")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/s")
}
