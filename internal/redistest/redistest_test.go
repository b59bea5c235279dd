package redistest

import "testing"

func TestKillRestartEmptyAndSaved(t *testing.T) {
	r := Start(t)
	if _, err := r.Do("SET", "k", "v1"); err != nil {
		t.Fatal(err)
	}
	// Stop saves; a restart with Saved data has the key.
	r.Stop(t)
	if r.Running() {
		t.Fatal("Running after Stop")
	}
	r.Restart(t, Saved)
	if v, err := r.Do("GET", "k"); err != nil || v != "v1" {
		t.Fatalf("after a restart with saved data: GET k = %q, %v; want v1", v, err)
	}
	// A kill saves nothing: what was written since the last save is gone.
	if _, err := r.Do("SET", "k", "v2"); err != nil {
		t.Fatal(err)
	}
	addr := r.Addr
	r.Kill()
	if err := r.Ping(); err == nil {
		t.Fatal("PING answered after Kill")
	}
	r.Restart(t, Saved)
	if v, _ := r.Do("GET", "k"); v != "v1" {
		t.Fatalf("after a kill and a restart with saved data: GET k = %q, want the saved v1", v)
	}
	r.Restart(t, Empty)
	if r.Addr != addr {
		t.Fatalf("the address moved across restarts: %s, then %s", addr, r.Addr)
	}
	if v, _ := r.Do("DBSIZE"); v != "0" {
		t.Fatalf("after a restart empty: DBSIZE = %s, want 0", v)
	}
}

func TestTwoServersApart(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Addr == b.Addr || a.Dir == b.Dir {
		t.Fatalf("two servers share %s / %s", a.Addr, a.Dir)
	}
	a.Do("SET", "k", "a")
	if v, _ := b.Do("GET", "k"); v != "(nil)" {
		t.Fatalf("b sees a's key: %q", v)
	}
}

// A TLS server with an ACL user answers over TLS, to that user only.
func TestTLSAndACL(t *testing.T) {
	r := StartWith(t, Options{TLS: true, User: "tt", Password: "s3cret"})
	if v, err := r.Do("SET", "k", "v"); err != nil || v != "OK" {
		t.Fatalf("SET over TLS as tt: %q %v", v, err)
	}
	if _, err := do(r.Addr, nil, "", "", "PING"); err == nil {
		t.Fatal("a plain connection answered a TLS-only server")
	}
	if _, err := do(r.Addr, r.tls, "", "", "GET", "k"); err == nil {
		t.Fatal("the default user (off) read a key")
	}
}

// A cluster of three masters covers every slot; keys of different tags
// land on different nodes.
func TestCluster(t *testing.T) {
	c := StartCluster(t, 3)
	a, _ := c.SlotOf("{a}x")
	b, _ := c.SlotOf("{a}y")
	if a != b {
		t.Fatalf("keys of one tag in slots %d and %d", a, b)
	}
}

// TestStartOnATakenPortFails: a server started on a port another server
// holds fails to bind and exits, and until it has, that other server
// answers on the port; the start must not take it for its own (two tests
// would share one Redis, each seeing the other's counters).
func TestStartOnATakenPortFails(t *testing.T) {
	a := Start(t)
	b := &Server{Dir: t.TempDir(), port: a.port, Addr: a.Addr}
	if err := b.start(); err == nil {
		b.Kill()
		t.Fatalf("a second server started on %s, which the first holds", a.Addr)
	}
	if err := a.Ping(); err != nil {
		t.Fatalf("the first server after the second's attempt: %v", err)
	}
}
