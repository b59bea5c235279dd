package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

const keysTestToken = "keys-test-admin-token"

// accountantServer runs the management API over a fresh governance.db and
// the seed 004 config, as the accountant mounts it.
func accountantServer(t *testing.T) string { return accountantServerWith(t, "testdata/seed004.yaml") }

// accountantServerWith is accountantServer with another config.
func accountantServerWith(t *testing.T, config string) string {
	t.Helper()
	db, err := runtime.Open(filepath.Join(t.TempDir(), "governance.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	f, err := configfile.Parse("seed004.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := govern.Compile(f.Governance)
	if err != nil {
		t.Fatal(err)
	}
	armed, _ := plan.Arm(govern.Runtime{})
	srv := httptest.NewServer(api.New(api.Deps{
		DB:         db,
		Armed:      func() *govern.Armed { return armed },
		AdminToken: keysTestToken,
		Now:        func() time.Time { return time.Date(2026, 8, 14, 9, 0, 0, 0, time.UTC) },
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func runKeys(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestKeysMintListRevoke(t *testing.T) {
	url := accountantServer(t)
	t.Setenv("TT_ADMIN_TOKEN", keysTestToken)

	code, stdout, stderr := runKeys("keys", "mint", "--owner", "org:acme/team:ml/user:dev1", "--accountant", url, "--models", "gpt-4o*,gpt-4.1", "--endpoints", "/v1/chat/completions")
	if code != 0 {
		t.Fatalf("keys mint: exit %d\n%s%s", code, stdout, stderr)
	}
	// The key alone on the first line of stdout, and nothing else there.
	key, rest, _ := strings.Cut(stdout, "\n")
	kid, err := vkey.KID(key)
	if err != nil || rest != "" {
		t.Fatalf("stdout %q: want the key alone on one line (%v)", stdout, err)
	}
	wantErr := "minted " + kid + " for org:acme/team:ml/user:dev1\n" +
		"  scopes: models gpt-4o*,gpt-4.1; providers any; endpoints /v1/chat/completions; passthrough no\n" +
		"  " + api.MintNote + "\n"
	if stderr != wantErr {
		t.Fatalf("stderr\n%s\nwant\n%s", stderr, wantErr)
	}

	code, stdout, stderr = runKeys("keys", "list", "--accountant", url)
	want := "KID              NAME  OWNER                       STATE  EXPIRES  CREATED               BY     SCOPES\n" +
		kid + "  -     org:acme/team:ml/user:dev1  live   never    2026-08-14T09:00:00Z  admin  models gpt-4o*,gpt-4.1; providers any; endpoints /v1/chat/completions; passthrough no\n"
	if code != 0 || stdout != want || stderr != "" {
		t.Fatalf("keys list: exit %d\n%s\nwant\n%s\nstderr %s", code, stdout, want, stderr)
	}
	if strings.Contains(stdout, key[len(key)-32:]) {
		t.Fatal("keys list shows the key")
	}
	if code, stdout, _ = runKeys("keys", "list", "--accountant", url, "--owner", "org:acme/team:search"); code != 0 || strings.Contains(stdout, kid) {
		t.Fatalf("keys list --owner org:acme/team:search: exit %d\n%s", code, stdout)
	}

	code, stdout, stderr = runKeys("keys", "revoke", kid, "--accountant", url)
	if code != 0 || stdout != "revoked "+kid+" (owner org:acme/team:ml/user:dev1) at 2026-08-14T09:00:00Z\n" {
		t.Fatalf("keys revoke: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = runKeys("keys", "revoke", kid, "--accountant", url)
	if code != 1 || stderr != "tokentriage keys revoke: key "+kid+" was already revoked at 2026-08-14T09:00:00Z by admin (HTTP 409 conflict)\n" {
		t.Fatalf("second revoke: exit %d %q", code, stderr)
	}
	if _, stdout, _ = runKeys("keys", "list", "--accountant", url); !strings.Contains(stdout, "revoked 2026-08-14T09:00:00Z") {
		t.Fatalf("keys list after revoke:\n%s", stdout)
	}
}

func TestKeysTokenFile(t *testing.T) {
	url := accountantServer(t)
	t.Setenv("TT_ADMIN_TOKEN", "not-the-token")
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte(keysTestToken+"\n"), 0o600)
	code, stdout, stderr := runKeys("keys", "mint", "--owner", "org:acme", "--accountant", url, "--admin-token-file", file)
	if code != 0 || !strings.HasPrefix(stdout, "tt-vk_") {
		t.Fatalf("mint with --admin-token-file: exit %d\n%s%s", code, stdout, stderr)
	}
}

func TestKeysErrors(t *testing.T) {
	url := accountantServer(t)
	gone := httptest.NewServer(nil)
	goneURL := gone.URL
	gone.Close()

	t.Setenv("TT_ADMIN_TOKEN", "wrong-token")
	code, stdout, stderr := runKeys("keys", "mint", "--owner", "org:acme", "--accountant", url)
	if code != 1 || stdout != "" || stderr != "tokentriage keys mint: the accountant at "+url+" refused the token: the bearer token is neither the admin token nor a live delegated admin token; check TT_ADMIN_TOKEN, or ask an admin for a new delegated token\n" {
		t.Fatalf("wrong token: exit %d stdout %q stderr %q", code, stdout, stderr)
	}

	t.Setenv("TT_ADMIN_TOKEN", keysTestToken)
	code, stdout, stderr = runKeys("keys", "list", "--accountant", goneURL)
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "tokentriage keys list: cannot reach the accountant at "+goneURL+": ") ||
		!strings.HasSuffix(stderr, "is it running (tokentriage accountant -c FILE --listen ADDR --data DIR), and is --accountant its address?\n") {
		t.Fatalf("unreachable: exit %d stdout %q stderr %q", code, stdout, stderr)
	}

	for i, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"keys", "mint", "--owner", "org:acme/team:ml/user:nobody", "--accountant", url}, 1,
			`tokentriage keys mint: owner "org:acme/team:ml/user:nobody" is not a node of the tenancy tree; declare it in the config's tenants or create it with POST /tt/api/v1/nodes first (HTTP 400 invalid_request)` + "\n"},
		{[]string{"keys", "mint", "--owner", "org:acme/../org:evil", "--accountant", url}, 1,
			"tokentriage keys mint: owner: " + govern.ValidNodeID("org:acme/../org:evil").Error() + " (HTTP 400 invalid_request)\n"},
		{[]string{"keys", "mint", "--accountant", url}, 2, "tokentriage keys mint: --owner NODE is required\n"},
		{[]string{"keys", "mint", "--owner", "org:acme", "--models", "", "--accountant", url}, 2, "tokentriage keys mint: --models needs at least one value; leave it out to allow any\n"},
		{[]string{"keys", "revoke", "--accountant", url}, 2, "tokentriage keys revoke: one KID is required (keys list shows them)\n"},
		{[]string{"keys", "revoke", "vk_nope", "--accountant", url}, 1, `tokentriage keys revoke: "vk_nope" is not a kid (expected vk_ followed by 12 letters and digits) (HTTP 400 invalid_request)` + "\n"},
		{[]string{"keys", "list", "--accountant", "127.0.0.1:8791"}, 1, `tokentriage keys list: accountant address "127.0.0.1:8791" is not a URL like http://127.0.0.1:8791` + "\n"},
	} {
		code, stdout, stderr := runKeys(c.args...)
		if code != c.code || stdout != "" || stderr != c.stderr {
			t.Errorf("step %d: %v: exit %d stdout %q\nstderr %q\nwant %d %q", i, c.args, code, stdout, stderr, c.code, c.stderr)
		}
	}

	t.Setenv("TT_ADMIN_TOKEN", "")
	code, _, stderr = runKeys("keys", "list", "--accountant", url)
	if code != 2 || stderr != "tokentriage keys list: no admin token: set TT_ADMIN_TOKEN, or pass --admin-token-file FILE\n" {
		t.Fatalf("no token: exit %d %q", code, stderr)
	}
}

// TestKeysMintScopeValues: an endpoint scope that is no governed endpoint
// is refused with the list, and a provider name the gateway does not infer
// from the path is minted with a warning to check it against the filter's
// providers mapping.
func TestKeysMintScopeValues(t *testing.T) {
	url := accountantServer(t)
	t.Setenv("TT_ADMIN_TOKEN", keysTestToken)

	code, stdout, stderr := runKeys("keys", "mint", "--owner", "org:acme/team:ml/user:dev1", "--accountant", url, "--endpoints", "/v1/chat")
	if code != 1 || stdout != "" || !strings.Contains(stderr, `scopes.endpoints[0]: "/v1/chat" is not a governed provider endpoint, so no request would match it; an endpoint scope is one of /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /v1/messages`) {
		t.Fatalf("--endpoints /v1/chat: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runKeys("keys", "mint", "--owner", "org:acme/team:ml/user:dev1", "--accountant", url, "--providers", "OpenAI")
	if code != 1 || stdout != "" || !strings.Contains(stderr, `scopes.providers[0]: "OpenAI" never matches: provider names are lowercase letters, digits, '-', '_' and '.', compared exactly; write "openai"`) {
		t.Fatalf("--providers OpenAI: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runKeys("keys", "mint", "--owner", "org:acme/team:ml/user:dev1", "--accountant", url, "--providers", "openai,openia")
	if code != 0 || stdout == "" {
		t.Fatalf("--providers openai,openia: exit %d\n%s%s", code, stdout, stderr)
	}
	want := "  warning: provider \"openia\" is not one the gateway infers from the path (openai, anthropic): the key reaches it only if the filter's providers mapping names a provider exactly \"openia\"\n"
	if !strings.HasSuffix(stderr, api.MintNote+"\n"+want) {
		t.Fatalf("stderr\n%s\nwant it to end with\n%s", stderr, want)
	}
}

// TestKeysMintOverrides: --override LIMIT=AMOUNT sets the key's own amount of
// a key-level limit, dollars for a budget and a count for a quota, read
// by the limit's type; a limit that is not armed, or an amount that is
// not one, is refused before anything is minted.
func TestKeysMintOverrides(t *testing.T) {
	url := accountantServerWith(t, "testdata/keylevel.yaml")
	t.Setenv("TT_ADMIN_TOKEN", keysTestToken)
	code, stdout, stderr := runKeys("keys", "mint", "--owner", "org:acme/team:ml/user:dev1", "--accountant", url,
		"--override", "key_day=12.5", "--override", "key_requests=300")
	if code != 0 {
		t.Fatalf("keys mint: exit %d\n%s%s", code, stdout, stderr)
	}
	kid, err := vkey.KID(strings.TrimSpace(stdout))
	if err != nil {
		t.Fatal(err)
	}
	leaf := govern.KeyLeaf("org:acme/team:ml/user:dev1", kid)
	// This accountant does not re-arm on a write, so they read pending.
	for _, want := range []string{"  override: key_day at " + leaf + " = $12.5 (pending)\n", "  override: key_requests at " + leaf + " = 300 (pending)\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, c := range []struct {
		arg  string
		code int
		msg  string
	}{
		{"key_nope=5", 1, `--override "key_nope=5": no limit "key_nope" is armed; the key-level limits are key_day, key_requests, key_rpm`},
		{"key_day", 2, `--override "key_day": write LIMIT=AMOUNT, e.g. --override key_daily=5`},
		{"key_requests=1.5", 2, `--override "key_requests=1.5": limit key_requests is quota_requests, so AMOUNT is a whole count`},
		{"key_day=51", 1, `override amount $51 of limit "key_day" exceeds its ceiling $50 (override.max_amount_usd); raise the ceiling in the config first`},
	} {
		code, stdout, stderr := runKeys("keys", "mint", "--owner", "org:acme", "--accountant", url, "--override", c.arg)
		if code != c.code || stdout != "" || !strings.Contains(stderr, c.msg) {
			t.Errorf("--override %s: exit %d, stdout %q, stderr %q\nwant exit %d and %q", c.arg, code, stdout, stderr, c.code, c.msg)
		}
	}
}

// TestKeysNameExpiresRotate: keys mint --name --expires, keys list showing
// both, keys rotate printing the new key alone on stdout and when the
// previous secret stops.
func TestKeysNameExpiresRotate(t *testing.T) {
	url := accountantServer(t)
	t.Setenv("TT_ADMIN_TOKEN", keysTestToken)
	code, stdout, stderr := runKeys("keys", "mint", "--owner", "org:acme", "--name", "nightly batch", "--expires", "30d", "--accountant", url)
	if code != 0 {
		t.Fatalf("keys mint: exit %d\n%s%s", code, stdout, stderr)
	}
	key := strings.TrimSpace(stdout)
	kid, _ := vkey.KID(key)
	if want := "minted " + kid + " (nightly batch) for org:acme\n  scopes: models any; providers any; endpoints any; passthrough no\n  expires: 2026-09-13T09:00:00Z\n  " + api.MintNote + "\n"; stderr != want {
		t.Fatalf("stderr\n%s\nwant\n%s", stderr, want)
	}
	_, stdout, _ = runKeys("keys", "list", "--accountant", url)
	if !strings.Contains(stdout, kid+"  nightly batch  org:acme  live   2026-09-13T09:00:00Z") {
		t.Fatalf("keys list:\n%s", stdout)
	}
	code, stdout, stderr = runKeys("keys", "rotate", kid, "--grace", "1h", "--accountant", url)
	newKey := strings.TrimSpace(stdout)
	if got, _ := vkey.KID(newKey); code != 0 || got != kid || newKey == key || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("keys rotate: exit %d\n%s%s", code, stdout, stderr)
	}
	if want := "rotated " + kid + " (nightly batch) (owner org:acme)\n  the previous secret works until 2026-08-14T10:00:00Z\n  expires: 2026-09-13T09:00:00Z\n  " + api.RotateNote + "\n"; stderr != want {
		t.Fatalf("rotate stderr\n%s\nwant\n%s", stderr, want)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"keys", "mint", "--owner", "org:acme", "--expires", "soon"}, `tokentriage keys mint: --expires soon: "soon" is not a duration: write 30d, 2w, 12h or 90m, or an RFC 3339 time such as 2026-12-31T00:00:00Z` + "\n"},
		{[]string{"keys", "rotate"}, "tokentriage keys rotate: one KID is required (keys list shows them)\n"},
		{[]string{"keys", "rotate", kid, "--grace", "9d", "--accountant", url}, "tokentriage keys rotate: grace 216h0m0s is out of range; the previous secret may stay valid from 0 to 168h0m0s (default 24h0m0s) (HTTP 400 invalid_request)\n"},
		{[]string{"keys", "mint", "--owner", "org:acme", "--name", "nightly batch", "--accountant", url}, `tokentriage keys mint: owner "org:acme" already has a live key named "nightly batch" (` + kid + `); pick another name, or revoke ` + kid + ` first (HTTP 409 conflict)` + "\n"},
	} {
		code, _, stderr := runKeys(c.args...)
		if code == 0 || stderr != c.msg {
			t.Errorf("%v: exit %d\n%s\nwant\n%s", c.args, code, stderr, c.msg)
		}
	}
}
