package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/devserver"
	"github.com/tokentriage/tokentriage/internal/fleettest"
	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// storeBenchConfig: one rpm limit on the local store and one on the fleet
// store, each on its own endpoint, both far from their cap.
const storeBenchConfig = `governance:
  enabled: true
  require_key: false
  shared_state:
    redis: { addr: "127.0.0.1:1", timeout: "2s" }
  tenants:
    - org: acme
      teams: [ml]
  limits:
    - id: rpm_local
      attach: { node: __global }
      type: rpm
      amount: 100000000
      period: 1m
      match: { endpoint: /v1/chat/completions }
    - id: rpm_redis
      attach: { node: __global }
      type: rpm
      amount: 100000000
      period: 1m
      store: redis
      match: { endpoint: /v1/completions }
`

// BenchmarkRPMStore is the latency a request pays for store: redis: the
// same `tokentriage dev` (one in-process system, a real redis-server on
// loopback) serves requests governed by an rpm limit on the local store
// (chat completions) and by one on the fleet store (completions), one
// request at a time, in the same run; redis_ops/req is the Redis commands
// (EVALSHA) per request, read from the server's own statistics.
//
//	go test ./e2e -run '^$' -bench RPMStore -benchtime 2000x
func BenchmarkRPMStore(b *testing.B) {
	r := redistest.Start(b)
	s, err := devserver.Start(testContext(b), devserver.Options{
		ConfigPath:       writeConfig(b, storeBenchConfig),
		DataDir:          b.TempDir(),
		Listen:           "127.0.0.1:0",
		AccountantListen: "127.0.0.1:0",
		Workers:          2,
		Module:           testwasm.Filter(b),
		AdminToken:       "e2e-admin-token",
		Redis:            r.Addr,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := testContext(b)
	client := benchClient()
	for _, c := range []struct{ name, path string }{{"local", "/v1/chat/completions"}, {"redis", "/v1/completions"}} {
		b.Run(c.name, func(b *testing.B) {
			r.Do("CONFIG", "RESETSTAT")
			suspended := 0
			for b.Loop() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+c.path, strings.NewReader(fleetBodies[c.path]))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("%s: %d", c.path, resp.StatusCode)
				}
				if resp.Header.Get("X-Tt-Suspended") != "" {
					suspended++
				}
			}
			b.ReportMetric(commandCalls(b, r, "evalsha")/float64(b.N), "redis_ops/req")
			b.ReportMetric(float64(suspended)/float64(b.N), "suspended/req")
		})
	}
}

// commandCalls is how many times the server ran cmd since the last
// CONFIG RESETSTAT (INFO commandstats).
func commandCalls(tb testing.TB, r *redistest.Server, cmd string) float64 {
	info, err := r.Do("INFO", "commandstats")
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":"); ok {
			for _, f := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(f, "calls="); ok {
					x, _ := strconv.ParseFloat(v, 64)
					return x
				}
			}
		}
	}
	return 0
}

// fleetOvershootConfig: a daily budget of $0.001 at __global, worth about
// five of the benchmark's calls (gpt-4o, $0.00022 each); reserve adds
// reserve: true. The fleet store's deadline is 2 s, as in TestFleet: at
// seed 000's 5 ms a loaded machine answers some calls on the replica's own
// count (suspended), which is not what the figure measures.
func fleetOvershootConfig(reserve bool) string {
	return fmt.Sprintf(`governance:
  enabled: true
  require_key: false
  shared_state:
    redis: { addr: "127.0.0.1:1", timeout: "2s" }
  tenants:
    - org: acme
      teams: [ml]
  limits:
    - id: fleet_day
      attach: { node: __global }
      type: budget_usd
      amount_usd: 0.001
      period: day
      reserve: %t
`, reserve)
}

// BenchmarkFleetBudgetOvershoot is BenchmarkBudgetOvershoot across three
// replicas (real `tokentriage dev` processes sharing one Redis): a burst
// of 64 calls spread over the three, each held 300 ms at the stub so that
// all are in flight together, against one fleet budget worth about five;
// it reports the fleet's total spend, once every row is folded and
// published, divided by the cap, for the default class and for reserve
// mode. One iteration per fleet (the budget is spent after it).
//
//	go test ./e2e -run '^$' -bench FleetBudgetOvershoot -benchtime 1x
func BenchmarkFleetBudgetOvershoot(b *testing.B) {
	for _, reserve := range []bool{false, true} {
		name := "default"
		if reserve {
			name = "reserve"
		}
		b.Run(name, func(b *testing.B) {
			b.N = 1
			r := redistest.Start(b)
			f := fleettest.Start(b, fleettest.Options{Replicas: 3, Config: writeConfig(b, fleetOvershootConfig(reserve)), Redis: r.Addr, NoControl: true})
			ctx := testContext(b)
			body := `{"model":"gpt-4o","messages":[{"role":"user","content":"What is the capital of Germany?"}]}`
			var ok atomic.Int64
			var wg sync.WaitGroup
			for i := 0; i < 64; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.Replica(i%3).URL+"/v1/chat/completions", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("x-stub-delay-ms", "300")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						ok.Add(1)
					}
				}()
			}
			wg.Wait()
			// The fleet total, once every replica's rows are folded and
			// published: the value stops moving on every replica.
			var spent int64
			last, same := int64(-1), 0
			for same < 6 {
				spent = 0
				for _, rep := range f.Replicas() {
					l := fleetMe(ctx, b, rep.URL).limit(b, "fleet_day")
					n, _ := nanos(l.ObservedUSD.USD)
					spent = max(spent, n)
				}
				if spent == last {
					same++
				} else {
					same, last = 0, spent
				}
				select {
				case <-ctx.Done():
					b.Fatal("the fleet total never settled")
				case <-time.After(250 * time.Millisecond):
				}
			}
			b.ReportMetric(float64(ok.Load()), "admitted/64")
			b.ReportMetric(float64(spent)/1e6, "observed/limit")
		})
	}
}

// reserveBenchConfig: one budget in reserve mode, far from its cap.
const reserveBenchConfig = `governance:
  enabled: true
  require_key: false
  shared_state:
    redis: { addr: "127.0.0.1:1", timeout: "2s" }
  tenants:
    - org: acme
      teams: [ml]
  limits:
    - id: day_reserve
      attach: { node: __global }
      type: budget_usd
      amount_usd: 1000000
      period: day
      reserve: true
`

// BenchmarkReserveStore is the latency a budget in reserve mode pays for
// holding fleet-wide: two `tokentriage dev` (one in-process system each)
// with the same budget, one whose accountant has a real redis-server on
// loopback (the call's dearest cost held in Redis, released with its row)
// and one without (the replica's own count), one request at a time, in the
// same run; redis_ops/req is the Redis scripts (EVALSHA) per request, the
// hold and its share of the batched releases.
//
//	go test ./e2e -run '^$' -bench ReserveStore -benchtime 1000x
func BenchmarkReserveStore(b *testing.B) {
	r := redistest.Start(b)
	start := func(redisAddr string) *devserver.Server {
		cfg := reserveBenchConfig
		if redisAddr == "" {
			cfg = strings.Replace(cfg, "  shared_state:\n    redis: { addr: \"127.0.0.1:1\", timeout: \"2s\" }\n", "", 1)
		}
		s, err := devserver.Start(testContext(b), devserver.Options{
			ConfigPath:       writeConfig(b, cfg),
			DataDir:          b.TempDir(),
			Listen:           "127.0.0.1:0",
			AccountantListen: "127.0.0.1:0",
			Workers:          2,
			Module:           testwasm.Filter(b),
			AdminToken:       "e2e-admin-token",
			Redis:            redisAddr,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	replica, fleet := start(""), start(r.Addr)
	ctx := testContext(b)
	client := benchClient()
	body := `{"model":"gpt-4o-mini","max_output_tokens":16,"input":"Say hi"}`
	for _, c := range []struct {
		name string
		s    *devserver.Server
	}{{"replica", replica}, {"fleet", fleet}} {
		b.Run(c.name, func(b *testing.B) {
			r.Do("CONFIG", "RESETSTAT")
			suspended := 0
			for b.Loop() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.s.URL()+"/v1/responses", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("%s: %d", c.name, resp.StatusCode)
				}
				if resp.Header.Get("X-Tt-Suspended") != "" {
					suspended++
				}
			}
			b.ReportMetric(commandCalls(b, r, "evalsha")/float64(b.N), "redis_ops/req")
			b.ReportMetric(float64(suspended)/float64(b.N), "suspended/req")
		})
	}
}
