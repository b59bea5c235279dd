package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/fleettest"
	"github.com/tokentriage/tokentriage/internal/redistest"
)

// Redis as users run it: a Redis Cluster, TLS with an ACL user, a master
// behind Sentinel that fails over mid-traffic; and a replica restarted
// while Redis is down.

// rpmConfig is a fleet config with one rpm per algorithm and the shared
// Redis block redis (YAML, indented under shared_state).
func rpmConfig(redis string) string {
	return `governance:
  enabled: true
  require_key: false
  shared_state:
    redis:
` + redis + `
  limits:
` + rpmBurstLimits
}

// TestFleetRedisCluster: two replicas on a three-master Redis Cluster:
// 60 calls at once against each rpm 30 admit at most 30, at least 27,
// none decided alone; the three counters' cells sit on more than one
// master.
func TestFleetRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	cfg := rpmConfig(`      addrs: ["` + strings.Join(cl.Addrs, `", "`) + `"]
      cluster: true`)
	f := fleettest.Start(t, fleettest.Options{Replicas: 2, Config: writeConfig(t, cfg), NoControl: true})
	ctx := testContext(t)
	for _, c := range []struct{ id, path string }{
		{"rpm_gcra", "/v1/chat/completions"}, {"rpm_fixed", "/v1/completions"}, {"rpm_sliding", "/v1/embeddings"},
	} {
		answers := burst(ctx, t, f.Replicas(), c.path, fleetBodies[c.path], 60)
		admitted, _, suspended := tally(t, answers, c.id)
		t.Logf("%s on a Redis Cluster: %d of 60 admitted, %d suspended", c.id, admitted, suspended)
		if admitted > 30 || admitted < 27 || suspended > 0 {
			t.Fatalf("%s: %d admitted (%d suspended); want at most 30, at least 27, none suspended", c.id, admitted, suspended)
		}
	}
	nodes := 0
	for _, s := range cl.Nodes {
		if keys, _ := s.Do("KEYS", "*rpm_*:rate"); keys != "" {
			nodes++
		}
	}
	if nodes < 2 {
		t.Fatalf("the three counters' cells sit on %d master(s); want them spread over the cluster", nodes)
	}
}

// TestFleetRedisTLS: two replicas on a Redis that serves TLS only, to an
// ACL user: the config's CA checks the server, the user logs in with the
// password from the environment, and a burst is decided exactly.
func TestFleetRedisTLS(t *testing.T) {
	r := redistest.StartWith(t, redistest.Options{TLS: true, User: "tokentriage", Password: "s3cret-pass"})
	cfg := rpmConfig(fmt.Sprintf(`      addr: %q
      tls: true
      tls_ca_file: %q
      username: tokentriage
      password_env: TT_REDIS_PASSWORD`, r.Addr, r.CAFile))
	f := fleettest.Start(t, fleettest.Options{Replicas: 2, Config: writeConfig(t, cfg), NoControl: true,
		Env: []string{"TT_REDIS_PASSWORD=s3cret-pass"}})
	ctx := testContext(t)
	answers := burst(ctx, t, f.Replicas(), "/v1/completions", fleetBodies["/v1/completions"], 60)
	admitted, _, suspended := tally(t, answers, "rpm_fixed")
	t.Logf("over TLS as an ACL user: %d of 60 admitted, %d suspended", admitted, suspended)
	if admitted > 30 || admitted < 27 || suspended > 0 {
		t.Fatalf("%d admitted (%d suspended); want at most 30, at least 27, none suspended", admitted, suspended)
	}
}

// TestFleetRedisSentinelFailover: two replicas on a master behind
// Sentinel; the master is killed while calls keep coming. Calls go on
// throughout (inside the leases, then within the replicas' shares, saying
// so); once Sentinel has promoted the replica, the fleet decides on it
// again, and what it admitted all along stays within the amount and a
// share per replica.
func TestFleetRedisSentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	cfg := rpmConfig(fmt.Sprintf(`      addrs: [%q]
      sentinel_master: %s`, s.Addr, s.Name))
	f := fleettest.Start(t, fleettest.Options{Replicas: 2, Config: writeConfig(t, cfg), NoControl: true})
	ctx := testContext(t)
	var mu sync.Mutex
	admitted, suspended, total := 0, 0, 0
	stopTraffic := traffic(4, func(i int) bool {
		a, err := call(ctx, f.Replica(i%2).URL, "/v1/chat/completions")
		if err != nil {
			t.Error(err)
			return false
		}
		mu.Lock()
		total++
		if a.status == 200 {
			admitted++
		} else if a.status != 429 {
			t.Errorf("an answer during the failover: %d %s", a.status, a.body)
		}
		if a.suspended != "" {
			suspended++
		}
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		return true
	})
	time.Sleep(500 * time.Millisecond)
	old := s.Master.Addr
	s.Master.Kill()
	eventually(ctx, t, "Sentinel promotes the replica", func() (bool, string) {
		addr, err := s.MasterAddr()
		return err == nil && addr != old, fmt.Sprintf("%s %v", addr, err)
	})
	for i, rep := range f.Replicas() {
		eventually(ctx, t, fmt.Sprintf("replica %d decides on the promoted master", i), func() (bool, string) {
			a, err := call(ctx, rep.URL, "/v1/completions")
			if err != nil {
				return false, err.Error()
			}
			return a.suspended == "", fmt.Sprintf("%d %q", a.status, a.suspended)
		})
	}
	stopTraffic()
	t.Logf("during the failover: %d calls, %d admitted, %d said suspended", total, admitted, suspended)
	if admitted > 30+2*15 {
		t.Fatalf("%d admitted against rpm 30 over two replicas across a failover; want at most the amount and a share per replica (60)", admitted)
	}
	if admitted < 27 {
		t.Fatalf("%d admitted of %d calls against rpm 30; the fleet should have admitted the amount", admitted, total)
	}
}

// TestFleetShareRestartedDuringOutage: store: share limits over three
// replicas (concurrency 6, rpm 30 an hour); Redis is killed and one replica
// restarted while it is down: the restarted replica still divides by the
// three replicas it knew (the count kept in its data directory), so it
// admits at most 2 calls in flight and 10 requests, each saying suspended,
// never the whole amount.
func TestFleetShareRestartedDuringOutage(t *testing.T) {
	r := redistest.Start(t)
	cfg := `governance:
  enabled: true
  require_key: false
  shared_state:
    redis: { addr: "127.0.0.1:1" }
  limits:
    - id: share_conc
      attach: { node: __global }
      type: concurrency
      amount: 6
      store: share
      match: { endpoint: /v1/chat/completions }
    - id: share_rpm
      attach: { node: __global }
      type: rpm
      amount: 30
      period: 1h
      store: share
      match: { endpoint: /v1/completions }
`
	f := fleettest.Start(t, fleettest.Options{Replicas: 3, Config: writeConfig(t, cfg), Redis: r.Addr, NoControl: true})
	ctx := testContext(t)
	for i, rep := range f.Replicas() {
		eventually(ctx, t, fmt.Sprintf("replica %d's accountant counts the fleet", i), func() (bool, string) {
			n := fleetReplicas(ctx, t, rep.AccountantURL, f.InternalToken)
			return n == 3, fmt.Sprintf("replicas %d", n)
		})
	}
	r.Kill()
	f.Kill(0)
	f.Restart(0)
	rep := f.Replica(0)
	eventually(ctx, t, "the restarted replica has its plan", func() (bool, string) {
		resp, err := http.Get(rep.URL + "/tt/v1/me")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, fmt.Sprint(resp.StatusCode)
	})
	// Concurrency: 10 slow calls at once, at most ⌈6 ÷ 3⌉ = 2 in flight,
	// read while every call is either refused or held at the stub (a call
	// that ended before a late one arrived rightly gives its slot to it).
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := callBody(ctx, rep.URL, "/v1/chat/completions", fleetBodies["/v1/chat/completions"], "x-stub-delay-ms", "5000")
			if err != nil {
				a.body = err.Error()
			}
			mu.Lock()
			answers = append(answers, a)
			mu.Unlock()
		}()
	}
	inFlight := int64(0)
	eventually(ctx, t, "every call refused or in flight", func() (bool, string) {
		mu.Lock()
		answered := len(answers)
		mu.Unlock()
		inFlight = fleetMe(ctx, t, rep.URL).limit(t, "share_conc").Observed
		return int64(answered)+inFlight >= 10, fmt.Sprintf("%d answered, %d in flight", answered, inFlight)
	})
	wg.Wait()
	served, _, said := tally(t, answers, "share_conc")
	t.Logf("Redis down, on the restarted replica: %d calls in flight at once, %d of 10 served, %d said suspended", inFlight, served, said)
	if inFlight > 2 || said != len(answers) {
		t.Fatalf("concurrency 6 share over three replicas, Redis down, on a replica restarted: %d in flight at once, %d of 10 served (%d said suspended); want at most 2 at once, each suspended", inFlight, served, said)
	}
	// rpm: at most ⌈30 ÷ 3⌉ = 10.
	answers = burst(ctx, t, []*fleettest.Replica{rep}, "/v1/completions", fleetBodies["/v1/completions"], 20)
	served, _, said = tally(t, answers, "share_rpm")
	if served > 10 || said != len(answers) {
		t.Fatalf("rpm 30 share over three replicas, Redis down, on a replica restarted: %d of 20 admitted (%d said suspended); want at most 10 in all, each suspended", served, said)
	}
	if me := fleetMe(ctx, t, rep.URL).limit(t, "share_conc"); !me.Suspended || me.Amount != 2 {
		t.Fatalf("/tt/v1/me of the restarted replica: %+v; want suspended, amount 2", me)
	}
}
