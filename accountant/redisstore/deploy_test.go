package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/internal/redistest"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/rate"
)

// The deployments users run Redis in: a Redis Cluster, TLS with an ACL
// user, and a master behind Sentinel that fails over.

// TestLeasesOnACluster: on a three-master Redis Cluster each counter's
// keys share a slot (a lease script runs) while different counters spread
// over the masters, and the fleet totals (a publish per counter, the
// index on the prefix's slot) are read back whole.
func TestLeasesOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c, err := New(Options{Addrs: cl.Addrs, Cluster: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitUp(t, c)
	ctx := context.Background()
	var ops []LeaseOp
	for i := 0; i < 24; i++ {
		id := "tenant_rpm|rpm|org:t" + string(rune('a'+i)) + "||1h0m0s|fixed_window"
		ops = append(ops, LeaseOp{Kind: LeaseRate, ID: id, Alg: rate.FixedWindow, Params: rate.Params{Amount: 10, Period: time.Hour},
			Need: 1, Extra: 2, Hold: time.Second, Ask: "r1/1/" + string(rune('a'+i))})
	}
	_, ans, err := c.Lease(ctx, ops, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range ans {
		if a.Err != nil || !a.Allowed || a.Granted < 1 {
			t.Fatalf("lease %d on the cluster: %+v", i, a)
		}
	}
	nodes := 0
	for _, s := range cl.Nodes {
		if keys, _ := s.Do("KEYS", "*tenant_rpm*:rate"); keys != "" {
			nodes++
		}
	}
	if nodes < 2 {
		t.Fatalf("24 counters' cells on %d of 3 masters; want them spread over the cluster", nodes)
	}
	// Spend leases and totals: a publish and a read across the slots.
	now := time.Now()
	day := store.Key{ID: "b|budget_usd|org:ta||day|", Unit: calendar.Day, Start: calendar.Start(calendar.Day, now).Unix()}
	a := NewFleet(c, "acct-a", nil, nil)
	b := NewFleet(c, "acct-b", nil, nil)
	if _, err := a.Add(ctx, []store.Delta{{Key: day, N: 700}, {Key: store.Key{ID: day.ID + "#replica:r1", Unit: day.Unit, Start: day.Start}, N: 700}}, nil); err != nil {
		t.Fatal(err)
	}
	a.Refresh(ctx)
	if err := a.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	b.Refresh(ctx)
	if v := fleetValue(t, b, now, day); v != 700 {
		t.Fatalf("b reads the fleet total %d from the cluster; want a's 700", v)
	}
	lease := LeaseOp{Kind: LeaseSpend, ID: day.ID, Unit: calendar.Day, Start: day.Start, Replica: "r1", Amount: 1000,
		Free: time.Hour, HoldTTL: time.Hour}
	if l := lease1(t, c, lease); l.Spent != 700 {
		t.Fatalf("a spend lease on the cluster sees spent %d; want the published 700", l.Spent)
	}
}

func lease1(t *testing.T, c *Client, op LeaseOp) LeaseAnswer {
	t.Helper()
	_, ans, err := c.Lease(context.Background(), []LeaseOp{op}, 0)
	if err != nil || ans[0].Err != nil {
		t.Fatalf("lease: %v %v", err, ans)
	}
	return ans[0]
}

// TestLeasesOverTLSWithAnACLUser: a Redis that serves TLS only and knows
// only an ACL user takes leases from a client that checks its certificate
// against the test's CA and logs in as that user, and refuses one without
// the user's password.
func TestLeasesOverTLSWithAnACLUser(t *testing.T) {
	r := redistest.StartWith(t, redistest.Options{TLS: true, User: "tokentriage", Password: "s3cret"})
	pem, err := os.ReadFile(r.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	conf := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	c, err := New(Options{Addr: r.Addr, TLS: conf, Username: "tokentriage", Password: "s3cret", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitUp(t, c)
	a := lease1(t, c, LeaseOp{Kind: LeaseRate, ID: "tls", Alg: rate.GCRA, Params: rate.Params{Amount: 5, Period: time.Minute}, Need: 2, Hold: time.Second})
	if !a.Allowed || a.Granted != 2 {
		t.Fatalf("a lease over TLS: %+v", a)
	}
	// The password wrong: never up, and says why.
	bad, err := New(Options{Addr: r.Addr, TLS: conf, Username: "tokentriage", Password: "nope", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bad.Close() })
	for i := 0; i < 200; i++ {
		if why, _ := bad.Down(); strings.Contains(why, "WRONGPASS") || strings.Contains(why, "invalid") {
			if bad.Up() {
				t.Fatal("up with a wrong password")
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	why, _ := bad.Down()
	t.Fatalf("a client with a wrong password: up %v, down because %q; want it refused by the server", bad.Up(), why)
}

// TestLeasesAcrossASentinelFailover: leases taken from a master behind
// Sentinel go on, from the promoted replica, after the master dies; what
// the master held of a window that the replica had copied stays counted.
func TestLeasesAcrossASentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	c, err := New(Options{Addrs: []string{s.Addr}, MasterName: s.Name, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitUp(t, c)
	op := LeaseOp{Kind: LeaseRate, ID: "fo", Alg: rate.FixedWindow, Params: rate.Params{Amount: 100, Period: time.Hour}, Need: 10, Hold: time.Second}
	if a := lease1(t, c, op); a.Granted != 10 {
		t.Fatalf("before the failover: %+v", a)
	}
	// The replica has the window's 10 before the master goes.
	for {
		if v, _ := s.Replica.Do("EXISTS", c.RateKey("fo")); v == "1" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	old := s.Master.Addr
	s.Master.Kill()
	var mu sync.Mutex
	deadline := time.Now().Add(60 * time.Second)
	for {
		addr, _ := s.MasterAddr()
		_, ans, err := c.Lease(context.Background(), []LeaseOp{op}, 0)
		mu.Lock()
		done := err == nil && ans[0].Err == nil && addr != old
		mu.Unlock()
		if done {
			if ans[0].Result.Remaining > 80 {
				t.Fatalf("after the failover the window has %d left; want the master's 10 and this 10 counted", ans[0].Result.Remaining)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lease after the failover: master %s, %v %v", addr, err, ans)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
