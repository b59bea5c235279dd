// Package pluginconf owns the filter's plugin configuration: the JSON the
// proxy-wasm host hands the filter in proxy_on_configure (Envoy's
// config.configuration, Istio's WasmPlugin pluginConfig). The filter, the
// embedded dev host and the Envoy config tests all decode it with Decode, so
// a configuration that passes one passes all three.
package pluginconf

import (
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// Config is the plugin configuration.
type Config struct {
	// Accountant names the accountant: keys, runtime plane, spend snapshots
	// and, when Governance is absent, the plan. Optional when Governance is
	// present (rpm, tpm and concurrency then need no accountant).
	Accountant *Accountant `json:"accountant"`
	// SyncInterval is how often one VM of the host polls the accountant
	// (a Go duration). Default "1s".
	SyncInterval string `json:"sync_interval"`
	// FlushInterval is how often a VM sends its buffered ledger rows.
	// Default "500ms".
	FlushInterval string `json:"flush_interval"`
	// MaxBodyBytes caps a buffered request body; larger bodies get a 413.
	// Default 8 MiB.
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// Governance, when present, arms the filter from its first request
	// with this plan (same schema as the YAML governance block).
	Governance *config.Governance `json:"governance"`
	// Keys is a static key table for deployments and tests without an
	// accountant. Keys minted by the accountant arrive by sync.
	Keys []StaticKey `json:"keys"`
	// Providers maps a request to a provider name, first match wins. With
	// no match the provider is inferred from the path (/v1/messages is
	// anthropic, the rest openai).
	Providers []Provider `json:"providers"`
	// LeaseTTL bounds how long a concurrency lease or tpm reserve held by a
	// lost VM survives. Default "15m".
	LeaseTTL string `json:"lease_ttl"`
	// HoldHeaders holds the headers of a governed request with a body until
	// gate 2 has read the body and decided: a request refused at gate 2
	// never reaches the provider, and the headers that go on carry the
	// request's model and provider (x-tt-model, x-tt-provider) and its
	// exact length, for routes to pick a backend by. It needs a host that
	// keeps delivering the body to a filter that paused at the headers:
	// Envoy 1.35 or later with allow_on_headers_stop_iteration: true in the
	// Wasm filter's config (wasmtest: AllowOnHeadersStopIteration). Off,
	// the headers go on at gate 1 (without content-length, as gate 2 may
	// change the body) and a gate-2 refusal resets an upstream request
	// that has begun.
	HoldHeaders bool `json:"hold_headers"`

	// Plan is Governance compiled by Decode; nil when Governance is absent.
	Plan *govern.Plan `json:"-"`
}

// Accountant says how to reach the accountant through the host.
type Accountant struct {
	// Cluster is the host's upstream cluster name (Envoy cluster).
	Cluster string `json:"cluster"`
	// Authority is the :authority sent on callouts. Default: Cluster.
	Authority string `json:"authority"`
	// TimeoutMS bounds each callout. Default 2000.
	TimeoutMS int64 `json:"timeout_ms"`
	// Token, when set, is sent as a bearer token on internal calls.
	Token string `json:"token"`
	// TokenEnv names the environment variable that holds the bearer token
	// instead, so the token stays out of the configuration. The filter
	// reads it from the VM's environment (WASI) at plugin start: Envoy's
	// vm_config.environment_variables, Istio's WasmPlugin vmConfig.env.
	// At most one of Token and TokenEnv.
	TokenEnv string `json:"token_env"`
}

// StaticKey is one entry of the static key table.
type StaticKey struct {
	KID    string      `json:"kid"`
	SHA256 string      `json:"sha256"`
	Owner  string      `json:"owner"`
	Scopes vkey.Scopes `json:"scopes"`
}

// Provider maps requests to a provider name. Every non-empty field must
// match: Route against the xds.route_name property, Authority against
// :authority, PathPrefix against :path.
type Provider struct {
	Name       string `json:"name"`
	Route      string `json:"route"`
	Authority  string `json:"authority"`
	PathPrefix string `json:"path_prefix"`
}
