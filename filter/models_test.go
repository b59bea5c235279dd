package filter_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

// modelIDs reads the ids of a model list, and whether it is Anthropic's
// shape (has_more) or OpenAI's (object: list).
func modelIDs(t *testing.T, body []byte) (ids []string, anthropic bool) {
	t.Helper()
	var doc struct {
		Object  string `json:"object"`
		HasMore *bool  `json:"has_more"`
		Data    []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, m := range doc.Data {
		ids = append(ids, m.ID)
	}
	if (doc.Object == "list") == (doc.HasMore != nil) {
		t.Fatalf("neither OpenAI's nor Anthropic's list: %s", body)
	}
	return ids, doc.HasMore != nil
}

// TestModelList: GET /v1/models is open to every authenticated key (no
// allow_passthrough needed) and lists only the models the key's scope
// allows, in the shape the provider answered (OpenAI's, or Anthropic's to
// a client sending anthropic-version); /v1/models/{id} of a model outside
// the scope is not found. None of it writes a ledger row but the refusals'.
func TestModelList(t *testing.T) {
	gpt := newTestKey("vk_gptgptgptgpt", "org:acme/team:ml/user:dev2").withScopes(`{"models":["gpt-4o*"]}`)
	claude := newTestKey("vk_claudeclaude", "org:acme/team:search").withScopes(`{"models":["claude-*"],"providers":["anthropic"]}`)
	r := newRig(t, rigOptions{governance: gov(limUserConcurrency, `,"require_key":true`), keys: []testKey{dev1Key, gpt, claude}, accountant: true})
	r.sync()
	anthropic := map[string]string{"Anthropic-Version": "2023-06-01"}
	for i, c := range []struct {
		key       testKey
		path      string
		headers   map[string]string
		want      []string
		anthropic bool
		upstream  bool // reached the stub
	}{
		{dev1Key, "/v1/models", nil, []string{"gpt-4o-mini", "gpt-4o", "gpt-4.1", "o4-mini", "text-embedding-3-small", "claude-sonnet-4-20250514", "claude-3-5-haiku-latest"}, false, true},
		{gpt, "/v1/models", nil, []string{"gpt-4o-mini", "gpt-4o"}, false, true},
		{gpt, "/v1/models/", map[string]string{"Accept-Encoding": "gzip"}, []string{"gpt-4o-mini", "gpt-4o"}, false, true},
		{claude, "/v1/models", anthropic, []string{"claude-sonnet-4-20250514", "claude-3-5-haiku-latest"}, true, true},
		// claude may not use OpenAI: its OpenAI list is empty, answered
		// by the gateway.
		{claude, "/v1/models", nil, nil, false, false},
		{gpt, "/v1/models", anthropic, []string{"gpt-4o-mini", "gpt-4o"}, true, true},
	} {
		before := r.stub.Served()
		resp := r.do(req{method: "GET", path: c.path, key: c.key, headers: c.headers})
		mustStatus(t, resp, 200)
		ids, anth := modelIDs(t, resp.Body)
		if !slices.Equal(ids, c.want) || anth != c.anthropic {
			t.Errorf("case %d: %s for %s: %v (anthropic %v), want %v (anthropic %v)", i, c.path, c.key.kid, ids, anth, c.want, c.anthropic)
		}
		if reached := r.stub.Served() > before; reached != c.upstream {
			t.Errorf("case %d: reached the upstream %v, want %v", i, reached, c.upstream)
		}
		if cl := resp.Headers.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(resp.Body)) {
			t.Errorf("case %d: content-length %s for a body of %d bytes", i, cl, len(resp.Body))
		}
		if resp.Headers.Get("X-Tt-Request-Id") == "" {
			t.Errorf("case %d: no request id", i)
		}
	}
	// Anthropic's paging cursors are the upstream's, kept.
	resp := r.do(req{method: "GET", path: "/v1/models", key: claude, headers: anthropic})
	var page struct {
		FirstID string `json:"first_id"`
		LastID  string `json:"last_id"`
	}
	json.Unmarshal(resp.Body, &page)
	if page.FirstID != "gpt-4o-mini" || page.LastID != "claude-3-5-haiku-latest" {
		t.Errorf("paging cursors %+v", page)
	}

	for i, c := range []struct {
		key    testKey
		path   string
		status int
	}{
		{gpt, "/v1/models/gpt-4o", 200},
		{gpt, "/v1/models/gpt-4.1", 404},
		{dev1Key, "/v1/models/gpt-4.1", 200},
		{claude, "/v1/models/claude-3-5-haiku-latest", 404}, // an OpenAI call: outside its providers scope
	} {
		resp := r.do(req{method: "GET", path: c.path, key: c.key})
		mustStatus(t, resp, c.status)
		if i == 1 {
			golden(t, "model_not_found", render(t, resp))
		}
	}
	resp = r.do(req{method: "GET", path: "/v1/models/claude-3-5-haiku-latest", key: claude, headers: anthropic})
	mustStatus(t, resp, 200)
	resp = r.do(req{method: "GET", path: "/v1/models/gpt-4o", key: claude, headers: anthropic})
	mustStatus(t, resp, 404)
	golden(t, "model_not_found_anthropic", render(t, resp))

	// The lists and models served leave passthrough rows (recorded, as
	// every forwarded request is, and counted by nothing); the three not
	// found are refusals on the ledger, as every refusal is.
	r.step(time.Second)
	rows := r.acct.ledger()
	refused := 0
	for _, row := range rows {
		switch {
		case row.Decision == ledger.Refused && row.ErrorType == "not_found":
			refused++
		case row.Decision == ledger.Passthrough && row.Status == 200:
		default:
			t.Errorf("a row for %s: %s %s %d", row.Endpoint, row.Decision, row.ErrorType, row.Status)
		}
	}
	if refused != 3 {
		t.Errorf("%d refusals, want 3", refused)
	}
}

// TestCountTokens: Anthropic's count_tokens is free: any key may call it
// (an endpoints scope that has /v1/messages covers it), it is forwarded
// untouched, and it leaves a passthrough row, which no spend or quota
// counts.
func TestCountTokens(t *testing.T) {
	chatOnly := newTestKey("vk_chatchatchat", "org:acme/team:ml/user:dev2").withScopes(`{"endpoints":["/v1/chat/completions"]}`)
	messages := newTestKey("vk_messagesmess", "org:acme/team:search").withScopes(`{"endpoints":["/v1/messages"],"providers":["anthropic"]}`)
	lim := `{"id":"dev1_requests","attach":{"level":"user"},"type":"quota_requests","amount":1,"period":"day"}`
	r := newRig(t, rigOptions{governance: gov(lim, `,"require_key":true`), keys: []testKey{dev1Key, chatOnly, messages}, accountant: true})
	r.sync()
	body := messagesBody("claude-3-5-haiku-latest", germany)
	for _, k := range []testKey{dev1Key, messages} {
		resp := r.do(req{path: "/v1/messages/count_tokens", key: k, apiKey: true, body: body})
		mustStatus(t, resp, 200)
		if string(resp.Body) != `{"input_tokens":8}` {
			t.Errorf("%s: %s", k.kid, resp.Body)
		}
	}
	resp := r.do(req{path: "/v1/messages/count_tokens", key: chatOnly, apiKey: true, body: body})
	mustStatus(t, resp, 403)
	golden(t, "count_tokens_scope", render(t, resp))
	r.step(time.Second)
	// The forwarded calls leave passthrough rows, which no quota counts.
	for _, row := range r.acct.ledger() {
		if row.KID == chatOnly.kid && row.Decision != ledger.Refused || row.KID != chatOnly.kid && row.Decision != ledger.Passthrough {
			t.Errorf("row %s %s %s", row.KID, row.Decision, row.Endpoint)
		}
	}
	if resp := r.do(req{path: "/v1/messages/count_tokens", key: dev1Key, apiKey: true, body: body}); resp.Status != 200 {
		t.Errorf("count_tokens after two passthrough rows under a quota of 1: %d", resp.Status)
	}
}

// TestFreeEndpointsKeepTheirPath: the model list, a model and count_tokens
// need no allow_passthrough, so a path that a server on the way would
// decode or normalize into another of the provider's endpoints is not
// one: an escaped dot segment in the id (GET /v1/models/%2e%2e/files is
// GET /v1/files once decoded), a path parameter, backslash or escape in
// the route prefix. Each is a passthrough call, refused to a key without
// allow_passthrough before it reaches the upstream; an id that merely
// holds an escape or a slash, and a plain route prefix, still are free.
func TestFreeEndpointsKeepTheirPath(t *testing.T) {
	gpt := newTestKey("vk_gptgptgptgpt", "org:acme/team:ml/user:dev2").withScopes(`{"models":["gpt-4o*"]}`)
	r := newRig(t, rigOptions{governance: gov(limUserConcurrency, `,"require_key":true`), keys: []testKey{dev1Key, gpt}, accountant: true})
	r.sync()
	for _, c := range []struct {
		key    testKey
		method string
		path   string
	}{
		{dev1Key, "GET", "/v1/models/%2e%2e/files"},
		{dev1Key, "GET", "/v1/models/%2E%2E/files"},
		{dev1Key, "GET", "/v1/models/..%2Ffiles"},
		{dev1Key, "GET", "/v1/models/.%2e/batches"},
		{dev1Key, "HEAD", "/v1/models/x%2F%2e%2e%2F%2e%2e%2Ffiles"},
		{gpt, "GET", "/v1/models/gpt-4o%2F..%2F..%2Ffiles"}, // in its models scope as a glob match
		{dev1Key, "GET", "/v1/models/x%5C..%5Cfiles"},
		{dev1Key, "GET", "/v1/models/..;/files"},
		{dev1Key, "GET", "/v1/models/%2e"},
		{dev1Key, "GET", "/v1/files;/v1/models"},
		{dev1Key, "GET", "/v1/files%3F/v1/models"},
		{dev1Key, "GET", "/v1/files/%2e%2e/v1/models"},
		{dev1Key, "GET", "/v1/files%2F%2e%2e/v1/models/gpt-4o"},
		{dev1Key, "POST", "/v1/files;/v1/messages/count_tokens"},
		{dev1Key, "POST", "/v1/files%23/v1/messages/count_tokens"},
	} {
		before := r.stub.Served()
		resp := r.do(req{method: c.method, path: c.path, key: c.key, body: map[bool]string{true: `{"model":"claude-3-5-haiku-latest","messages":[]}`}[c.method == "POST"]})
		if resp.Status != 403 || resp.Headers.Get("X-Tt-Refusal-Type") != "scope_denied" {
			t.Errorf("%s %s: %d %s; want 403 scope_denied (a passthrough call, and the key has no allow_passthrough)", c.method, c.path, resp.Status, resp.Body)
		}
		if r.stub.Served() != before {
			t.Errorf("%s %s reached the upstream", c.method, c.path)
		}
	}
	for _, c := range []struct {
		key  testKey
		path string
	}{
		{dev1Key, "/openai/v1/models"},
		{dev1Key, "/v1/models/gpt-4o"},
		{dev1Key, "/v1/models/ft%3Agpt-4o-mini%3Aacme%3A%3Aabc"},
		{dev1Key, "/v1/models/meta-llama/llama-3.1-8b"},
		{dev1Key, "/v1/models/a..b"},
		{gpt, "/openai/v1/models/gpt-4o"},
	} {
		before := r.stub.Served()
		resp := r.do(req{method: "GET", path: c.path, key: c.key})
		if resp.Status == 403 || r.stub.Served() == before {
			t.Errorf("GET %s: %d %s, reached the upstream %v; want it free and forwarded", c.path, resp.Status, resp.Body, r.stub.Served() > before)
		}
	}
}

// TestFreeEndpointsRawDotSegments: the path goes upstream as it was
// received, so a dot segment in it makes the call a passthrough one even
// when the cleaned path is a free endpoint: GET /v1/files/x/../../models
// is the model list only to a server that resolves dot segments. It is
// refused to a key without allow_passthrough, before it reaches the
// upstream, and forwarded, as it came, for a key with it.
func TestFreeEndpointsRawDotSegments(t *testing.T) {
	pass := newTestKey("vk_passpasspass", "org:acme/team:ml/user:dev2").withScopes(`{"allow_passthrough":true}`)
	r := newRig(t, rigOptions{governance: gov(limUserConcurrency, `,"require_key":true`), keys: []testKey{dev1Key, pass}, accountant: true})
	r.sync()
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/files/x/../../models"},
		{"GET", "/v1/files/../models/gpt-4o"},
		{"GET", "/v1/./models"},
		{"GET", "/v1/models/./gpt-4o"},
		{"GET", "/openai/v1/files/x/../../models?limit=1"},
		{"HEAD", "/v1/files/x/../../models"},
		{"POST", "/v1/files/../messages/count_tokens"},
		{"POST", "/v1/messages/./count_tokens"},
	} {
		body := map[bool]string{true: `{"model":"claude-3-5-haiku-latest","messages":[]}`}[c.method == "POST"]
		before := r.stub.Served()
		resp := r.do(req{method: c.method, path: c.path, key: dev1Key, body: body})
		if resp.Status != 403 || resp.Headers.Get("X-Tt-Refusal-Type") != "scope_denied" {
			t.Errorf("%s %s: %d %s; want 403 scope_denied (a passthrough call, and the key has no allow_passthrough)", c.method, c.path, resp.Status, resp.Body)
		}
		if r.stub.Served() != before {
			t.Errorf("%s %s reached the upstream", c.method, c.path)
		}
		before = r.stub.Served()
		if resp := r.do(req{method: c.method, path: c.path, key: pass, body: body}); resp.Status == 403 || r.stub.Served() == before {
			t.Errorf("%s %s with allow_passthrough: %d %s, reached the upstream %v; want it forwarded", c.method, c.path, resp.Status, resp.Body, r.stub.Served() > before)
		}
	}
}

// TestModelListNestedPastTheBound: an upstream's model list nested a
// million levels deep (2 MB of brackets) is read by a VM that stays up and
// answered, to a key with a models scope, as an unreadable list is: the
// empty list. The check that read it before recursed once per level and
// overflowed the guest's call stack, a trap that took the VM down.
func TestModelListNestedPastTheBound(t *testing.T) {
	const depth = 1 << 20
	up := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"gpt-4o","x":`+strings.Repeat("[", depth)+strings.Repeat("]", depth)+`}]}`)
	})
	gpt := newTestKey("vk_gptgptgptgpt", "org:acme/team:ml/user:dev2").withScopes(`{"models":["gpt-4o*"]}`)
	r := newRig(t, rigOptions{governance: gov(limUserConcurrency, `,"require_key":true`), keys: []testKey{gpt}, accountant: true,
		upstream: up, workers: 1, bufferLimit: 4 << 20})
	r.sync()
	for i := 0; i < 2; i++ { // the second on the same VM
		resp := r.do(req{method: "GET", path: "/v1/models", key: gpt})
		mustStatus(t, resp, 200)
		if ids, _ := modelIDs(t, resp.Body); len(ids) != 0 {
			t.Fatalf("request %d: listed %v", i, ids)
		}
	}
}
