package filter

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// TestDecodeFeedKeys: what the accountant writes with encoding/json, the
// gjson readers read back as encoding/json would.
func TestDecodeFeedKeys(t *testing.T) {
	keys := []syncwire.Key{
		{KID: "vk_FEKZdMs2UQRi", SHA256: "ab", Owner: "org:acme/team:ml", Revoked: true,
			Scopes: vkey.Scopes{Models: []string{"gpt-*", "caf\u00e9\"\\"}, Providers: []string{}, AllowPassthrough: true, Customers: []string{"c-1"}},
			Name:   "ci", ExpiresAt: 1_900_000_000, PrevSHA256: "cd", PrevUntil: 1_800_000_000},
		{KID: "vk_000000000000", Owner: "org:acme"},
		{KID: "vk_000000000001", Gone: true},
	}
	for _, k := range keys {
		b, _ := json.Marshal(k)
		got, ok := decodeKey(jv.ParseBytes(b))
		slow, err := decodeKeySlow(jv.ParseBytes(b))
		if !ok || !reflect.DeepEqual(got, k) || err != nil || !reflect.DeepEqual(slow, k) {
			t.Errorf("decodeKey(%s) = %+v, %v; slow %+v, %v", b, got, ok, slow, err)
		}
	}
}

// TestDecodeFeedMalformed: a key of the wrong shape is refused with the
// member named (and left out, never read as unrestricted), its kid kept
// when it can be read; an override of the wrong shape is refused.
func TestDecodeFeedMalformed(t *testing.T) {
	keyTests := []struct {
		in, kid, err string
	}{
		{in: `7`, err: "key: expected an object, got Number"},
		{in: `{"kid":"a","scopes":{"models":"gpt-*"}}`, kid: "a", err: "key.scopes.models: expected a list of strings, got String"},
		{in: `{"kid":"a","scopes":{"models":["x",1]}}`, kid: "a", err: "key.scopes.models: expected a list of strings, got Number"},
		{in: `{"kid":"a","scopes":[]}`, kid: "a", err: "key.scopes: expected an object, got JSON"},
		{in: `{"kid":"a","revoked":"yes"}`, kid: "a", err: "key.revoked: expected true or false, got String"},
		{in: `{"kid":1}`, err: "key.kid: expected a string, got Number"},
		{in: `{"kid":"a","scopes":{"allow_passthrough":1}}`, kid: "a", err: "key.scopes.allow_passthrough: expected true or false, got Number"},
		{in: `{"kid":"a","expires_at":"soon"}`, kid: "a", err: "key.expires_at: expected an integer, got String"},
		{in: `{"kid":"a","prev_until":1.5}`, kid: "a", err: "key.prev_until: expected an integer, got Number"},
	}
	for _, tc := range keyTests {
		v := jv.Parse(tc.in)
		if _, ok := decodeKey(v); ok {
			t.Errorf("decodeKey(%s) read it", tc.in)
		}
		k, err := decodeKeySlow(v)
		if err == nil || err.Error() != tc.err || k.KID != tc.kid {
			t.Errorf("decodeKeySlow(%s) = %q, %v; want %q, %q", tc.in, k.KID, err, tc.kid, tc.err)
		}
	}
	ovTests := []struct{ in, err string }{
		{in: `[]`, err: "override: expected an object, got JSON"},
		{in: `{"amount":1.5}`, err: "override.amount: expected an integer, got Number"},
		{in: `{"amount":1e3}`, err: "override.amount: expected an integer, got Number"},
		{in: `{"amount":"5"}`, err: "override.amount: expected an integer, got String"},
		{in: `{"limit_id":5}`, err: "override.limit_id: expected a string, got Number"},
		{in: `{"gone":"no"}`, err: "override.gone: expected true or false, got String"},
	}
	for _, tc := range ovTests {
		if err := checkShape(jv.Parse(tc.in), "override", overrideShape); err == nil || err.Error() != tc.err {
			t.Errorf("override %s: %v, want %q", tc.in, err, tc.err)
		}
	}
}

// TestDecodeKeyMatchesPathLookups holds the one-pass reading of a key
// entry to the path lookups it replaced, on generated entries with every
// member in every type, repeated, spelt with escapes or missing.
func TestDecodeKeyMatchesPathLookups(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	values := []string{`"vk_abc"`, `null`, `7`, `true`, `false`, `[]`, `["gpt-*","o3"]`, `["x",1]`, `{}`, `{"models":["a"]}`, `"caf\u00e9"`, `-3`, `1.5`, `1e3`}
	names := []string{"kid", "sha256", "owner", "revoked", "scopes", "extra", `k\u0069d`, "name", "expires_at", "prev_sha256", "prev_until", "gone"}
	scopeNames := []string{"models", "providers", "endpoints", "allow_passthrough", "customers", "other", `m\u006fdels`}
	took := 0
	for i := 0; i < 20000; i++ {
		var members []string
		for j := rng.Intn(6); j >= 0; j-- {
			name := names[rng.Intn(len(names))]
			v := values[rng.Intn(len(values))]
			if name == "scopes" && rng.Intn(2) == 0 {
				var sm []string
				for k := rng.Intn(4); k >= 0; k-- {
					sm = append(sm, `"`+scopeNames[rng.Intn(len(scopeNames))]+`":`+values[rng.Intn(len(values))])
				}
				v = "{" + strings.Join(sm, ",") + "}"
			}
			members = append(members, `"`+name+`":`+v)
		}
		entry := jv.Parse("{" + strings.Join(members, ",") + "}")
		want, wantErr := decodeKeySlow(entry)
		got, ok := decodeKey(entry)
		if !ok {
			continue
		}
		took++
		if wantErr != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: one pass %+v, path lookups %+v, %v", entry.Raw, got, want, wantErr)
		}
	}
	if took < 1000 {
		t.Fatalf("the one-pass reading took only %d entries", took)
	}
}

// TestDecodePricesCached: a cached rate of 0 is a free prompt cache; an
// answer without the member bills cached input at the input rate.
func TestDecodePricesCached(t *testing.T) {
	got, err := decodePrices([]byte(`{"free":{"input":2000,"output":4000,"cached":0},"old":{"input":2000,"output":4000}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := got["free"]; r.Cached != 0 {
		t.Errorf("free: cached %d, want 0", r.Cached)
	}
	if r := got["old"]; r.Cached != 2000 {
		t.Errorf("no cached member: cached %d, want the input rate 2000", r.Cached)
	}
}
