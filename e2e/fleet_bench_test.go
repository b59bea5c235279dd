package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/devserver"
	"github.com/tokentriage/tokentriage/internal/fleettest"
	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// benchFleetTenants heads the store benchmarks' configs: one team, calls
// without keys, and shared state in Redis.
const benchFleetTenants = `governance:
  enabled: true
  require_key: false
  shared_state:
    redis: { addr: "127.0.0.1:1" }
  tenants:
    - org: acme
      teams: [ml]
`

// storeBenchConfig: one rpm limit on the local store and one on the fleet
// store, each on its own endpoint, both far from their cap.
const storeBenchConfig = benchFleetTenants + `  limits:
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
// loopback, the default 5 ms timeout) serves requests governed by an rpm
// limit on the local store (chat completions) and by one on the fleet
// store (completions), one request at a time, in the same run;
// redis_ops/req is the Redis scripts (EVALSHA) per request, read from the
// server's own statistics: the leases, their renewals and the fleet
// store's background reads, every one of them.
//
//	go test ./e2e -run '^$' -bench RPMStore -benchtime 2000x
func BenchmarkRPMStore(b *testing.B) {
	r := redistest.Start(b)
	s := startOptions(b, devserver.Options{ConfigPath: writeConfig(b, storeBenchConfig), Module: testwasm.Filter(b), Redis: r.Addr})
	client := benchClient()
	for _, c := range []struct{ name, path string }{{"local", "/v1/chat/completions"}, {"redis", "/v1/completions"}} {
		b.Run(c.name, func(b *testing.B) {
			benchRedisPosts(b, client, r, s.URL()+c.path, fleetBodies[c.path])
		})
	}
}

// benchRedisPosts posts body to url one request at a time, failing on any
// answer but a 200, and reports redis_ops/req, the Redis scripts r ran per
// request, and suspended/req, the answers that say a limit's fleet-wide
// hold was suspended (X-Tt-Suspended).
func benchRedisPosts(b *testing.B, client *http.Client, r *redistest.Server, url, body string) {
	ctx := testContext(b)
	r.Do("CONFIG", "RESETSTAT")
	suspended := 0
	for b.Loop() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", url, resp.StatusCode)
		}
		if resp.Header.Get("X-Tt-Suspended") != "" {
			suspended++
		}
	}
	b.ReportMetric(r.CommandStat(b, "evalsha", "calls")/float64(b.N), "redis_ops/req")
	b.ReportMetric(float64(suspended)/float64(b.N), "suspended/req")
}

// fleetOvershootConfig: one limit of each class, each on calls only it
// counts, tiny against a burst; reserve puts the spend and quota limits in
// reserve mode. The default settings (shared_state.redis.timeout 5 ms).
func fleetOvershootConfig(reserve bool) string {
	return fmt.Sprintf(`governance:
  enabled: true
  require_key: false
  shared_state:
    redis: { addr: "127.0.0.1:1" }
  limits:
    - { id: budget, attach: { node: __global }, type: budget_usd, amount_usd: 0.001, period: day, reserve: %[1]t, match: { model: gpt-4o } }
    - { id: tokens, attach: { node: __global }, type: quota_tokens, amount: 1000, period: day, reserve: %[1]t, match: { model: gpt-4.1-nano } }
    - { id: calls, attach: { node: __global }, type: quota_requests, amount: 5, period: day, reserve: %[1]t, match: { model: gpt-4.1-mini } }
    - { id: rpm, attach: { node: __global }, type: rpm, amount: 30, period: 1h, store: redis, match: { endpoint: /v1/completions } }
    - { id: tpm, attach: { node: __global }, type: tpm, amount: 20000, period: 1h, store: redis, match: { endpoint: /v1/messages } }
    - { id: inflight, attach: { node: __global }, type: concurrency, amount: 6, store: share, match: { endpoint: /v1/embeddings } }
`, reserve)
}

// overshootClass is one burst of BenchmarkFleetOvershoot.
type overshootClass struct {
	id, path, body string
	limit          float64 // the amount, in the unit observed counts
	usd            bool    // observed in dollars (nanodollars)
	admitted       bool    // observed is what was admitted (rpm, concurrency)
	perCall        float64 // tpm: the tokens one admitted call counts (the stub's usage)
}

// BenchmarkFleetOvershoot is BenchmarkBudgetOvershoot for every class,
// across three replicas (real `tokentriage dev` processes sharing one
// Redis, at the default settings): a burst of 64 calls at once spread over
// the three, each held 300 ms at the stub so that all are in flight
// together, against each limit in turn; it reports what the fleet counted
// once every row is folded and published (for rpm and concurrency, what it
// admitted; for tpm, the tokens of the calls it admitted), divided by the
// limit, for the default class of the spend and quota limits and for
// reserve mode. One iteration per fleet (the limits are spent after it).
//
//	go test ./e2e -run '^$' -bench FleetOvershoot -benchtime 1x
func BenchmarkFleetOvershoot(b *testing.B) {
	classes := []overshootClass{
		{id: "budget", path: "/v1/chat/completions", body: `{"model":"gpt-4o","messages":[{"role":"user","content":"What is the capital of Germany?"}]}`, limit: 1e6, usd: true},
		{id: "tokens", path: "/v1/chat/completions", body: `{"model":"gpt-4.1-nano","max_tokens":100,"messages":[{"role":"user","content":"What is the capital of Germany?"}]}`, limit: 1000},
		{id: "calls", path: "/v1/chat/completions", body: `{"model":"gpt-4.1-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, limit: 5},
		{id: "rpm", path: "/v1/completions", body: fleetBodies["/v1/completions"], limit: 30, admitted: true},
		{id: "tpm", path: "/v1/messages", body: `{"model":"claude-3-5-haiku-latest","max_tokens":3000,"messages":[{"role":"user","content":"Say hi"}]}`, limit: 20000, admitted: true, perCall: 22},
		{id: "inflight", path: "/v1/embeddings", body: fleetBodies["/v1/embeddings"], limit: 6, admitted: true},
	}
	for _, reserve := range []bool{false, true} {
		name := "default"
		if reserve {
			name = "reserve"
		}
		b.Run(name, func(b *testing.B) {
			observed := map[string]float64{}
			suspended := map[string]float64{}
			for range b.N {
				r := redistest.Start(b)
				f := fleettest.Start(b, fleettest.Options{Replicas: 3, Config: writeConfig(b, fleetOvershootConfig(reserve)), Redis: r.Addr, NoControl: true})
				ctx := testContext(b)
				for _, c := range classes {
					if reserve && c.admitted {
						continue // one figure each: taken with the default run
					}
					answers := burst(ctx, b, f.Replicas(), c.path, c.body, 64, "x-stub-delay-ms", "300")
					admitted, _, held := tally(b, answers, c.id)
					o := float64(admitted)
					switch {
					case c.perCall > 0:
						o = float64(admitted) * c.perCall
					case !c.admitted:
						o = float64(settledUse(ctx, b, f, c.id, c.usd))
					}
					observed[c.id] += o / c.limit
					suspended[c.id] += float64(held)
				}
			}
			for _, c := range classes {
				if reserve && c.admitted {
					continue
				}
				b.ReportMetric(observed[c.id]/float64(b.N), c.id+"-observed/limit")
				b.ReportMetric(suspended[c.id]/float64(b.N), c.id+"-suspended/64")
			}
		})
	}
}

// reserveBenchConfig: one budget in reserve mode, far from its cap.
const reserveBenchConfig = benchFleetTenants + `  limits:
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
// loopback (each call's dearest cost held on the replica's lease of the
// fleet's budget) and one without (the replica's own count), one request at
// a time, in the same run; redis_ops/req is the Redis scripts (EVALSHA) per
// request: the leases, their renewals, the publishes of the totals.
//
//	go test ./e2e -run '^$' -bench ReserveStore -benchtime 1000x
func BenchmarkReserveStore(b *testing.B) {
	r := redistest.Start(b)
	start := func(redisAddr string) *devserver.Server {
		cfg := reserveBenchConfig
		if redisAddr == "" {
			cfg = strings.Replace(cfg, "  shared_state:\n    redis: { addr: \"127.0.0.1:1\" }\n", "", 1)
		}
		return startOptions(b, devserver.Options{ConfigPath: writeConfig(b, cfg), Module: testwasm.Filter(b), Redis: redisAddr})
	}
	replica, fleet := start(""), start(r.Addr)
	client := benchClient()
	body := `{"model":"gpt-4o-mini","max_output_tokens":16,"input":"Say hi"}`
	for _, c := range []struct {
		name string
		s    *devserver.Server
	}{{"replica", replica}, {"fleet", fleet}} {
		b.Run(c.name, func(b *testing.B) {
			benchRedisPosts(b, client, r, c.s.URL()+"/v1/responses", body)
		})
	}
}
