package devserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/internal/testwasm"
	"github.com/tokentriage/tokentriage/shared/pluginconf"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// testContext ends a little before the test binary's deadline, so a wait
// that never ends fails with what it saw.
var testContext = testkit.Context

// mintKey mints a key for owner with no scopes and waits until the gateway
// knows it.
func mintKey(ctx context.Context, tb testing.TB, s *Server, owner string) api.MintedKey {
	tb.Helper()
	k, err := s.MintKey(ctx, owner, vkey.Scopes{})
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func start(t *testing.T, o Options) *Server {
	t.Helper()
	if o.ConfigPath == "" {
		o.ConfigPath = "testdata/dev.yaml"
	}
	o.DataDir = t.TempDir()
	o.Listen, o.AccountantListen = "127.0.0.1:0", "127.0.0.1:0"
	o.Workers = 2
	o.Module = testwasm.Filter(t)
	o.AdminToken = "test-admin-token"
	s, err := Start(testContext(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// provider is a fake real provider: the stub, recording the headers of
// each request as they arrived over the network.
type provider struct {
	stub *stub.Stub
	mu   sync.Mutex
	seen []http.Header
	host []string
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.seen = append(p.seen, r.Header.Clone())
	p.host = append(p.host, r.Host)
	p.mu.Unlock()
	p.stub.ServeHTTP(w, r)
}

// TestProviderGetsTheProxysKeyNeverTheClients sends requests with every
// credential a client can put in them to a URL upstream: the provider sees
// only the key the proxy holds for its path, under its own host name, and
// is asked for an uncompressed answer.
func TestProviderGetsTheProxysKeyNeverTheClients(t *testing.T) {
	p := &provider{stub: stub.New(stub.Options{})}
	up := httptest.NewServer(p)
	defer up.Close()
	s := start(t, Options{Upstream: up.URL + "/", OpenAIKey: "sk-openai-proxy", AnthropicKey: "sk-ant-proxy"})
	if s.Stub() != nil || s.Upstream() != up.URL+"/" {
		t.Errorf("upstream %q, stub %v", s.Upstream(), s.Stub())
	}
	ctx := testContext(t)
	k := mintKey(ctx, t, s, "org:acme/team:ml/user:dev1")
	for _, c := range []struct {
		path, body string
		header     map[string]string
		wantAuth   string
		wantAPIKey string
		wantKept   map[string]string // headers that are no credential and pass
	}{
		{
			path: "/v1/chat/completions",
			body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
			header: map[string]string{"Authorization": "Bearer " + k.Key, "X-Api-Key": "client-secret", "Accept-Encoding": "gzip",
				"Api-Key": "client-secret-azure", "X-Goog-Api-Key": "client-secret-google", "Cookie": "session=client-secret",
				"Proxy-Authorization": "Basic client-secret", "OpenAI-Organization": "org-x",
				"X-Forwarded-Authorization": "Bearer client-secret-fwd", "X-Original-Authorization": "Bearer client-secret-orig",
				"X-Auth-Token": "client-secret-token", "X-Access-Token": "client-secret-access", "X-Forwarded-Access-Token": "client-secret-oauth",
				"X-Amz-Security-Token": "client-secret-aws", "Ocp-Apim-Subscription-Key": "client-secret-apim", "Apikey": "client-secret-kong",
				"Cf-Access-Jwt-Assertion": "client-secret-jwt", "X-Client-Secret": "client-secret-x", "X-Stainless-Lang": "go"},
			wantAuth: "Bearer sk-openai-proxy",
			wantKept: map[string]string{"OpenAI-Organization": "org-x", "X-Stainless-Lang": "go"},
		},
		{
			path:       "/v1/messages",
			body:       `{"model":"claude-3-5-haiku-latest","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`,
			header:     map[string]string{"X-Api-Key": k.Key, "Authorization": "Bearer client-secret", "Anthropic-Version": "2023-06-01", "Api-Key": "client-secret"},
			wantAPIKey: "sk-ant-proxy",
			wantKept:   map[string]string{"Anthropic-Version": "2023-06-01"},
		},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+c.path, strings.NewReader(c.body))
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		resp, body := testkit.Send(t, req)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", c.path, resp.StatusCode, body)
		}
		p.mu.Lock()
		h, host := p.seen[len(p.seen)-1], p.host[len(p.host)-1]
		p.mu.Unlock()
		if got := h.Get("Authorization"); got != c.wantAuth {
			t.Errorf("%s: the provider saw Authorization %q, want %q", c.path, got, c.wantAuth)
		}
		if got := h.Get("X-Api-Key"); got != c.wantAPIKey {
			t.Errorf("%s: the provider saw X-Api-Key %q, want %q", c.path, got, c.wantAPIKey)
		}
		if got := h.Get("Accept-Encoding"); got != "" {
			t.Errorf("%s: the provider was asked for %q", c.path, got)
		}
		for name, want := range c.wantKept {
			if got := h.Get(name); got != want {
				t.Errorf("%s: the provider saw %s %q, want %q", c.path, name, got, want)
			}
		}
		if want := strings.TrimPrefix(up.URL, "http://"); host != want {
			t.Errorf("%s: the provider saw Host %q, want %q", c.path, host, want)
		}
		for name, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, k.Key) || strings.Contains(v, "client-secret") {
					t.Errorf("%s: a client credential reached the provider in %s: %q", c.path, name, v)
				}
			}
		}
	}
}

func TestStartRefusesBadUpstream(t *testing.T) {
	_, err := Start(testContext(t), Options{ConfigPath: "testdata/dev.yaml", DataDir: t.TempDir(), Module: []byte{0}, Upstream: "api.openai.com"})
	want := `devserver: upstream "api.openai.com": write "stub" for the built-in stub, or a provider base URL such as https://api.openai.com`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	for base, fixed := range map[string]string{
		"https://api.openai.com/v1":      "https://api.openai.com",
		"http://127.0.0.1:9420/v1/":      "http://127.0.0.1:9420",
		"https://gw.example/openai/v1":   "https://gw.example/openai",
		"https://gw.example/openai/v1//": "https://gw.example/openai",
	} {
		_, err := Start(testContext(t), Options{ConfigPath: "testdata/dev.yaml", DataDir: t.TempDir(), Module: []byte{0}, Upstream: base})
		want := `devserver: upstream "` + base + `": the gateway adds each request's own path (/v1/chat/completions) after the base URL, so this one would send /v1/v1/chat/completions; pass the base URL without /v1: ` + fixed
		if err == nil || err.Error() != want {
			t.Errorf("got %v\nwant %s", err, want)
		}
	}
	for _, base := range []string{"https://api.openai.com", "https://api.openai.com/", "https://gw.example/v1beta", "https://gw.example/v1x/"} {
		if _, err := CheckUpstream(base); err != nil {
			t.Errorf("%s: %v", base, err)
		}
	}
}

func TestStartNamesTheBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Start(testContext(t), Options{ConfigPath: "testdata/dev.yaml", DataDir: t.TempDir(), Module: []byte{0}, AccountantListen: ln.Addr().String()})
	if err == nil || !strings.HasPrefix(err.Error(), "devserver: listening for the accountant on "+ln.Addr().String()+": ") ||
		!strings.HasSuffix(err.Error(), "(is another tokentriage dev or accountant running? pass --accountant-listen ADDR)") {
		t.Errorf("got %v", err)
	}
}

func TestLoadModule(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "filter.wasm")
	_, err := LoadModule(missing)
	if want := "the filter " + missing + " is not built: run `make wasm` (or `make run`, which builds it and starts dev), or pass --wasm PATH"; err == nil || err.Error() != want {
		t.Errorf("missing: %v", err)
	}
	os.WriteFile(missing, nil, 0o644)
	_, err = LoadModule(missing)
	if want := "the filter " + missing + " is empty: rebuild it with `make wasm`"; err == nil || err.Error() != want {
		t.Errorf("empty: %v", err)
	}
}

// TestLedgerLag steps through tee cells: live entries are summed, expired
// ones skipped, and a cell of another format is reported as such.
func TestLedgerLag(t *testing.T) {
	now := time.Date(2026, 8, 9, 20, 44, 50, 0, time.UTC)
	entry := func(vm, lag uint32, expires time.Time) []byte {
		b := binary.LittleEndian.AppendUint32(nil, vm)
		b = binary.LittleEndian.AppendUint32(b, lag)
		b = binary.LittleEndian.AppendUint64(b, 7)
		b = binary.LittleEndian.AppendUint64(b, uint64(expires.UnixNano()))
		b = binary.LittleEndian.AppendUint64(b, 0)    // last drop
		return binary.LittleEndian.AppendUint64(b, 0) // oldest unacknowledged
	}
	cell := func(entries ...[]byte) []byte {
		b := []byte{byte(len(entries))}
		for _, e := range entries {
			b = append(b, e...)
		}
		return b
	}
	later, earlier := now.Add(time.Minute), now.Add(-time.Second)
	for i, c := range []struct {
		cell []byte
		lag  int
		ok   bool
	}{
		{nil, 0, true},
		{cell(), 0, true},
		{cell(entry(1, 0, later)), 0, true},
		{cell(entry(1, 3, later), entry(2, 4, later)), 7, true},
		{cell(entry(1, 3, later), entry(2, 4, earlier)), 3, true},
		{cell(entry(1, 3, later))[:10], 0, false},
	} {
		lag, ok := ledgerLag(c.cell, now)
		if lag != c.lag || ok != c.ok {
			t.Errorf("step %d: lag %d ok %v, want %d %v", i, lag, ok, c.lag, c.ok)
		}
	}
}

// TestRefusalsKeepConnectionsUsable sends requests the filter refuses at
// the headers (no key, an unknown key), each followed by a served one, on
// one keep-alive client: none of them fails, and the connections are
// reused rather than dropped after each refusal.
func TestRefusalsKeepConnectionsUsable(t *testing.T) {
	s := start(t, Options{})
	ctx := testContext(t)
	k := mintKey(ctx, t, s, "org:acme/team:ml/user:dev1")
	var dials atomic.Int64
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	body := `{"model":"gpt-4o-mini","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
	const rounds = 50
	for i := 0; i < rounds; i++ {
		for _, c := range []struct {
			auth string
			want int
		}{
			{"", 401},
			{"Bearer tt-vk_UnknownKey00-0123456789abcdefghijABCDEFGHIJ01", 401},
			{"Bearer " + k.Key, 200},
		} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/chat/completions", strings.NewReader(body))
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("round %d: %d, want %d", i, resp.StatusCode, c.want)
			}
		}
	}
	if n := dials.Load(); n > 1 {
		t.Errorf("%d connections for %d sequential requests: refusals drop the connection", n, 3*rounds)
	}
}

// TestStartNamesTheBusyGatewayPortFirst: a busy gateway port is reported
// before the accountant or the filter starts (here the module is not even
// wasm, and it is the port that is named).
func TestStartNamesTheBusyGatewayPortFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Start(testContext(t), Options{ConfigPath: "testdata/dev.yaml", DataDir: t.TempDir(), Module: []byte{0},
		Listen: ln.Addr().String(), AccountantListen: "127.0.0.1:0"})
	if err == nil || !strings.HasPrefix(err.Error(), "devserver: listening for the gateway on "+ln.Addr().String()+": ") {
		t.Errorf("got %v", err)
	}
}

// TestStartWithABadModuleReleasesEverything: a module that is not a filter
// build is reported with what to do, and the failed start leaves the data
// directory free for the next one.
func TestStartWithABadModuleReleasesEverything(t *testing.T) {
	data := t.TempDir()
	for range 2 {
		_, err := Start(testContext(t), Options{ConfigPath: "testdata/dev.yaml", DataDir: data, Module: []byte("not wasm"),
			Listen: "127.0.0.1:0", AccountantListen: "127.0.0.1:0"})
		if err == nil || !strings.Contains(err.Error(), "devserver: starting the filter: ") || !strings.Contains(err.Error(), "`make wasm` rebuilds it") {
			t.Fatalf("got %v", err)
		}
	}
}

// chatBodyOf is a chat completion request of exactly n bytes.
func chatBodyOf(t *testing.T, n int) []byte {
	t.Helper()
	head, tail := `{"model":"gpt-4o-mini","max_tokens":4,"messages":[{"role":"user","content":"`, `"}]}`
	pad := n - len(head) - len(tail)
	if pad < 0 {
		t.Fatalf("a chat body cannot be %d bytes", n)
	}
	return []byte(head + strings.Repeat("x", pad) + tail)
}

// TestBodiesUpToMaxBodyBytesReachTheFilter: the embedded host buffers as
// much as the filter's max_body_bytes allows, so a body over the host's
// old 1 MiB default is served, and one over max_body_bytes gets the
// filter's JSON 413, with or without a content-length, never the host's
// bare text/plain one.
func TestBodiesUpToMaxBodyBytesReachTheFilter(t *testing.T) {
	s := start(t, Options{})
	ctx := testContext(t)
	k := mintKey(ctx, t, s, "org:acme/team:ml/user:dev1")
	const max = pluginconf.DefaultMaxBodyBytes
	for _, c := range []struct {
		name    string
		size    int
		chunked bool
		want    int
	}{
		{"2 MiB", 2 << 20, false, 200},
		{"2 MiB chunked", 2 << 20, true, 200},
		{"max_body_bytes", max, false, 200},
		{"max_body_bytes+1", max + 1, false, 413},
		{"max_body_bytes+1 chunked", max + 1, true, 413},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(chatBodyOf(t, c.size))
			if c.chunked {
				r = io.MultiReader(r) // no length: sent chunked
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/chat/completions", r)
			req.Header.Set("Authorization", "Bearer "+k.Key)
			req.Header.Set("Content-Type", "application/json")
			resp, body := testkit.Send(t, req)
			if resp.StatusCode != c.want {
				t.Fatalf("%d, want %d: %.300s", resp.StatusCode, c.want, body)
			}
			if c.want != 413 {
				return
			}
			if got := resp.Header.Get("X-Tt-Refusal-Type"); got != "request_too_large" {
				t.Errorf("X-Tt-Refusal-Type %q, want request_too_large (the filter's 413, not the host's)", got)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var e struct {
				Error struct{ Type string } `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Type != "request_too_large" {
				t.Errorf("body %.300s: error.type %q (%v), want request_too_large", body, e.Error.Type, err)
			}
		})
	}
}

// TestHalfClosedClientGetsNoFakeAnswer: a client that half-closes its side
// after sending (shutdown(SHUT_WR), as nc and some HTTP/1.0 tools do) looks
// to net/http like one that went away; the request is reset, and the
// client sees its connection closed, never net/http's default empty 200
// for a request that did not finish.
func TestHalfClosedClientGetsNoFakeAnswer(t *testing.T) {
	s := start(t, Options{})
	ctx := testContext(t)
	k := mintKey(ctx, t, s, "org:acme/team:ml/user:dev1")
	body := `{"model":"gpt-4o-mini","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nX-Stub-Delay-Ms: 300\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", k.Key, len(body), body)
	conn.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(conn)
	if strings.HasPrefix(string(got), "HTTP/1.1 200") && !strings.Contains(string(got), "X-Tt-Request-Id") {
		t.Fatalf("a half-closed client got a made-up answer:\n%s", got)
	}
}

// TestGatewayWaitsForThePlan: until the filter has its first plan the
// gateway answers 503 (only the readiness probe reaches the filter), so
// nothing is served unchecked while dev starts.
func TestGatewayWaitsForThePlan(t *testing.T) {
	var reached []string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = append(reached, r.URL.Path) })
	s := &Server{}
	h := s.untilArmed(next)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader("{}")))
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), "has not synced its plan") {
		t.Errorf("before the plan: %d %v %s", w.Code, w.Header(), w.Body)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, MePath, nil))
	s.armed.Store(true)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader("{}")))
	if strings.Join(reached, ",") != MePath+",/v1/chat/completions" {
		t.Errorf("reached the filter: %v", reached)
	}
}

// TestFilterAndAccountantShareTheInternalToken: dev generates an internal
// token and hands it to its filter, so the gateway arms (its sync was
// authenticated) while a caller without the token is refused.
func TestFilterAndAccountantShareTheInternalToken(t *testing.T) {
	s := start(t, Options{})
	if len(s.InternalToken()) != 64 {
		t.Fatalf("generated internal token %q", s.InternalToken())
	}
	for _, token := range []string{"", "Bearer wrong", "Bearer test-admin-token"} {
		req, _ := http.NewRequest(http.MethodGet, s.AccountantURL()+"/tt/internal/v1/sync?replica=made-up", nil)
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("sync with %q: %d, want 401", token, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, s.AccountantURL()+"/tt/internal/v1/sync", nil)
	req.Header.Set("Authorization", "Bearer "+s.InternalToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("sync with the internal token: %d", resp.StatusCode)
	}
}
