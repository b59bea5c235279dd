package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant"
	"github.com/tokentriage/tokentriage/internal/devserver"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/internal/testwasm"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// The nodes of the test tree (testdata/e2e.yaml).
const (
	dev1   = "org:acme/team:ml/user:dev1"
	dev2   = "org:acme/team:ml/user:dev2"
	search = "org:acme/team:search"
)

// testContext is the test's context, ending a little before the test
// binary's deadline so that a wait that never ends fails with what it saw.
var testContext = testkit.Context

// startDev starts the dev system with config on free loopback ports and
// the stub upstream (or the upstream URL given), and stops it at the end
// of the test, checking the stop flushed every ledger row.
func startDev(t testing.TB, config, upstream string) *devserver.Server {
	t.Helper()
	return startModule(t, config, upstream, testwasm.Filter(t))
}

// startModule is startDev serving another filter module.
func startModule(t testing.TB, config, upstream string, module []byte) *devserver.Server {
	t.Helper()
	return startOptions(t, devserver.Options{ConfigPath: config, Upstream: upstream, Module: module})
}

// startOptions starts the dev system of o on free loopback ports, in a
// data directory of the test's own, with two workers and the tests' admin
// token, and stops it at the end of the test, checking the stop flushed
// every ledger row.
func startOptions(t testing.TB, o devserver.Options) *devserver.Server {
	t.Helper()
	o.DataDir = t.TempDir()
	o.Listen, o.AccountantListen = "127.0.0.1:0", "127.0.0.1:0"
	o.Workers = 2
	o.AdminToken = "e2e-admin-token"
	s, err := devserver.Start(testContext(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("stopping the dev system: %v", err)
		}
	})
	return s
}

// traffic runs step in n goroutines, each counting its own calls (i),
// until step returns false or stop is called; stop waits for them all.
func traffic(n int, step func(i int) bool) (stop func()) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if !step(i) {
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// mint mints a key for owner and waits until the gateway knows it.
func mint(ctx context.Context, t testing.TB, s *devserver.Server, owner string) string {
	t.Helper()
	k, err := s.MintKey(ctx, owner, vkey.Scopes{})
	if err != nil {
		t.Fatal(err)
	}
	return k.Key
}

// eventually polls check until it reports done, failing the test with the
// last state it described when ctx ends first. It waits for the system to
// settle (rows flushed, snapshots synced); it asserts nothing about speed.
func eventually(ctx context.Context, t testing.TB, what string, check func() (bool, string)) {
	t.Helper()
	for {
		done, state := check()
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached before the test's deadline; last seen: %s", what, state)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// meDoc is /tt/v1/me as the tests read it.
type meDoc struct {
	KID    string    `json:"kid"`
	Node   string    `json:"node"`
	Limits []meLimit `json:"limits"`
}

type meLimit struct {
	LimitID     string `json:"limit_id"`
	Type        string `json:"type"`
	Node        string `json:"node"`
	Amount      int64  `json:"amount"`
	Observed    int64  `json:"observed"`
	Suspended   bool   `json:"suspended"`
	ObservedUSD struct {
		USD       json.Number `json:"usd"`
		Estimated bool        `json:"estimated"`
		Unpriced  bool        `json:"unpriced"`
	} `json:"observed_usd"`
}

// limit returns the instance of limit id, or fails.
func (m meDoc) limit(t testing.TB, id string) meLimit {
	t.Helper()
	for _, l := range m.Limits {
		if l.LimitID == id {
			return l
		}
	}
	t.Fatalf("/tt/v1/me lists no %s: %+v", id, m.Limits)
	return meLimit{}
}

// me asks the gateway's /tt/v1/me with key.
func me(ctx context.Context, t testing.TB, s *devserver.Server, key string) meDoc {
	t.Helper()
	var doc meDoc
	meAt(ctx, t, s.URL(), key, &doc)
	return doc
}

// meAt asks /tt/v1/me of the gateway at base with key (none if ""), reads
// it into v, and returns the document.
func meAt(ctx context.Context, t testing.TB, base, key string, v any) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+devserver.MePath, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, b := testkit.Send(t, req)
	if err := json.Unmarshal(b, v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/tt/v1/me: %d %s (%v)", resp.StatusCode, b, err)
	}
	return string(b)
}

// nanos reads a dollar figure of the wire ("0.0000297") as nanodollars,
// exactly.
func nanos(n json.Number) (int64, error) {
	s := n.String()
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 9 || strings.ContainsAny(s, "eE-+") {
		return 0, fmt.Errorf("%q is not a dollar figure on the nanodollar grid", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	if err != nil {
		return 0, err
	}
	return w*1e9 + f, nil
}

// counter is the accountant's value of the counter of limit id at node, as
// its sync snapshot publishes it (0 when it has none yet).
func counter(t testing.TB, s *devserver.Server, id, node string) int64 {
	t.Helper()
	armed := s.Accountant().Armed()
	var ident string
	for _, in := range armed.ResolveAll(govern.Chain(node, ""), govern.Dims{}, nil) {
		if in.Limit.ID == id && in.Node == node {
			ident = in.ID
		}
	}
	if ident == "" {
		t.Fatalf("no instance of %s at %s in the accountant's plan", id, node)
	}
	snap, err := s.Accountant().Sync(accountant.Held{}, syncwire.MaxPageBytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range snap.Snapshot.Entries {
		if e.ID == ident {
			return e.Value
		}
	}
	return 0
}
