package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/govern"
)

const adminToken = "test-admin-token-0123456789"

// The fixed instants writes are stamped with.
var t0 = time.Date(2026, 8, 14, 9, 0, 0, 0, time.UTC)

// fixture is the handler over a fresh governance.db and a compiled config,
// re-armed on every Changed like the accountant does.
type fixture struct {
	t        *testing.T
	db       *runtime.DB
	plan     *govern.Plan
	armed    atomic.Pointer[govern.Armed]
	changed  atomic.Int64
	reload   error
	reloadBy string
	now      time.Time
	h        http.Handler
}

func compileFile(t *testing.T, path string) *govern.Plan {
	t.Helper()
	f, err := configfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := govern.Compile(f.Governance)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newFixture(t *testing.T, config string) *fixture {
	t.Helper()
	db, err := runtime.Open(filepath.Join(t.TempDir(), "governance.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{t: t, db: db, plan: compileFile(t, config), now: t0}
	f.arm()
	f.h = New(Deps{
		DB:         db,
		Armed:      f.armed.Load,
		Reload:     func(who string) error { f.reloadBy = who; return f.reload },
		Changed:    func() { f.changed.Add(1); f.arm() },
		AdminToken: adminToken,
		Now:        func() time.Time { return f.now },
	})
	return f
}

func (f *fixture) arm() {
	_, rt, err := f.db.Runtime()
	if err != nil {
		f.t.Fatal(err)
	}
	a, _ := f.plan.Arm(rt)
	f.armed.Store(a)
}

// do sends one request to the handler; body is JSON-encoded unless it is a
// string, sent as is.
func (f *fixture) do(method, path, token string, body any) (int, []byte) {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req := httptest.NewRequest(method, path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		f.t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	return rec.Code, rec.Body.Bytes()
}

// must sends a request that must answer want, and decodes the body into out.
func (f *fixture) must(want int, method, path, token string, body, out any) []byte {
	f.t.Helper()
	code, b := f.do(method, path, token, body)
	if code != want {
		f.t.Fatalf("%s %s: %d %s; want %d", method, path, code, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			f.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
	return b
}

// wantError checks an error answer: status, type and exact message.
func (f *fixture) wantError(method, path, token string, body any, status int, typ, msg string) {
	f.t.Helper()
	code, b := f.do(method, path, token, body)
	var eb ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil {
		f.t.Fatalf("%s %s: %d %s is not an error body: %v", method, path, code, b, err)
	}
	if code != status || eb.Error.Type != typ || eb.Error.Message != msg {
		f.t.Errorf("%s %s:\n got %d %s %q\nwant %d %s %q", method, path, code, eb.Error.Type, eb.Error.Message, status, typ, msg)
	}
}

// delegate creates a delegated admin scoped to scope and returns its token.
func (f *fixture) delegate(scope string) (token, id string) {
	f.t.Helper()
	var c CreatedAdmin
	f.must(http.StatusCreated, "POST", Prefix+"admins", adminToken, AdminRequest{Scope: scope}, &c)
	return c.Token, c.ID
}

const (
	seed002         = "testdata/seed002.yaml"
	overridesConfig = "testdata/overrides.yaml"
)

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func nodeIDError(id string) string { return govern.ValidNodeID(id).Error() }
