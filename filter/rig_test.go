package filter_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/internal/testwasm"
	"github.com/tokentriage/tokentriage/shared/vkey"
	"github.com/tokentriage/tokentriage/shared/wire"
	"github.com/tokentriage/tokentriage/wasmtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the filter's answers")

// t0 is the instant every scenario starts at. It is the one seed 000's
// budget capture was taken at: the month ends 1,912,510 s later.
var t0 = time.Date(2026, 8, 9, 20, 44, 50, 0, time.UTC)

// tStart is where the clock of a rig starts: one sync interval before t0,
// so that a scenario that syncs first meets t0 exactly.
var tStart = t0.Add(-time.Second)

// testKey is a virtual key of the test's tree.
type testKey struct {
	key, kid, owner string
	scopes          string // JSON of the scopes, "" for none
}

func newTestKey(kid, owner string) testKey {
	// 32 base62 characters of secret, derived from the kid so each key is
	// distinct and the test stays deterministic.
	secret := (kid[3:] + "3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4oP")[:32]
	k := testKey{key: "tt-" + kid + "-" + secret, kid: kid, owner: owner}
	if got, err := vkey.KID(k.key); err != nil || got != kid {
		panic(fmt.Sprintf("test key %q: kid %q, %v", k.key, got, err))
	}
	return k
}

func (k testKey) withScopes(scopes string) testKey { k.scopes = scopes; return k }

func (k testKey) staticJSON() string {
	s := k.scopes
	if s == "" {
		s = "{}"
	}
	return fmt.Sprintf(`{"kid":%q,"sha256":%q,"owner":%q,"scopes":%s}`, k.kid, vkey.Hash(k.key), k.owner, s)
}

// The keys of seed 004's tree.
var (
	dev1Key   = newTestKey("vk_FEKZdMs2UQRi", "org:acme/team:ml/user:dev1")
	dev2Key   = newTestKey("vk_dev2dev2dev2", "org:acme/team:ml/user:dev2")
	searchKey = newTestKey("vk_searchsearch", "org:acme/team:search")
)

// seedTenants is seed 004's tree.
const seedTenants = `"tenants":[{"org":"acme","teams":["ml","search"],"users":{"ml":["dev1","dev2"]}}]`

// gov wraps limits (a JSON array body) into an enabled governance block on
// seed 004's tree; extra is appended to the block (e.g. `,"require_key":true`).
func gov(limits string, extra ...string) string {
	return `{"enabled":true,` + seedTenants + `,"limits":[` + limits + `]` + strings.Join(extra, "") + `}`
}

// rigOptions shape one host.
type rigOptions struct {
	// governance is the embedded governance block (JSON); "" means the plan
	// comes from the accountant.
	governance string
	keys       []testKey
	// accountant wires the accountant cluster to a fakeAccountant.
	accountant bool
	workers    int
	// extra plugin configuration members, e.g. `"max_body_bytes":1000`.
	extra []string
	// upstream replaces the stub.
	upstream http.Handler
	// acct seeds the accountant's state before the host starts.
	acct func(a *fakeAccountant)
	// acctHandler, when set, answers the accountant cluster instead of a
	// fakeAccountant (accountant must be set too).
	acctHandler http.Handler
	// log receives every line the VMs log.
	log io.Writer
	// headersGo runs the filter without hold_headers, on a host without
	// Envoy's allow_on_headers_stop_iteration: a governed request's
	// headers go upstream at gate 1. By default they wait for gate 2.
	headersGo bool
	// noStopIteration keeps hold_headers on a host without Envoy's
	// allow_on_headers_stop_iteration (a misconfiguration).
	noStopIteration bool
	// routes and clusters are the host's route table and extra clusters.
	routes   []wasmtest.Route
	clusters map[string]wasmtest.Cluster
	// poll and phases are the host's poll_oneoff answer and restricted
	// phase lists (wasmtest.Config.PollOneoff, PhaseCalls).
	poll   wasmtest.PollMode
	phases *wasmtest.PhaseCalls
	// bufferLimit is the host's buffer limit (Envoy's per-filter one);
	// 0 is wasmtest's default, 1 MiB.
	bufferLimit int
}

// rig is one host running the real filter.wasm, with a manual clock, the
// stub upstream and, when asked, a fake accountant.
type rig struct {
	t     testing.TB
	h     *wasmtest.Host
	clock *wasmtest.ManualClock
	stub  *stub.Stub
	acct  *fakeAccountant
	opts  rigOptions
}

func (o rigOptions) pluginConfig() string {
	var parts []string
	if o.governance != "" {
		parts = append(parts, `"governance":`+o.governance)
	}
	if o.accountant {
		parts = append(parts, `"accountant":{"cluster":"accountant"}`)
	}
	if len(o.keys) > 0 {
		ks := make([]string, len(o.keys))
		for i, k := range o.keys {
			ks[i] = k.staticJSON()
		}
		parts = append(parts, `"keys":[`+strings.Join(ks, ",")+`]`)
	}
	if !o.headersGo {
		parts = append(parts, `"hold_headers":true`)
	}
	parts = append(parts, o.extra...)
	return "{" + strings.Join(parts, ",") + "}"
}

// accountantRig is a rig governing limits, a key required, with an
// accountant; dev1Key may call.
func accountantRig(t testing.TB, limits string) *rig {
	return newRig(t, rigOptions{governance: gov(limits, `,"require_key":true`), keys: []testKey{dev1Key}, accountant: true})
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	if o.workers == 0 {
		o.workers = 3
	}
	r := &rig{t: t, clock: wasmtest.NewManualClock(tStart), stub: stub.New(stub.Options{History: 256}), opts: o}
	cfg := wasmtest.Config{
		Module:       testwasm.Filter(t),
		PluginConfig: []byte(o.pluginConfig()),
		Workers:      o.workers,
		Clock:        r.clock,
		Upstream:     wasmtest.Cluster{Handler: r.stub},
		MaxLogs:      1 << 14,
		Log:          o.log,

		AllowOnHeadersStopIteration: !o.headersGo && !o.noStopIteration,
		PollOneoff:                  o.poll,
		PhaseCalls:                  o.phases,
		BufferLimit:                 o.bufferLimit,
	}
	if o.upstream != nil {
		cfg.Upstream = wasmtest.Cluster{Handler: o.upstream}
	}
	if o.accountant {
		r.acct = newFakeAccountant(r.clock)
		if o.acct != nil {
			o.acct(r.acct)
		}
		cfg.Clusters = map[string]wasmtest.Cluster{"accountant": {Handler: r.acct}}
		if o.acctHandler != nil {
			cfg.Clusters["accountant"] = wasmtest.Cluster{Handler: o.acctHandler}
		}
	}
	for name, c := range o.clusters {
		if cfg.Clusters == nil {
			cfg.Clusters = map[string]wasmtest.Cluster{}
		}
		cfg.Clusters[name] = c
	}
	cfg.Routes = o.routes
	h, err := wasmtest.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("starting the host: %v\nplugin configuration: %s", err, o.pluginConfig())
	}
	r.h = h
	t.Cleanup(func() {
		r.checkHealthy()
		h.Close()
	})
	return r
}

// checkHealthy fails the test when a VM trapped or the filter logged an
// error it should not have.
func (r *rig) checkHealthy() {
	r.t.Helper()
	for n := 1; n <= r.h.Workers(); n++ {
		if failed, why := r.h.Failed(n); failed {
			r.t.Errorf("worker VM %d failed: %s", n, why)
		}
	}
	for _, l := range r.h.Logs() {
		if l.Level >= wasmtest.LogCritical || strings.Contains(l.Message, "panic") {
			r.t.Errorf("VM %d logged %s: %s", l.VM, l.Level, l.Message)
		}
	}
}

// step advances the clock by d and waits for every callout the ticks made
// to be answered, twice, so that an answer written on one tick is read by
// every VM on the next.
func (r *rig) step(d time.Duration) {
	r.t.Helper()
	r.clock.Advance(d)
	r.wait()
}

func (r *rig) wait() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.h.WaitCallouts(ctx); err != nil {
		r.t.Fatalf("waiting for callouts: %v", err)
	}
}

// sync runs ticks until the accountant's answer is in every VM: one sync
// interval for the poll, a wait for its answer.
func (r *rig) sync() {
	r.t.Helper()
	r.step(time.Second)
	r.step(0)
}

// req is a request of the tests.
type req struct {
	method, path string
	key          testKey
	apiKey       bool // send the key in x-api-key instead of Authorization
	body         string
	headers      map[string]string
	vm           int
	ctx          context.Context
	chunks       []string
}

func (r *rig) do(q req) wasmtest.Response {
	r.t.Helper()
	hdr := http.Header{}
	if q.body != "" || len(q.chunks) > 0 {
		hdr.Set("Content-Type", "application/json")
	}
	if q.key.key != "" {
		if q.apiKey {
			hdr.Set("X-Api-Key", q.key.key)
		} else {
			hdr.Set("Authorization", "Bearer "+q.key.key)
		}
	}
	for k, v := range q.headers {
		hdr.Set(k, v)
	}
	wq := wasmtest.Request{Method: q.method, Path: q.path, Headers: hdr, VM: q.vm, Context: q.ctx}
	if q.body != "" {
		wq.BodyChunks = [][]byte{[]byte(q.body)}
	}
	for _, c := range q.chunks {
		wq.BodyChunks = append(wq.BodyChunks, []byte(c))
	}
	if wq.Method == "" && len(wq.BodyChunks) > 0 {
		wq.Method = "POST"
	}
	return r.h.Do(wq)
}

// The bodies of the tests.
const (
	germany     = "What is the capital of Germany?"
	chatGermany = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What is the capital of Germany?"}]}`
)

func chatBody(model, content string, extra ...string) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]%s}`, model, content, strings.Join(extra, ""))
}

func messagesBody(model, content string, extra ...string) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":100,"messages":[{"role":"user","content":%q}]%s}`, model, content, strings.Join(extra, ""))
}

func (r *rig) chat(k testKey, body string, headers ...string) wasmtest.Response {
	r.t.Helper()
	q := req{path: "/v1/chat/completions", key: k, body: body, headers: map[string]string{}}
	for i := 0; i+1 < len(headers); i += 2 {
		q.headers[headers[i]] = headers[i+1]
	}
	return r.do(q)
}

func (r *rig) me(k testKey) wasmtest.Response {
	r.t.Helper()
	return r.do(req{method: "GET", path: "/tt/v1/me", key: k})
}

// meLimit returns the /tt/v1/me row of one limit for key k.
func (r *rig) meLimit(k testKey, limitID string) map[string]any {
	r.t.Helper()
	resp := r.me(k)
	if resp.Status != 200 {
		r.t.Fatalf("/tt/v1/me: %d %s", resp.Status, resp.Body)
	}
	var doc struct {
		Limits []map[string]any `json:"limits"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		r.t.Fatalf("/tt/v1/me: %v: %s", err, resp.Body)
	}
	for _, l := range doc.Limits {
		if l["limit_id"] == limitID {
			return l
		}
	}
	r.t.Fatalf("/tt/v1/me has no limit %s: %s", limitID, resp.Body)
	return nil
}

func (r *rig) metric(name string) int64 {
	v, _ := r.h.Metric(name)
	return v
}

// mustStatus fails unless resp has the status.
func mustStatus(t testing.TB, resp wasmtest.Response, status int) {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("status %d, want %d\nheaders: %v\nbody: %s", resp.Status, status, resp.Headers, resp.Body)
	}
}

var requestIDPattern = regexp.MustCompile(`tt_[a-z2-7]{26}`)

// render writes a response as the golden files hold it: the status, the
// headers sorted by name, a blank line and the body, with request ids
// (checked first) replaced by a placeholder.
func render(t testing.TB, resp wasmtest.Response) string {
	t.Helper()
	id := resp.Headers.Get(wire.HeaderRequestID)
	if !wire.ValidRequestID(id) {
		t.Errorf("X-Tt-Request-Id %q is not a request id", id)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\n", resp.Status, http.StatusText(resp.Status))
	names := make([]string, 0, len(resp.Headers))
	for k := range resp.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range resp.Headers[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("\n")
	b.Write(resp.Body)
	b.WriteString("\n")
	return requestIDPattern.ReplaceAllString(b.String(), "tt_<request-id>")
}

// golden compares got with testdata/name.golden, or writes it with -update.
func golden(t testing.TB, name, got string) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name+".golden"), []byte(got), *update)
}

// parallel runs f(i) for i in [0,n) from n goroutines released together.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			f(i)
		}(i)
	}
	close(start)
	wg.Wait()
}
