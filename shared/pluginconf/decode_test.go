package pluginconf

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
)

const goodHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestDecodeDefaults(t *testing.T) {
	c, err := Decode([]byte(`{"accountant":{"cluster":"tt_accountant"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.SyncInterval != "1s" || c.FlushInterval != "500ms" || c.LeaseTTL != "15m" || c.MaxBodyBytes != 8<<20 {
		t.Errorf("defaults: %+v", c)
	}
	if c.Accountant.Authority != "tt_accountant" || c.Accountant.TimeoutMS != 2000 {
		t.Errorf("accountant defaults: %+v", c.Accountant)
	}
	if c.SyncEvery() != time.Second || c.FlushEvery() != 500*time.Millisecond || c.LeaseTimeout() != 15*time.Minute {
		t.Errorf("durations: %v %v %v", c.SyncEvery(), c.FlushEvery(), c.LeaseTimeout())
	}
	if c.Plan != nil {
		t.Error("a plan without a governance block")
	}
}

func TestDecodeEmbeddedGovernance(t *testing.T) {
	c, err := Decode([]byte(`{
		"governance": {"enabled": true,
			"tenants": [{"org": "acme", "teams": ["ml"], "users": {"ml": ["dev1"]}}],
			"limits": [{"id": "user_rpm", "attach": {"level": "user"}, "type": "rpm", "amount": 120, "period": "1m"}]},
		"keys": [{"kid": "vk_FEKZdMs2UQRi", "sha256": "` + goodHash + `", "owner": "org:acme/team:ml/user:dev1",
			"scopes": {"models": ["gpt-*"], "endpoints": ["/v1/chat/completions"]}}],
		"providers": [{"name": "anthropic", "path_prefix": "/v1/messages"}, {"name": "openai"}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Plan == nil || !c.Plan.Enabled || c.Plan.Limit("user_rpm") == nil {
		t.Fatalf("plan: %+v", c.Plan)
	}
}

func TestDecodeProblems(t *testing.T) {
	tests := []struct {
		name, json string
		want       []string
	}{
		{
			name: "no plan source",
			json: ``,
			want: []string{"accountant: required when governance is absent (the plan then comes from the accountant); set accountant.cluster, or embed a governance block"},
		},
		{
			name: "unknown field",
			json: `{"accountant":{"clusterr":"x"}}`,
			want: []string{`accountant: unknown field "clusterr" (known: cluster, authority, timeout_ms, token, token_env)`},
		},
		{
			name: "plan is not a field",
			json: `{"accountant":{"cluster":"x"},"Plan":{}}`,
			want: []string{`top level: unknown field "Plan" (known: accountant, sync_interval, flush_interval, max_body_bytes, governance, keys, providers, lease_ttl, hold_headers)`},
		},
		{
			name: "durations and sizes",
			json: `{"accountant":{"cluster":"","timeout_ms":-5},"sync_interval":"fast","flush_interval":"-1s","lease_ttl":"0s","max_body_bytes":-1}`,
			want: []string{
				`sync_interval: "fast" is not a Go duration (write e.g. 500ms, 1s, 15m)`,
				`flush_interval: must be positive, got "-1s"`,
				`lease_ttl: must be positive, got "0s"`,
				`max_body_bytes: must be positive, got -1 (default 8388608)`,
				`accountant.cluster: required (the host's upstream cluster that reaches the accountant)`,
				`accountant.timeout_ms: must be positive, got -5 (default 2000)`,
			},
		},
		{
			// A VM refreshes its leases at its tick (here every 500ms,
			// flush_interval): a lease_ttl not above a few ticks lets the
			// leases of live requests lapse between refreshes.
			name: "lease_ttl shorter than the ticks",
			json: `{"governance":{"enabled":true},"lease_ttl":"1s"}`,
			want: []string{`lease_ttl: "1s" is shorter than 3 of the filter's ticks (every 500ms: flush_interval, or sync_interval when shorter and an accountant is set); a VM refreshes the leases and reserves it holds at its tick, so those of requests still running would lapse between refreshes and concurrency, tpm and budget reserve limits would stop holding across worker VMs; set lease_ttl to at least 1.5s (default 15m), or shorten flush_interval`},
		},
		{
			name: "lease_ttl with faster ticks",
			json: `{"accountant":{"cluster":"a"},"sync_interval":"100ms","flush_interval":"100ms","lease_ttl":"250ms"}`,
			want: []string{`lease_ttl: "250ms" is shorter than 3 of the filter's ticks (every 100ms: flush_interval, or sync_interval when shorter and an accountant is set); a VM refreshes the leases and reserves it holds at its tick, so those of requests still running would lapse between refreshes and concurrency, tpm and budget reserve limits would stop holding across worker VMs; set lease_ttl to at least 300ms (default 15m), or shorten flush_interval`},
		},
		{
			// The accountant renews the spend snapshot every 5s and a
			// filter trusts one for 30s: polling every 30s reads it stale
			// for part of every interval.
			name: "sync_interval past the snapshot's trust",
			json: `{"accountant":{"cluster":"a"},"sync_interval":"30s"}`,
			want: []string{`sync_interval: "30s" is too long: a spend snapshot is trusted for 30s after the accountant makes it (it makes one every 5s), and a filter that polls every 30s (checking at its ticks, every 500ms) would hold a stale one for part of every interval, leaving budget and quota limits unchecked then (admitted as suspended, or 503 under fail: closed); set sync_interval to at most 24.5s (default 1s)`},
		},
		{
			name: "token and token_env are exclusive",
			json: `{"accountant":{"cluster":"a","token":"s3cret","token_env":"TT_TOKEN"}}`,
			want: []string{`accountant.token_env: set only one of token and token_env (token_env names the environment variable that holds the token)`},
		},
		{
			name: "token_env is a variable name",
			json: `{"accountant":{"cluster":"a","token_env":"tt-token"}}`,
			want: []string{`accountant.token_env: "tt-token" is not an environment variable name (letters, digits and _, not starting with a digit), e.g. TT_ACCOUNTANT_TOKEN`},
		},
		{
			name: "token_env does not start with a digit",
			json: `{"accountant":{"cluster":"a","token_env":"1TOKEN"}}`,
			want: []string{`accountant.token_env: "1TOKEN" is not an environment variable name (letters, digits and _, not starting with a digit), e.g. TT_ACCOUNTANT_TOKEN`},
		},
		{
			name: "providers",
			json: `{"accountant":{"cluster":"a"},"providers":[{"path_prefix":"v1"},{"name":"all"},{"name":"Azure","route":"r"}]}`,
			want: []string{
				`providers[0].name: required (the provider name match.provider compares against, e.g. openai)`,
				`providers[0].path_prefix: "v1" is not a path prefix; write it with a leading /, e.g. /v1/messages`,
				`providers[1]: matches every request (no route, authority or path_prefix), so providers[2] and later can never match; move it last`,
				`providers[2].name: "Azure": provider names are lowercase letters, digits, '-', '_' and '.', as match.provider writes them; write "azure"`,
			},
		},
		{
			name: "keys",
			json: `{"governance":{"tenants":[{"org":"acme"}]},"keys":[
				{"kid":"vk_short","sha256":"ABC","owner":"org:Acme","scopes":{"models":["gpt-["],"endpoints":["v1/x"]}},
				{"kid":"vk_FEKZdMs2UQRi","sha256":"` + goodHash + `","owner":"org:nope"},
				{"kid":"vk_FEKZdMs2UQRi","sha256":"` + goodHash + `"}]}`,
			want: []string{
				`keys[0].kid: "vk_short" is not a kid (vk_ followed by 12 base62 characters)`,
				`keys[0].sha256: expected the hex SHA-256 of the key (64 lowercase hex characters), got "ABC"`,
				`keys[0].owner: node id "org:Acme": segment "org:Acme": id "Acme" is out of charset (lowercase letters, digits, - and _)`,
				`keys[0].scopes.models[0]: malformed pattern "gpt-[": syntax error in pattern (patterns use Go's path.Match, where * does not cross a /)`,
				`keys[0].scopes.endpoints[0]: "v1/x" is not a request path; write it with a leading /, e.g. /v1/chat/completions`,
				`keys[1].owner: node "org:nope" is not declared in governance.tenants, so no template limit would bind this key; declare it, or fix the owner`,
				`keys[2].kid: duplicate kid "vk_FEKZdMs2UQRi" (also keys[1])`,
				`keys[2].sha256: duplicate key hash (also keys[1])`,
				`keys[2].owner: required (the node that owns the key, e.g. org:acme/team:ml/user:dev1)`,
			},
		},
		{
			// Each of these scopes matches no request, so the key would be
			// refused on every call; the management API turns them down at
			// mint, and a static key is held to the same rules.
			name: "key scopes that match nothing",
			json: `{"governance":{"tenants":[{"org":"acme"}]},"keys":[
				{"kid":"vk_FEKZdMs2UQRi","sha256":"` + goodHash + `","owner":"org:acme",
				 "scopes":{"models":[],"providers":["OpenAI",""],"endpoints":["/openai/v1/chat/completions","/v1/models","/v1/embeddings/"]}}]}`,
			want: []string{
				`keys[0].scopes.models: an empty list allows no model at all; omit it (or write null) to allow every model, or list the ones the key may use`,
				`keys[0].scopes.providers[0]: "OpenAI" never matches: provider names are lowercase letters, digits, '-', '_' and '.', compared exactly; write "openai"`,
				`keys[0].scopes.providers[1]: an empty entry matches no provider; omit the list to allow every provider`,
				`keys[0].scopes.endpoints[0]: "/openai/v1/chat/completions" never matches: a request to a governed endpoint is matched by its canonical path, whatever route prefix it was sent under; write "/v1/chat/completions"`,
				`keys[0].scopes.endpoints[1]: "/v1/models" is not a governed provider endpoint, so no request would match it; an endpoint scope is one of /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /v1/messages (other paths, such as GET /v1/models, are let through by allow_passthrough)`,
				`keys[0].scopes.endpoints[2]: "/v1/embeddings/" never matches: a request to a governed endpoint is matched by its canonical path, whatever route prefix it was sent under; write "/v1/embeddings"`,
			},
		},
		{
			// A provider name no rule gives and the filter does not infer
			// never matches, so the limit never counts and the key is
			// refused on every call.
			name: "provider names nothing gives",
			json: `{"governance":{"tenants":[{"org":"acme"}],"limits":[
				{"id":"az_tpm","attach":{"node":"__global"},"type":"tpm","amount":20000,"period":"1m","match":{"provider":"azure"}},
				{"id":"oa_tpm","attach":{"node":"__global"},"type":"tpm","amount":20000,"period":"1m","match":{"provider":"openai"}},
				{"id":"fw_tpm","attach":{"node":"__global"},"type":"tpm","amount":20000,"period":"1m","match":{"provider":"fireworks"}}]},
				"providers":[{"name":"fireworks","authority":"api.fireworks.ai"}],
				"keys":[{"kid":"vk_FEKZdMs2UQRi","sha256":"` + goodHash + `","owner":"org:acme","scopes":{"providers":["openai","azure"]}}]}`,
			want: []string{
				`governance.limits[0].match.provider: "azure" never matches: no providers rule names it and the filter does not infer it (the provider names a request can be given here: anthropic, fireworks, openai); add a providers rule {"name": "azure", ...} that picks its requests, or correct the name`,
				`keys[0].scopes.providers[1]: "azure" never matches: no providers rule names it and the filter does not infer it (the provider names a request can be given here: anthropic, fireworks, openai); add a providers rule {"name": "azure", ...} that picks its requests, or correct the name`,
			},
		},
		{
			// With a rule that matches every request, the path is never
			// asked: only the rules' names can be given.
			name: "provider after a catch-all rule",
			json: `{"governance":{"limits":[
				{"id":"oa_tpm","attach":{"node":"__global"},"type":"tpm","amount":20000,"period":"1m","match":{"provider":"openai"}}]},
				"providers":[{"name":"gateway"}]}`,
			want: []string{
				`governance.limits[0].match.provider: "openai" never matches: no providers rule names it and the filter does not infer it (the provider names a request can be given here: gateway); add a providers rule {"name": "openai", ...} that picks its requests, or correct the name`,
			},
		},
		{
			name: "embedded governance compiles in full",
			json: `{"governance":{"limits":[{"id":"team_tpm","attach":{"node":"__global"},"type":"tpm","amount":500,"period":"1m"}]}}`,
			want: []string{`governance: compile limits: govern: limit "team_tpm": tpm limit "team_tpm": burst 500 is below the reserve cap 16384 — an ordinary max-token reserve could never fit (a permanent 100% refusal); raise burst (default is amount 500) to at least the reserve cap`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.json))
			var ps govern.Problems
			if !errors.As(err, &ps) {
				t.Fatalf("error %v (%T), want govern.Problems", err, err)
			}
			if got := ps.Error(); got != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", got, strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestDecodeSyntaxError(t *testing.T) {
	_, err := Decode([]byte("{\n  \"accountant\": {\"cluster\": \"a\",}\n}"))
	var se *config.SyntaxError
	if !errors.As(err, &se) || se.Line != 2 {
		t.Fatalf("error %v (%T), want a *config.SyntaxError on line 2", err, err)
	}
}

func TestBearerToken(t *testing.T) {
	env := map[string]string{"TT_TOKEN": "from-env", "EMPTY": ""}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		json, token, err string
	}{
		{json: `{"accountant":{"cluster":"a"}}`},
		{json: `{"accountant":{"cluster":"a","token":"inline"}}`, token: "inline"},
		{json: `{"accountant":{"cluster":"a","token_env":"TT_TOKEN"}}`, token: "from-env"},
		{json: `{"accountant":{"cluster":"a","token_env":"tt_Token_2"}}`,
			err: "accountant.token_env: the environment variable tt_Token_2 is not set in the wasm VM (or is empty); pass it with Envoy's vm_config.environment_variables (key_values, or host_env_keys from Envoy's own environment), or Istio's WasmPlugin vmConfig.env"},
		{json: `{"accountant":{"cluster":"a","token_env":"EMPTY"}}`,
			err: "accountant.token_env: the environment variable EMPTY is not set in the wasm VM (or is empty); pass it with Envoy's vm_config.environment_variables (key_values, or host_env_keys from Envoy's own environment), or Istio's WasmPlugin vmConfig.env"},
	}
	for _, tc := range tests {
		c, err := Decode([]byte(tc.json))
		if err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		token, err := c.Accountant.BearerToken(getenv)
		if token != tc.token || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("%s: BearerToken = %q, %v; want %q, %q", tc.json, token, err, tc.token, tc.err)
		}
	}
}

// TestDecodeAmountForms: the plugin configuration reaches the filter
// through hosts that carry numbers as float64 (Istio's pluginConfig), so a
// tiny amount arrives in exponent form; quoted amounts read too, exactly.
func TestDecodeAmountForms(t *testing.T) {
	c, err := Decode([]byte(`{"governance":{"enabled":true,"tenants":[{"org":"acme"}],"limits":[
		{"id":"tiny","attach":{"level":"org"},"type":"budget_usd","amount_usd":1e-7,"period":"day","override":{"allow":true,"max_amount_usd":"0.000001"}},
		{"id":"small","attach":{"level":"org"},"type":"budget_usd","amount_usd":"2.5E-6","period":"day","override":{"allow":true,"max_amount_usd":1E-5}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id            string
		amount, ceilN int64
	}{{"tiny", 100, 1000}, {"small", 2500, 10000}} {
		l := c.Plan.Limit(tc.id)
		if l == nil || l.Amount != tc.amount || l.OverrideMax != tc.ceilN {
			t.Errorf("%s: %+v, want amount %d and ceiling %d nanodollars", tc.id, l, tc.amount, tc.ceilN)
		}
	}
}
