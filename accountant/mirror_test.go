package accountant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// node is one accountant of an in-process fleet, serving on loopback.
type node struct {
	t       testing.TB
	config  string
	data    string
	addr    string
	control string
	logs    *testkit.Buffer
	s       *Server
	stop    context.CancelFunc
	done    chan error
}

// startNode starts an accountant on addr ("127.0.0.1:0" for a free port)
// mirroring control ("" for an owner).
func startNode(t testing.TB, config, data, addr, control string) *node {
	t.Helper()
	return startNodeWith(t, addr, Options{ConfigPath: config, DataDir: data, Control: control})
}

// startNodeWith starts an accountant on addr with o, its listen address,
// tokens and logger filled in.
func startNodeWith(t testing.TB, addr string, o Options) *node {
	t.Helper()
	n := &node{t: t, config: o.ConfigPath, data: o.DataDir, control: o.Control, logs: &testkit.Buffer{}}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	n.addr = ln.Addr().String()
	o.Listen = n.addr
	o.AdminToken, o.InternalToken = "admin-secret", testInternalToken
	o.Logger = slog.New(slog.NewTextHandler(n.logs, nil))
	if _, bench := t.(*testing.B); bench {
		o.APIWriteRate = -1 // a benchmark writes as fast as it can
	}
	n.s, err = New(o)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	n.stop, n.done = stop, make(chan error, 1)
	go func() { n.done <- n.s.Serve(ctx, ln) }()
	t.Cleanup(n.close)
	return n
}

func (n *node) url() string { return "http://" + n.addr }

func (n *node) close() {
	if n.stop == nil {
		return
	}
	n.stop()
	if err := <-n.done; err != nil {
		n.t.Errorf("accountant %s: %v", n.addr, err)
	}
	n.stop = nil
}

func (n *node) admin() *api.Client {
	return &api.Client{BaseURL: n.url(), Token: "admin-secret", HTTP: &http.Client{Timeout: time.Minute}}
}

// sync polls the node as filter replica id holding the given versions; an
// empty id polls without counting as a replica.
func (n *node) sync(id, plan, runtime string) syncwire.Sync {
	n.t.Helper()
	resp, err := internalClient.Get(n.url() + syncwire.SyncPath + "?replica=" + id + "&plan=" + plan + "&runtime=" + runtime)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	var s syncwire.Sync
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusOK {
		n.t.Fatalf("sync: %d %v", resp.StatusCode, err)
	}
	return s
}

// key finds the key table entry of kid in n's sync.
func (n *node) key(kid string) (syncwire.Key, bool) {
	for _, k := range n.sync("", "", "").Runtime.Keys {
		if k.KID == kid {
			return k, true
		}
	}
	return syncwire.Key{}, false
}

// eventually waits until cond holds, failing with what it last saw when
// the test's deadline nears.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Minute)
	}
	var last string
	for time.Now().Before(deadline.Add(-15 * time.Second)) {
		var done bool
		if done, last = cond(); done {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never happened; last: %s", what, last)
}

func writeConfig(t testing.TB, dir, config string) string {
	t.Helper()
	return testkit.WriteFile(t, dir, "tokentriage.yaml", []byte(config))
}

// setConfig writes config over the fixture's config file.
func (f *fixture) setConfig(t testing.TB, config string) {
	t.Helper()
	testkit.WriteFile(t, filepath.Dir(f.config), filepath.Base(f.config), []byte(config))
}

// TestMirrorServesTheOwnersKeys: a key minted on the owner is in every
// mirror's sync as soon as the owner took it (the mirrors' pulls wait at
// the owner for the change), and a revoke reaches them the same way.
func TestMirrorServesTheOwnersKeys(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, overrideConfig)
	owner := startNode(t, cfg, filepath.Join(dir, "owner"), "127.0.0.1:0", "")
	a := startNode(t, cfg, filepath.Join(dir, "a"), "127.0.0.1:0", owner.url())
	b := startNode(t, cfg, filepath.Join(dir, "b"), "127.0.0.1:0", owner.url())
	ctx := context.Background()
	k, err := owner.admin().MintKey(ctx, "org:acme/team:ml", vkey.Scopes{})
	if err != nil {
		t.Fatal(err)
	}
	want := owner.sync("r0", "", "")
	for _, m := range []*node{a, b} {
		eventually(t, "the minted key reaching mirror "+m.addr, func() (bool, string) {
			got, ok := m.key(k.KID)
			return ok && got.SHA256 == vkey.Hash(k.Key) && !got.Revoked, "not there"
		})
		s := m.sync("r-"+m.addr, "", "")
		if s.Runtime.Cursor != want.Runtime.Cursor {
			t.Errorf("mirror %s serves the runtime feed to %s, the owner to %s", m.addr, s.Runtime.Cursor, want.Runtime.Cursor)
		}
	}
	if _, err := owner.admin().RevokeKey(ctx, k.KID); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*node{a, b} {
		eventually(t, "the revoke reaching mirror "+m.addr, func() (bool, string) {
			got, _ := m.key(k.KID)
			return got.Revoked, "not revoked"
		})
	}
	for _, m := range []*node{a, b} {
		if h := get(t, m.url()+"/healthz"); !strings.Contains(h, "runtime plane: mirror of "+owner.url()+"; version ") {
			t.Errorf("mirror healthz: %s", h)
		}
	}
	if h := get(t, owner.url()+"/healthz"); !strings.HasPrefix(h, "ok\nruntime plane: owner; version ") || !strings.Contains(h, "; 2 mirror(s) pulled within 30s") {
		t.Errorf("owner healthz: %s", h)
	}
}

// ownerAndMirror starts an owner of overrideConfig and a mirror of it,
// on loopback.
func ownerAndMirror(t testing.TB) (owner, mirror *node) {
	t.Helper()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, overrideConfig)
	owner = startNode(t, cfg, filepath.Join(dir, "owner"), "127.0.0.1:0", "")
	return owner, startNode(t, cfg, filepath.Join(dir, "m"), "127.0.0.1:0", owner.url())
}

// get is the body of GET url.
func get(t *testing.T, url string) string {
	t.Helper()
	_, body := testkit.Get(t, url)
	return body
}

// TestMirrorForwardsWrites: a management write sent to a mirror is made on
// the owner (answered with the owner's answer and its address), and reads
// back from the mirror at once; with the owner down the mirror refuses it
// with a 503 naming the owner, keeps serving its copy, and says so in its
// metric, log and health; when the owner is back it mirrors it again.
func TestMirrorForwardsWrites(t *testing.T) {
	owner, m := ownerAndMirror(t)
	ctx := context.Background()

	k, err := m.admin().MintKey(ctx, "org:acme/team:ml", vkey.Scopes{})
	if err != nil {
		t.Fatalf("minting through the mirror: %v", err)
	}
	if _, ok := m.key(k.KID); !ok {
		t.Fatal("a key minted through the mirror is not in its own sync right after the answer")
	}
	if _, ok := owner.key(k.KID); !ok {
		t.Fatal("a key minted through the mirror is not on the owner")
	}
	keys, err := m.admin().ListKeys(ctx, "")
	if err != nil || len(keys) != 1 || keys[0].KID != k.KID {
		t.Fatalf("GET keys on the mirror: %+v %v", keys, err)
	}
	req, _ := http.NewRequest(http.MethodPut, m.url()+api.Prefix+"overrides", strings.NewReader(`{"limit_id":"team_budget","node":"org:acme/team:ml","amount_usd":2}`))
	req.Header.Set("Authorization", "Bearer admin-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(ForwardedToHeader) != owner.url() {
		t.Fatalf("PUT overrides through the mirror: %d %s %q", resp.StatusCode, body, resp.Header.Get(ForwardedToHeader))
	}
	if ovs := m.sync("r", "", "").Runtime.Overrides; len(ovs) != 1 || ovs[0].Amount != 2_000_000_000 {
		t.Fatalf("the override is not in the mirror's sync: %+v", ovs)
	}
	// A write refused by the owner comes back as the owner said it.
	if _, err := m.admin().MintKey(ctx, "org:nope", vkey.Scopes{}); err == nil || !strings.Contains(err.Error(), "org:nope") {
		t.Fatalf("a bad mint through the mirror: %v", err)
	}
	// A reload is the mirror's own.
	req, _ = http.NewRequest(http.MethodPost, m.url()+api.Prefix+"reload", nil)
	req.Header.Set("Authorization", "Bearer admin-secret")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get(ForwardedToHeader) != "" {
		t.Fatalf("reload on the mirror: %v %v", resp, err)
	}

	ownerURL, ownerData := owner.addr, owner.data
	owner.close()
	_, err = m.admin().MintKey(ctx, "org:acme/team:ml", vkey.Scopes{})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Type != "owner_unreachable" ||
		!strings.Contains(ae.Message, "this accountant mirrors the runtime plane of "+owner.url()+", where keys, nodes, overrides and admins are written, and the owner did not answer") {
		t.Fatalf("a write while the owner is down: %v", err)
	}
	if got, ok := m.key(k.KID); !ok || got.Revoked {
		t.Fatal("the mirror stopped serving its copy while the owner is down")
	}
	eventually(t, "the mirror saying the owner is away", func() (bool, string) {
		h := get(t, m.url()+"/healthz")
		metrics := get(t, m.url()+"/metrics")
		return strings.Contains(h, "the owner has not answered since") && strings.Contains(h, "serving the last copy") &&
			strings.Contains(metrics, "tt_accountant_control_reachable 0") &&
			strings.Contains(m.logs.String(), "runtime plane: no copy from the owner; serving the last copy until one arrives"), h
	})

	owner = startNode(t, owner.config, ownerData, ownerURL, "")
	eventually(t, "the mirror mirroring again", func() (bool, string) {
		h := get(t, m.url()+"/healthz")
		return strings.Contains(get(t, m.url()+"/metrics"), "tt_accountant_control_reachable 1") &&
			strings.Contains(m.logs.String(), "runtime plane: the owner answers again"), h
	})
	k2, err := m.admin().MintKey(ctx, "org:acme/team:ml", vkey.Scopes{})
	if err != nil {
		t.Fatalf("minting through the mirror after the owner came back: %v", err)
	}
	if _, ok := m.key(k2.KID); !ok {
		t.Fatal("the new key is not on the mirror")
	}
}

// TestMirrorOfItselfIsNamed: an accountant whose --control names its own
// address is told so in its log, not to point --control at that address.
func TestMirrorOfItselfIsNamed(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, overrideConfig)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n := startNode(t, cfg, filepath.Join(dir, "self"), addr, "http://"+addr)
	// The first pull may find the server not answering yet; a later one
	// reaches it and is refused.
	for !strings.Contains(n.logs.String(), "the owner answered 409") {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(n.logs.String(), "--control http://"+addr+" names this accountant itself") {
		t.Fatalf("the refusal does not name the mirror of itself; the log:\n%s", n.logs.String())
	}
}

// TestMirrorRefusesWhatOnlyAnOwnerDoes: a mirror answers no pulls (its
// --control must name the owner), refuses a write another mirror forwarded
// (a loop), and needs the internal or admin token like any internal call.
func TestMirrorRefusesWhatOnlyAnOwnerDoes(t *testing.T) {
	owner, m := ownerAndMirror(t)

	pull := func(url, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, url+PlanePath, strings.NewReader(`{"mirror":"x","have":""}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, errorMessage(b)
	}
	if code, msg := pull(m.url(), testInternalToken); code != http.StatusConflict || !strings.Contains(msg, "this accountant mirrors the runtime plane of "+owner.url()+"; a mirror pulls from the owner") {
		t.Errorf("a pull from a mirror: %d %s", code, msg)
	}
	for _, tok := range []string{"", "wrong"} {
		if code, _ := pull(owner.url(), tok); code != http.StatusUnauthorized {
			t.Errorf("a pull with token %q: %d", tok, code)
		}
	}
	for _, tok := range []string{testInternalToken, "admin-secret"} {
		if code, msg := pull(owner.url(), tok); code != http.StatusOK {
			t.Errorf("a pull with the token %q: %d %s", tok, code, msg)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, m.url()+api.Prefix+"keys", strings.NewReader(`{"owner":"org:acme"}`))
	req.Header.Set("Authorization", "Bearer admin-secret")
	req.Header.Set(ForwardedByHeader, "another-mirror")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusLoopDetected || !strings.Contains(string(b), "every --control must name the owner") {
		t.Errorf("a forwarded write reaching a mirror: %d %s", resp.StatusCode, b)
	}
}

// TestPlaneRoles: a data directory with a plane of its own cannot become
// a mirror, and a mirror's cannot become an owner without --promote.
func TestPlaneRoles(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, overrideConfig)
	quiet := slog.New(slog.DiscardHandler)
	owner := startNode(t, cfg, filepath.Join(dir, "owner"), "127.0.0.1:0", "")
	if _, err := owner.admin().MintKey(context.Background(), "org:acme", vkey.Scopes{}); err != nil {
		t.Fatal(err)
	}
	m := startNode(t, cfg, filepath.Join(dir, "m"), "127.0.0.1:0", owner.url())
	m.close()
	owner.close()

	_, err := New(Options{ConfigPath: cfg, DataDir: owner.data, Control: "http://127.0.0.1:1", InternalToken: testInternalToken, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "accountant: --control http://127.0.0.1:1: governance.db holds a runtime plane of its own (1 keys, 0 nodes and overrides, 1 audit entries)") ||
		!strings.Contains(err.Error(), "move governance.db aside") {
		t.Errorf("an owner's data started as a mirror: %v", err)
	}
	_, err = New(Options{ConfigPath: cfg, DataDir: m.data, InternalToken: testInternalToken, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "mirrors another accountant's runtime plane") || !strings.Contains(err.Error(), "or with --promote") {
		t.Errorf("a mirror's data started as an owner: %v", err)
	}
	for _, bad := range []string{"owner:8791", "ftp://x", "http://", "http://h:1/?q=1"} {
		if _, err := New(Options{ConfigPath: cfg, DataDir: filepath.Join(dir, "x"), Control: bad, InternalToken: testInternalToken, Logger: quiet}); err == nil || !strings.Contains(err.Error(), "is not the owner accountant's base URL") {
			t.Errorf("--control %q: %v", bad, err)
		}
	}
	p, err := New(Options{ConfigPath: cfg, DataDir: m.data, Promote: true, InternalToken: testInternalToken, Logger: quiet})
	if err != nil {
		t.Fatalf("promoting: %v", err)
	}
	defer p.Close()
	if owners, err := p.db.KeyOwners(); err != nil || len(owners) != 1 {
		t.Errorf("the promoted mirror holds keys of %v (%v), want the 1 it mirrored", owners, err)
	}
}

// overrideState reads GET overrides on n: the state and reason of the one
// override there is.
func (n *node) overrideState() (string, string) {
	n.t.Helper()
	var l api.OverrideList
	if err := n.getJSON("overrides", &l); err != nil || len(l.Overrides) != 1 {
		n.t.Fatalf("GET overrides: %+v %v", l, err)
	}
	return l.Overrides[0].State, l.Overrides[0].Reason
}

// getJSON decodes into out the answer to GET path of the management API,
// asked as the admin.
func (n *node) getJSON(path string, out any) error {
	n.t.Helper()
	req, err := http.NewRequest(http.MethodGet, n.url()+api.Prefix+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer admin-secret")
	_, body := testkit.Send(n.t, req)
	return json.Unmarshal(body, out)
}

// TestOverrideInForceMeansTheWholeFleet: an override reads in_force, on
// the owner and on a mirror, only once every live filter replica of the
// fleet holds it, the mirror's included.
func TestOverrideInForceMeansTheWholeFleet(t *testing.T) {
	owner, m := ownerAndMirror(t)

	// Two filter replicas, one on each accountant, both current.
	hold := func(n *node, id string, s syncwire.Sync) syncwire.Sync {
		return n.sync(id, s.Plan.Version, s.Runtime.Cursor)
	}
	r1 := owner.sync("r1", "", "")
	r2 := m.sync("r2", "", "")
	r1, r2 = hold(owner, "r1", r1), hold(m, "r2", r2)

	req, _ := http.NewRequest(http.MethodPut, owner.url()+api.Prefix+"overrides", strings.NewReader(`{"limit_id":"team_budget","node":"org:acme/team:ml","amount_usd":3}`))
	req.Header.Set("Authorization", "Bearer admin-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT overrides: %v %v", resp, err)
	}
	resp.Body.Close()
	eventually(t, "the override reaching the mirror", func() (bool, string) {
		return len(m.sync("", "", "").Runtime.Overrides) == 1, "not yet"
	})

	// r1 picks it up; r2, on the mirror, has not polled since.
	r1 = hold(owner, "r1", owner.sync("r1", r1.Plan.Version, "stale"))
	eventually(t, "the owner counting the mirror's replica", func() (bool, string) {
		state, reason := owner.overrideState()
		return state == "armed" && strings.Contains(reason, "1 of 2 live gateway replicas hold it"), state + ": " + reason
	})
	if state, _ := m.overrideState(); state == "in_force" {
		t.Error("the mirror reads in_force while its own replica does not hold the override")
	}

	r2 = hold(m, "r2", m.sync("r2", r2.Plan.Version, "stale"))
	for _, n := range []*node{owner, m} {
		eventually(t, "in_force on "+n.addr, func() (bool, string) {
			state, reason := n.overrideState()
			return state == "in_force", state + ": " + reason
		})
	}
}

// audit reads the audit log of n as the admin.
func (n *node) audit() []runtime.AuditEntry {
	n.t.Helper()
	var page struct {
		Entries []runtime.AuditEntry `json:"entries"`
	}
	if err := n.getJSON("audit", &page); err != nil {
		n.t.Fatal(err)
	}
	return page.Entries
}

// reloads counts the config reloads of the audit log whose config names
// mirror.
func reloads(entries []runtime.AuditEntry, mirror string) int {
	n := 0
	for _, e := range entries {
		if e.Action == runtime.ActionConfigReload && strings.HasPrefix(e.Target, mirror+":") {
			n++
		}
	}
	return n
}

// TestMirrorReloadsReachTheOwnersAudit: a mirror's own config reload is
// written to the owner's audit log (the config named as the mirror's) and
// comes back in every copy; one made while the owner is away is sent
// once it answers again.
func TestMirrorReloadsReachTheOwnersAudit(t *testing.T) {
	owner, m := ownerAndMirror(t)
	name := m.s.mirror.name
	if err := m.s.ReloadBy("admin"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reload in the owner's audit log and the mirror's copy", func() (bool, string) {
		o, c := reloads(owner.audit(), name), reloads(m.audit(), name)
		return o == 1 && c == 1, fmt.Sprintf("owner %d, mirror %d", o, c)
	})

	addr, data := owner.addr, owner.data
	owner.close()
	if err := m.s.Reload(); err != nil {
		t.Fatal(err)
	}
	owner = startNode(t, owner.config, data, addr, "")
	eventually(t, "the reload made while the owner was away in its audit log", func() (bool, string) {
		o := reloads(owner.audit(), name)
		return o == 2, fmt.Sprintf("owner %d", o)
	})
}
