package filter

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// TestDecodeSyncParts: what the accountant writes with encoding/json, the
// gjson readers read back as encoding/json would.
func TestDecodeSyncParts(t *testing.T) {
	keys := []syncwire.Key{
		{KID: "vk_FEKZdMs2UQRi", SHA256: "ab", Owner: "org:acme/team:ml", Revoked: true,
			Scopes: vkey.Scopes{Models: []string{"gpt-*", "caf\u00e9\"\\"}, Providers: []string{}, AllowPassthrough: true}},
		{KID: "vk_000000000000", Owner: "org:acme"},
	}
	b, _ := json.Marshal(keys)
	got, err := decodeKeys(b)
	if err != nil || !reflect.DeepEqual(got, keys) {
		t.Errorf("decodeKeys(%s) = %+v, %v", b, got, err)
	}
	if got, err := decodeKeys([]byte(`[]`)); err != nil || got != nil {
		t.Errorf("decodeKeys([]) = %#v, %v", got, err)
	}

	rt := syncwire.Runtime{Version: "r7", Nodes: []string{"org:acme/team:new"},
		Overrides: []syncwire.Override{{LimitID: "org_monthly_budget", Node: "org:acme", Amount: 9223372036854775807}, {LimitID: "x", Node: "y", Amount: -3}}}
	b, _ = json.Marshal(rt)
	gotRT, err := decodeRuntime(b)
	if err != nil || !reflect.DeepEqual(gotRT, rt) {
		t.Errorf("decodeRuntime(%s) = %+v, %v", b, gotRT, err)
	}
	if gotRT, err := decodeRuntime([]byte(`{"version":"v","nodes":null}`)); err != nil || !reflect.DeepEqual(gotRT, syncwire.Runtime{Version: "v"}) {
		t.Errorf("decodeRuntime(null nodes) = %+v, %v", gotRT, err)
	}
}

// TestDecodeSyncPartsMalformed: a key entry of the wrong shape is left out
// (never read as unrestricted); a malformed runtime plane is refused.
func TestDecodeSyncPartsMalformed(t *testing.T) {
	keyTests := []struct {
		in   string
		kids []string
		err  string
	}{
		{in: `{"kid":"a"}`, err: "keys: expected a list, got JSON"},
		{in: `[{"kid":"a"},7,{"kid":"b"}]`, kids: []string{"a", "b"}, err: "keys[1]: expected an object, got Number"},
		{in: `[{"kid":"a","scopes":{"models":"gpt-*"}},{"kid":"b"}]`, kids: []string{"b"}, err: "keys[0].scopes.models: expected a list of strings, got String"},
		{in: `[{"kid":"a","scopes":{"models":["x",1]}}]`, err: "keys[0].scopes.models: expected a list of strings, got Number"},
		{in: `[{"kid":"a","scopes":[]}]`, err: "keys[0].scopes: expected an object, got JSON"},
		{in: `[{"kid":"a","revoked":"yes"},{"kid":1}]`, err: "keys[0].revoked: expected true or false, got String"},
		{in: `[{"kid":"a","scopes":{"allow_passthrough":1}}]`, err: "keys[0].scopes.allow_passthrough: expected true or false, got Number"},
	}
	for _, tc := range keyTests {
		got, err := decodeKeys([]byte(tc.in))
		var kids []string
		for _, k := range got {
			kids = append(kids, k.KID)
		}
		if err == nil || err.Error() != tc.err || !reflect.DeepEqual(kids, tc.kids) {
			t.Errorf("decodeKeys(%s) = %v, %v; want %v, %q", tc.in, kids, err, tc.kids, tc.err)
		}
	}
	rtTests := []struct{ in, err string }{
		{in: `[]`, err: "runtime: expected an object, got JSON"},
		{in: `{"nodes":"org:a"}`, err: "runtime.nodes: expected a list of strings, got String"},
		{in: `{"overrides":{}}`, err: "runtime.overrides: expected a list, got JSON"},
		{in: `{"overrides":[1]}`, err: "runtime.overrides[0]: expected an object, got Number"},
		{in: `{"overrides":[{"amount":1.5}]}`, err: "runtime.overrides[0].amount: expected an integer, got Number"},
		{in: `{"overrides":[{"amount":1e3}]}`, err: "runtime.overrides[0].amount: expected an integer, got Number"},
		{in: `{"overrides":[{"amount":"5"}]}`, err: "runtime.overrides[0].amount: expected an integer, got String"},
		{in: `{"overrides":[{"limit_id":5}]}`, err: "runtime.overrides[0].limit_id: expected a string, got Number"},
		{in: `{"version":true}`, err: "runtime.version: expected a string, got True"},
	}
	for _, tc := range rtTests {
		if _, err := decodeRuntime([]byte(tc.in)); err == nil || err.Error() != tc.err {
			t.Errorf("decodeRuntime(%s) = %v, want %q", tc.in, err, tc.err)
		}
	}
}

// TestDecodeKeyMatchesPathLookups holds the one-pass reading of a key
// entry to the path lookups it replaced, on generated entries with every
// member in every type, repeated, spelt with escapes or missing.
func TestDecodeKeyMatchesPathLookups(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	values := []string{`"vk_abc"`, `null`, `7`, `true`, `false`, `[]`, `["gpt-*","o3"]`, `["x",1]`, `{}`, `{"models":["a"]}`, `"caf\u00e9"`,
		`1767225600`, `1.5`, `-3`, `99999999999999999999`}
	names := []string{"kid", "sha256", "owner", "revoked", "scopes", "name", "expires_at", "prev_sha256", "prev_until", "extra", `k\u0069d`, `prev_unti\u006c`}
	scopeNames := []string{"models", "providers", "endpoints", "allow_passthrough", "other", `m\u006fdels`}
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
		entry := gjson.Parse("{" + strings.Join(members, ",") + "}")
		want, wantErr := decodeKeySlow(entry, 0)
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
