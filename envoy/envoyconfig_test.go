package envoy_test

import (
	"os"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/vkey"
)

// envoyConfigFiles is every Envoy bootstrap this folder ships: each *.yaml
// at its top level.
func envoyConfigFiles(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 2 {
		t.Fatalf("found Envoy configs %v; want at least envoy.yaml and envoy-embedded-plan.yaml", names)
	}
	return names
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEnvoyConfigs decodes every Envoy config in the folder strictly with
// Envoy's own protos, runs the generated validators, and checks the
// filter's wiring and plugin configuration.
func TestEnvoyConfigs(t *testing.T) {
	for _, name := range envoyConfigFiles(t) {
		t.Run(name, func(t *testing.T) {
			cfg, err := loadEnvoyConfig(readFile(t, name))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := checkTokentriage(cfg); err != nil {
				t.Fatalf("%s:\n%v", name, err)
			}
			if len(cfg.wasm) != 1 {
				t.Errorf("%s: %d tokentriage filters, want 1", name, len(cfg.wasm))
			}
		})
	}
}

// TestEnvoyConfigPorts keeps the configs and the README in step: the
// gateway listens on 0.0.0.0:10000 (the plaintext local example on
// 127.0.0.1:10000) and the admin on 127.0.0.1:9901.
func TestEnvoyConfigPorts(t *testing.T) {
	for _, name := range envoyConfigFiles(t) {
		cfg, err := loadEnvoyConfig(readFile(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b := cfg.bootstrap
		admin := b.GetAdmin().GetAddress().GetSocketAddress()
		if admin.GetAddress() != "127.0.0.1" || admin.GetPortValue() != 9901 {
			t.Errorf("%s: admin on %s:%d, want 127.0.0.1:9901", name, admin.GetAddress(), admin.GetPortValue())
		}
		ls := b.GetStaticResources().GetListeners()
		if len(ls) != 1 {
			t.Fatalf("%s: %d listeners, want 1", name, len(ls))
		}
		sa := ls[0].GetAddress().GetSocketAddress()
		want := "0.0.0.0"
		if localPlaintext(name) {
			want = "127.0.0.1"
		}
		if sa.GetAddress() != want || sa.GetPortValue() != 10000 {
			t.Errorf("%s: listener on %s:%d, want %s:10000", name, sa.GetAddress(), sa.GetPortValue(), want)
		}
	}
}

// TestEnvoyConfigMisspeltField loads testdata/envoy-misspelt-field.yaml, a
// copy of envoy.yaml with stat_prefix written stat_prefx inside the HTTP
// connection manager's typed_config: strict decoding must refuse it and
// name the field and its line.
func TestEnvoyConfigMisspeltField(t *testing.T) {
	_, err := loadEnvoyConfig(readFile(t, filepath.Join("testdata", "envoy-misspelt-field.yaml")))
	if err == nil {
		t.Fatal("a misspelt field was accepted")
	}
	for _, want := range []string{`unknown field "stat_prefx"`, "line 42: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// TestEnvoyConfigRejects breaks envoy.yaml in one place at a time and
// checks that the failure names what is wrong.
func TestEnvoyConfigRejects(t *testing.T) {
	src := string(readFile(t, "envoy.yaml"))
	for _, tc := range []struct {
		name     string
		old, new string
		want     []string
	}{
		{
			name: "misspelt field inside the wasm typed_config",
			old:  "vm_config:\n", new: "vm_confg:\n",
			want: []string{`unknown field "vm_confg"`},
		},
		{
			name: "misspelt field at the top level",
			old:  "static_resources:", new: "static_resource:",
			want: []string{`unknown field "static_resource"`, "line 64: "},
		},
		{
			name: "typed_config type that does not exist",
			old:  "filters.http.wasm.v3.Wasm", new: "filters.http.wasm.v3.WasmFilter",
			want: []string{"envoy.extensions.filters.http.wasm.v3.WasmFilter"},
		},
		{
			name: "port out of range, caught by the bootstrap's validators",
			old:  "port_value: 8791", new: "port_value: 87910",
			want: []string{"PortValue", "65535"},
		},
		{
			name: "empty stat_prefix, caught by the validators of a message inside an Any",
			old:  "stat_prefix: llm_gateway", new: `stat_prefix: ""`,
			want: []string{"static_resources.listeners[0].filter_chains[0].filters[0].typed_config", "StatPrefix"},
		},
		{
			name: "listener buffer limit below max_body_bytes",
			old:  "per_connection_buffer_limit_bytes: 9437184", new: "per_connection_buffer_limit_bytes: 1048576",
			want: []string{"static_resources.listeners[0] (llm_gateway): per_connection_buffer_limit_bytes 1048576 is below the filter's max_body_bytes 8388608"},
		},
		{
			name: "listener buffer limit left at Envoy's default",
			old:  "      per_connection_buffer_limit_bytes: 9437184\n", new: "",
			want: []string{"per_connection_buffer_limit_bytes 1048576 is below"},
		},
		{
			name: "misspelt field in the plugin configuration",
			old:  `"sync_interval": "1s"`, new: `"sync_intervl": "1s"`,
			want: []string{"the filter would reject its plugin configuration", "sync_intervl"},
		},
		{
			name: "accountant cluster the config does not define",
			old:  `"cluster": "tokentriage_accountant"`, new: `"cluster": "tokentriage_acountant"`,
			want: []string{`accountant.cluster "tokentriage_acountant" is not a cluster of this config`},
		},
		{
			name: "filter that sends the accountant no internal token",
			old: `"timeout_ms": 2000,
                                "token_env": "TT_ACCOUNTANT_TOKEN"`, new: `"timeout_ms": 2000`,
			want: []string{"accountant has neither token nor token_env: the accountant refuses every callout without its internal token (401)"},
		},
		{
			name: "internal token variable not passed to the VM",
			old:  "host_env_keys: [TT_ACCOUNTANT_TOKEN]", new: "host_env_keys: [OPENAI_API_KEY]",
			want: []string{`accountant.token_env "TT_ACCOUNTANT_TOKEN" is not passed to the VM; add it to vm_config.environment_variables.host_env_keys`},
		},
		{
			name: "internal token written in the file",
			old:  `"token_env": "TT_ACCOUNTANT_TOKEN"`, new: `"token": "s3cret"`,
			want: []string{"accountant.token is written in the file: a secret in a shipped config"},
		},
		{
			name: "provider mapped to a route that does not exist",
			old:  `"route": "anthropic"`, new: `"route": "claude"`,
			want: []string{`providers[0].route "claude" names no route`},
		},
		{
			name: "filter that fails open",
			old:  "failure_policy: FAIL_RELOAD", new: "failure_policy: FAIL_OPEN",
			want: []string{"fails open"},
		},
		{
			name: "headers held on an Envoy that holds the body back",
			old:  "allow_on_headers_stop_iteration: true", new: "allow_on_headers_stop_iteration: false",
			want: []string{"hold_headers is on but allow_on_headers_stop_iteration is not"},
		},
		{
			name: "the stop-iteration knob without hold_headers",
			old:  `"hold_headers": true,`, new: ``,
			want: []string{"allow_on_headers_stop_iteration is on but hold_headers is not"},
		},
		{
			name: "stats without the limit tags",
			old:  "      regex: '(limit_id=\\.=(.+?);\\.;)'", new: "      regex: '(limit=\\.=(.+?);\\.;)'",
			want: []string{"stats_config.stats_tags: no tag limit_id"},
		},
		{
			name: "a provider key in a secret file Envoy does not watch",
			old:  "watched_directory: { path: /etc/tokentriage/secrets }\n                  - name: anthropic_key", new: "\n                  - name: anthropic_key",
			want: []string{`secret "openai_api_key": path_config_source has no watched_directory: a rotated secret would need a restart`},
		},
		{
			name: "a provider key from a file envoy/sds does not have",
			old:  "/etc/tokentriage/sds/anthropic-api-key.yaml", new: "/etc/tokentriage/sds/claude-key.yaml",
			want: []string{"sds/claude-key.yaml: no such file"},
		},
		{
			name: "the gateway certificate from a file outside the watched directory",
			old:  "watched_directory: { path: /etc/tokentriage/tls }", new: "watched_directory: { path: /etc/tokentriage/certs }",
			want: []string{`secret "gateway_certificate" reads /etc/tokentriage/tls/tls.crt, outside the watched directory /etc/tokentriage/certs`},
		},
		{
			name: "an OpenAI key that reaches the self-hosted server",
			old:  "request_headers_to_remove: [authorization, x-api-key, api-key,", new: "request_headers_to_remove: [x-api-key, api-key,",
			want: []string{"routes[1] (self_hosted): the openai_api_key key (credential injector openai_key, header authorization) reaches cluster self_hosted"},
		},
		{
			name: "wrong wasm file",
			old:  "/etc/tokentriage/filter.wasm }", new: "/etc/envoy/filter.wasm }",
			want: []string{`code.local.filename: "/etc/envoy/filter.wasm"`},
		},
		{
			name: "route timeout that would cut a stream",
			old:  "cluster: openai\n                            auto_host_rewrite: true\n                            timeout: 0s",
			new:  "cluster: openai\n                            auto_host_rewrite: true\n                            timeout: 60s",
			want: []string{"routes[2] (openai): route.timeout must be 0s"},
		},
		{
			name: "provider route that passes a cookie on",
			old:  "request_headers_to_remove: [x-api-key, api-key, x-goog-api-key, cookie, ", new: "request_headers_to_remove: [x-api-key, api-key, x-goog-api-key, ",
			want: []string{"routes[2] (openai): the client's cookie reaches the provider"},
		},
		{
			name: "provider route that passes accept-encoding on",
			old:  "request_headers_to_remove: [authorization, api-key, x-goog-api-key, cookie, proxy-authorization, accept-encoding]", new: "request_headers_to_remove: [authorization, api-key, x-goog-api-key, cookie, proxy-authorization]",
			want: []string{"routes[0] (anthropic): the client's accept-encoding reaches the provider (neither removed nor overwritten): add it to request_headers_to_remove"},
		},
		{
			name: "openai route that passes the client's x-api-key on",
			old:  "request_headers_to_remove: [x-api-key, api-key, x-goog-api-key, cookie, proxy-authorization, accept-encoding]", new: "request_headers_to_remove: [api-key, x-goog-api-key, cookie, proxy-authorization, accept-encoding]",
			want: []string{"routes[2] (openai): the anthropic_api_key key (credential injector anthropic_key, header x-api-key) reaches cluster openai"},
		},
		{
			name: "anthropic route that passes the client's authorization on",
			old:  "request_headers_to_remove: [authorization, api-key, x-goog-api-key, cookie, proxy-authorization, accept-encoding]", new: "request_headers_to_remove: [api-key, x-goog-api-key, cookie, proxy-authorization, accept-encoding]",
			want: []string{"routes[0] (anthropic): the openai_api_key key (credential injector openai_key, header authorization) reaches cluster anthropic"},
		},
		{
			name: "provider key added beside the client's",
			old:  "overwrite: true\n                      credential:\n                        name: envoy.http.injected_credentials.generic\n                        typed_config:\n                          \"@type\": type.googleapis.com/envoy.extensions.http.injected_credentials.generic.v3.Generic\n                          header: authorization",
			new:  "overwrite: false\n                      credential:\n                        name: envoy.http.injected_credentials.generic\n                        typed_config:\n                          \"@type\": type.googleapis.com/envoy.extensions.http.injected_credentials.generic.v3.Generic\n                          header: authorization",
			want: []string{"routes[2] (openai): the client's authorization reaches the provider (added beside the client's value)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := strings.Count(src, tc.old); n != 1 {
				t.Fatalf("envoy.yaml holds %q %d times; the case needs it exactly once", tc.old, n)
			}
			broken := strings.Replace(src, tc.old, tc.new, 1)
			cfg, err := loadEnvoyConfig([]byte(broken))
			if err == nil {
				err = checkTokentriage(cfg)
			}
			if err == nil {
				t.Fatal("the broken config was accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// The demo key envoy-embedded-plan.yaml publishes in its header comment.
const embeddedDemoKey = "tt-vk_EnvoyDemoKey-LocalDemoOnlyNotASecret000000001"

// TestEmbeddedDemoKey keeps the demo key in envoy-embedded-plan.yaml's
// comment and README in step with the static key table: same kid, same
// hash, the owner the example tree declares.
func TestEmbeddedDemoKey(t *testing.T) {
	src := readFile(t, "envoy-embedded-plan.yaml")
	if !strings.Contains(string(src), embeddedDemoKey) {
		t.Fatalf("envoy-embedded-plan.yaml no longer documents the demo key %s", embeddedDemoKey)
	}
	if !strings.Contains(string(readFile(t, "README.md")), embeddedDemoKey) {
		t.Errorf("README.md no longer shows the demo key %s", embeddedDemoKey)
	}
	cfg, err := loadEnvoyConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := pluginConfiguration(cfg.wasm[0].msg)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := decodePluginConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	kid, err := vkey.KID(embeddedDemoKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(conf.Keys) != 1 {
		t.Fatalf("%d static keys, want the demo key alone", len(conf.Keys))
	}
	k := conf.Keys[0]
	if k.KID != kid || !vkey.Verify(embeddedDemoKey, k.SHA256) || k.Owner != demoOwner {
		t.Errorf("static key {kid %s, owner %s} does not match the demo key %s (kid %s, sha256 %s, owner %s)",
			k.KID, k.Owner, embeddedDemoKey, kid, vkey.Hash(embeddedDemoKey), demoOwner)
	}
}

// localPlaintext reports the one config that may listen without TLS: the
// laptop example, on loopback.
func localPlaintext(name string) bool { return strings.Contains(name, "local-plaintext") }

// TestEnvoyConfigTLS: a virtual key is a bearer credential, so every
// gateway listener speaks TLS, with its certificate from a file Envoy
// watches (SDS); only the local plaintext example does not, and it listens
// on loopback alone.
func TestEnvoyConfigTLS(t *testing.T) {
	for _, name := range envoyConfigFiles(t) {
		cfg, err := loadEnvoyConfig(readFile(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, l := range cfg.bootstrap.GetStaticResources().GetListeners() {
			for i, fc := range l.GetFilterChains() {
				ts := fc.GetTransportSocket()
				var dtc tlsv3.DownstreamTlsContext
				tls := ts != nil && ts.GetTypedConfig().UnmarshalTo(&dtc) == nil
				switch {
				case localPlaintext(name) && tls:
					t.Errorf("%s: listener %s filter_chains[%d] speaks TLS in the plaintext example", name, l.GetName(), i)
				case localPlaintext(name):
					if a := l.GetAddress().GetSocketAddress().GetAddress(); a != "127.0.0.1" {
						t.Errorf("%s: the plaintext listener binds %s; it may listen on loopback only", name, a)
					}
				case !tls:
					t.Errorf("%s: listener %s filter_chains[%d] has no DownstreamTlsContext: virtual keys would travel in clear", name, l.GetName(), i)
				case len(dtc.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()) == 0 && len(dtc.GetCommonTlsContext().GetTlsCertificates()) == 0:
					t.Errorf("%s: listener %s filter_chains[%d]: TLS without a certificate", name, l.GetName(), i)
				}
			}
		}
	}
}

// TestSDSFiles decodes every secrets file of envoy/sds/ strictly, as the
// DiscoveryResponse Envoy reads from a path_config_source, and checks that
// each one a config names is found and its material read from files.
func TestSDSFiles(t *testing.T) {
	files, err := filepath.Glob("sds/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no SDS files: %v", err)
	}
	named := map[string]bool{}
	for _, name := range envoyConfigFiles(t) {
		cfg, err := loadEnvoyConfig(readFile(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range cfg.sds {
			named[filepath.Join("sds", filepath.Base(s.msg.GetSdsConfig().GetPathConfigSource().GetPath()))] = true
		}
	}
	for _, f := range files {
		secs, err := loadSDSFile(f)
		if err != nil {
			t.Error(err)
			continue
		}
		if len(secs) != 1 {
			t.Errorf("%s: %d secrets, want 1", f, len(secs))
		}
		if !named[f] {
			t.Errorf("%s: no config names it", f)
		}
	}
}
