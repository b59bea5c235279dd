package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/devserver"
	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// A fleet in one test: n dev systems (each its own gateway, shared data,
// accountant and ledger), one real redis-server shared by all.

// fleetTimeout is shared_state.redis.timeout in the fleet tests where
// exactness is the point: seed 000's 5 ms is missed now and then on a
// loaded machine, and a missed deadline answers locally (the tests that
// are about that say so).
const fleetTimeout = "2s"

// writeConfig writes a config file into the test's directory.
func writeConfig(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokentriage.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startFleet starts n dev systems on config, sharing the Redis at addr.
func startFleet(t testing.TB, n int, config, redisAddr string) []*devserver.Server {
	t.Helper()
	module := testwasm.Filter(t)
	out := make([]*devserver.Server, n)
	for i := range out {
		s, err := devserver.Start(testContext(t), devserver.Options{
			ConfigPath:       config,
			DataDir:          t.TempDir(),
			Listen:           "127.0.0.1:0",
			AccountantListen: "127.0.0.1:0",
			Upstream:         devserver.UpstreamStub,
			Workers:          2,
			Module:           module,
			AdminToken:       "e2e-admin-token",
			Redis:            redisAddr,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("stopping replica %d: %v", i, err)
			}
		})
		out[i] = s
	}
	return out
}

// answer is what a test reads of one gateway answer.
type answer struct {
	status    int
	suspended string // X-Tt-Suspended
	refusedBy string // X-Tt-Refused-By
	body      string
}

// chat sends one chat completion to the gateway at base.
func chat(ctx context.Context, base, key string) (answer, error) {
	body := `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"Say hi"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, suspended: resp.Header.Get("X-Tt-Suspended"),
		refusedBy: resp.Header.Get("X-Tt-Refused-By"), body: string(b)}, nil
}

// spread sends n requests spread round-robin over the replicas, from
// workers clients at once, and returns every answer.
func spread(ctx context.Context, t testing.TB, fleet []*devserver.Server, n, workers int, key string) []answer {
	t.Helper()
	out := make([]answer, n)
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, n)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				a, err := chat(ctx, fleet[i%len(fleet)].URL(), key)
				if err != nil {
					errs <- err
					continue
				}
				out[i] = a
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// fleetRPMConfig is a __global rpm limit of amount per period on the
// fleet store, for anonymous traffic.
func fleetRPMConfig(alg string, amount int, period, timeout string) string {
	return fmt.Sprintf(`governance:
  enabled: true
  require_key: false
  shared_state:
    redis: { addr: "127.0.0.1:1", timeout: %q }
  tenants:
    - org: acme
      teams: [ml]
  limits:
    - id: fleet_rpm
      attach: { node: __global }
      type: rpm
      amount: %d
      period: %s
      algorithm: %s
      store: redis
`, timeout, amount, period, alg)
}

// TestFleetRPMExact: rpm on store: redis, amount 30, and 90 requests
// spread over three replicas: exactly 30 are admitted, for each algorithm,
// as long as no answer was suspended. A window that rolls over during the
// run would rightly admit more: the run is repeated then.
func TestFleetRPMExact(t *testing.T) {
	r := redistest.Start(t)
	for _, alg := range []string{"gcra", "fixed_window", "sliding_window"} {
		t.Run(alg, func(t *testing.T) {
			ctx := testContext(t)
			fleet := startFleet(t, 3, writeConfig(t, fleetRPMConfig(alg, 30, "1h", fleetTimeout)), r.Addr)
			for attempt := 0; ; attempt++ {
				if _, err := r.Do("FLUSHALL"); err != nil {
					t.Fatal(err)
				}
				hour := time.Now().Truncate(time.Hour)
				answers := spread(ctx, t, fleet, 90, 9, "")
				if !time.Now().Truncate(time.Hour).Equal(hour) && attempt < 3 {
					t.Logf("the hour rolled over during the run; running it again")
					continue
				}
				admitted, refused, suspended := 0, 0, 0
				for i, a := range answers {
					switch {
					case a.status == 200:
						admitted++
					case a.status == 429 && a.refusedBy == "fleet_rpm":
						refused++
					default:
						t.Fatalf("request %d: %d %s", i, a.status, a.body)
					}
					if strings.Contains(a.suspended, "fleet_rpm") {
						suspended++
					}
				}
				if suspended > 0 {
					// Each replica's own cell answered those, and every one
					// says so; the fleet store still never admits past the
					// amount. Exactness is checked on a run without them.
					t.Logf("%d answers were suspended (the fleet store missed its %s deadline)", suspended, fleetTimeout)
					if admitted-suspended > 30 {
						t.Fatalf("admitted %d, %d of them suspended: more than 30 decided by the fleet store", admitted, suspended)
					}
					if attempt < 3 {
						continue
					}
					t.Fatalf("every run had suspended answers; the last: %d of 90", suspended)
				}
				if admitted != 30 || refused != 60 {
					t.Fatalf("admitted %d, refused %d of 90 over three replicas; want exactly 30 admitted", admitted, refused)
				}
				return
			}
		})
	}
}
