package envoy_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	wasmfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	wasmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/wasm/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"sigs.k8s.io/yaml"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/tokentriage/tokentriage/filter"
	"github.com/tokentriage/tokentriage/shared/pluginconf"

	// Every typed_config the configs name must resolve, so each extension
	// they use is imported for its registration with the proto registry.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/credential_injector/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/http/injected_credentials/generic/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// What every tokentriage Envoy config must agree on with the filter and the
// README.
const (
	wasmFilterName = "envoy.filters.http.wasm"
	routerName     = "envoy.filters.http.router"
	wasmRuntime    = "envoy.wasm.runtime.v8"
	wasmFile       = "/etc/tokentriage/filter.wasm"
	wasmVMID       = "tokentriage"
)

// envoyConfig is one decoded, validated Envoy bootstrap and what the checks
// found in it.
type envoyConfig struct {
	bootstrap *bootstrapv3.Bootstrap
	hcms      []located[*hcmv3.HttpConnectionManager]
	wasm      []located[*wasmfilterv3.Wasm]
	// injectors are the credential injectors of the HTTP filter chains.
	injectors []injector
	// sds are the SDS secrets the config names, with the file each comes
	// from.
	sds []located[*tlsv3.SdsSecretConfig]
}

// located is a message found inside a typed_config, with the path to it.
type located[M any] struct {
	path string
	msg  M
}

// loadEnvoyConfig decodes an Envoy bootstrap written in YAML as Envoy
// reads it, but strictly: YAML → JSON → protojson into Bootstrap with
// unknown fields rejected and every Any resolved against the registry; then
// the generated validators run on the bootstrap and on every message held
// in an Any, which the bootstrap's own ValidateAll does not descend into.
// Errors name the YAML line where they can.
func loadEnvoyConfig(src []byte) (*envoyConfig, error) {
	js, err := yaml.YAMLToJSONStrict(src)
	if err != nil {
		return nil, fmt.Errorf("reading YAML: %w", err)
	}
	var b bootstrapv3.Bootstrap
	if err := (protojson.UnmarshalOptions{}).Unmarshal(js, &b); err != nil {
		hint := ""
		if strings.Contains(err.Error(), "unable to resolve") {
			hint = " (a misspelt @type, or an extension this test does not import: add its go-control-plane package to the imports of bootstrap_test.go)"
		}
		return nil, fmt.Errorf("%sdecoding bootstrap: %w%s", yamlLine(src, err), err, hint)
	}
	if err := b.ValidateAll(); err != nil {
		return nil, fmt.Errorf("validating bootstrap: %w", err)
	}
	cfg := &envoyConfig{bootstrap: &b}
	var visit func(path string, a *anypb.Any) error
	visit = func(path string, a *anypb.Any) error {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: resolving %s: %w", path, a.GetTypeUrl(), err)
		}
		if v, ok := inner.(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				return fmt.Errorf("%s: validating %s: %w", path, inner.ProtoReflect().Descriptor().FullName(), err)
			}
		}
		switch m := inner.(type) {
		case *hcmv3.HttpConnectionManager:
			cfg.hcms = append(cfg.hcms, located[*hcmv3.HttpConnectionManager]{path, m})
			for i, f := range m.GetHttpFilters() {
				if in, ok := newInjector(fmt.Sprintf("%s.http_filters[%d]", path, i), f); ok {
					cfg.injectors = append(cfg.injectors, in)
				}
			}
		case *wasmfilterv3.Wasm:
			cfg.wasm = append(cfg.wasm, located[*wasmfilterv3.Wasm]{path, m})
		}
		cfg.sds = append(cfg.sds, sdsConfigs(path, inner.ProtoReflect())...)
		return eachAny(inner.ProtoReflect(), path, visit)
	}
	if err := eachAny(b.ProtoReflect(), "", visit); err != nil {
		return nil, err
	}
	return cfg, nil
}

var unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)

// yamlLine turns protojson's position in the intermediate JSON, which no
// one wrote, into the YAML line of an unknown field when the field's name
// occurs once in the source.
func yamlLine(src []byte, err error) string {
	m := unknownField.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	key := regexp.MustCompile(`(^|[\s{,-])"?` + regexp.QuoteMeta(m[1]) + `"?\s*:`)
	var lines []int
	for i, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") && key.MatchString(line) {
			lines = append(lines, i+1)
		}
	}
	if len(lines) != 1 {
		return ""
	}
	return fmt.Sprintf("line %d: ", lines[0])
}

// eachAny calls fn for every Any reachable from m without passing through
// another Any, in field-number order, with its path in proto field names.
func eachAny(m protoreflect.Message, path string, fn func(path string, a *anypb.Any) error) error {
	return walk(m, path, fn)
}

func walk(m protoreflect.Message, path string, fn func(string, *anypb.Any) error) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		return fn(path, a)
	}
	var fields []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fields = append(fields, fd)
		return true
	})
	sort.Slice(fields, func(i, j int) bool { return fields[i].Number() < fields[j].Number() })
	for _, fd := range fields {
		v := m.Get(fd)
		p := string(fd.Name())
		if path != "" {
			p = path + "." + p
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				if err := walk(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i), fn); err != nil {
					return err
				}
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			var keys []protoreflect.MapKey
			v.Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k)
				return true
			})
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			for _, k := range keys {
				if err := walk(v.Map().Get(k).Message(), fmt.Sprintf("%s[%q]", p, k.String()), fn); err != nil {
					return err
				}
			}
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			if err := walk(v.Message(), p, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// pluginConfiguration returns the bytes Envoy hands the filter in
// proxy_on_configure: StringValue and BytesValue unwrapped, Struct as JSON.
func pluginConfiguration(w *wasmfilterv3.Wasm) ([]byte, error) {
	c := w.GetConfig().GetConfiguration()
	if c == nil {
		return nil, errors.New("config.configuration: missing; the filter needs its plugin configuration (a StringValue holding JSON)")
	}
	inner, err := c.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("config.configuration: %w", err)
	}
	switch v := inner.(type) {
	case *wrapperspb.StringValue:
		return []byte(v.GetValue()), nil
	case *wrapperspb.BytesValue:
		return v.GetValue(), nil
	case *structpb.Struct:
		return protojson.Marshal(v)
	}
	return nil, fmt.Errorf("config.configuration: type %s is not one the filter reads; use google.protobuf.StringValue holding JSON", c.GetTypeUrl())
}

// checkTokentriage checks what the proto validators cannot: that the
// filter is wired the way the filter and the README expect, that its
// plugin configuration passes the filter's own decode and compile and
// names clusters and routes that exist, and that no route to a provider
// passes on the client's accept-encoding or credentials.
// envoyDefaultBufferLimit is a listener's per_connection_buffer_limit_bytes
// when the config leaves it out.
const envoyDefaultBufferLimit = 1 << 20

func checkTokentriage(cfg *envoyConfig) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	clusters := map[string]bool{}
	for _, c := range cfg.bootstrap.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = true
	}
	if len(cfg.wasm) == 0 {
		fail("no %s filter: the config does not load tokentriage", wasmFilterName)
	}
	for _, h := range cfg.hcms {
		errs = append(errs, checkFilterChain(h.path, h.msg)...)
	}
	// The smallest buffer limit of a listener (Envoy's default 1 MiB when
	// unset): a request body the filter buffers beyond it gets Envoy's
	// bare 413 before the filter's max_body_bytes is reached.
	bufferLimit, bufferAt := uint32(0), ""
	for i, l := range cfg.bootstrap.GetStaticResources().GetListeners() {
		limit := uint32(envoyDefaultBufferLimit)
		if v := l.GetPerConnectionBufferLimitBytes(); v != nil {
			limit = v.GetValue()
		}
		if bufferAt == "" || limit < bufferLimit {
			bufferLimit, bufferAt = limit, fmt.Sprintf("static_resources.listeners[%d] (%s)", i, l.GetName())
		}
	}
	accountant := ""
	for _, w := range cfg.wasm {
		pc := w.msg.GetConfig()
		vm := pc.GetVmConfig()
		if got := vm.GetRuntime(); got != wasmRuntime {
			fail("%s.config.vm_config.runtime: %q, want %q (the runtime of Envoy's official build)", w.path, got, wasmRuntime)
		}
		if got := vm.GetCode().GetLocal().GetFilename(); got != wasmFile {
			fail("%s.config.vm_config.code.local.filename: %q, want %q (where the README mounts build/filter.wasm)", w.path, got, wasmFile)
		}
		if got := vm.GetVmId(); got != wasmVMID {
			fail("%s.config.vm_config.vm_id: %q, want %q (the shared-data namespace every worker VM shares)", w.path, got, wasmVMID)
		}
		if pc.GetFailOpen() || pc.GetFailurePolicy() == wasmv3.FailurePolicy_FAIL_OPEN {
			fail("%s.config: fails open: a crashed filter would let every request through ungoverned; use fail_open: false or failure_policy FAIL_CLOSED or FAIL_RELOAD", w.path)
		}
		raw, err := pluginConfiguration(w.msg)
		if err != nil {
			fail("%s.%w", w.path, err)
			continue
		}
		conf, err := decodePluginConfig(raw)
		if err != nil {
			fail("%s.config.configuration: the filter would reject its plugin configuration: %w", w.path, err)
			continue
		}
		if a := conf.Accountant; a != nil {
			accountant = a.Cluster
		}
		if knob := pc.GetAllowOnHeadersStopIteration().GetValue(); conf.HoldHeaders && !knob {
			fail("%s.config: hold_headers is on but allow_on_headers_stop_iteration is not: Envoy would hold the body back from the filter paused at the headers, and every governed request would wait %v before the filter lets it go; set allow_on_headers_stop_iteration: true (Envoy 1.35 and later)", w.path, filter.HoldGrace)
		} else if knob && !conf.HoldHeaders {
			fail("%s.config: allow_on_headers_stop_iteration is on but hold_headers is not: set both (the filter holds the headers until gate 2) or neither", w.path)
		}
		if bufferAt != "" && int64(bufferLimit) < conf.MaxBodyBytes {
			fail("%s: per_connection_buffer_limit_bytes %d is below the filter's max_body_bytes %d: request bodies between the two would get Envoy's bare 413 instead of the filter's; raise the listener's limit or lower max_body_bytes",
				bufferAt, bufferLimit, conf.MaxBodyBytes)
		}
		if a := conf.Accountant; a != nil {
			if err := checkInternalToken(a, vm.GetEnvironmentVariables().GetHostEnvKeys(), vm.GetEnvironmentVariables().GetKeyValues()); err != nil {
				fail("%s.config: %w", w.path, err)
			}
		}
		if a := conf.Accountant; a != nil && !clusters[a.Cluster] {
			fail("%s.config.configuration: accountant.cluster %q is not a cluster of this config (the filter's callouts would fail with BAD_ARGUMENT); clusters: %s",
				w.path, a.Cluster, strings.Join(sortedKeys(clusters), ", "))
		}
		routes := routeNames(cfg.hcms)
		for i, p := range conf.Providers {
			if p.Route != "" && !routes[p.Route] {
				fail("%s.config.configuration: providers[%d].route %q names no route of this config, so it never matches; routes: %s",
					w.path, i, p.Route, strings.Join(sortedKeys(routes), ", "))
			}
		}
	}
	for _, h := range cfg.hcms {
		_, routeErrs := checkEnvoyProviderRoutes(h.path, h.msg, accountant, cfg.injectors)
		errs = append(errs, routeErrs...)
	}
	if len(cfg.wasm) > 0 {
		errs = append(errs, checkStatTags(cfg.bootstrap)...)
	}
	for _, sds := range cfg.sds {
		if err := checkSDSFile(sds.msg); err != nil {
			fail("%s: %w", sds.path, err)
		}
	}
	return errors.Join(errs...)
}

// checkInternalToken checks that a filter configured with an accountant
// sends it the internal token (without it the accountant answers every
// callout 401), and that the token is not written in the shipped file: it
// comes from token_env, a variable the VM is given from the host's
// environment (hostEnv: Envoy's host_env_keys; Istio's vmConfig.env with
// valueFrom: HOST), or set in it from elsewhere (set: key_values).
func checkInternalToken(a *pluginconf.Accountant, hostEnv []string, set map[string]string) error {
	switch {
	case a.Token != "":
		return errors.New("configuration: accountant.token is written in the file: a secret in a shipped config; use accountant.token_env and give the VM the variable from the host's environment")
	case a.TokenEnv == "":
		return errors.New("configuration: accountant has neither token nor token_env: the accountant refuses every callout without its internal token (401); set token_env: TT_ACCOUNTANT_TOKEN and pass that variable to the VM")
	case !slices.Contains(hostEnv, a.TokenEnv) && set[a.TokenEnv] == "":
		return fmt.Errorf("configuration: accountant.token_env %q is not passed to the VM; add it to vm_config.environment_variables.host_env_keys (Envoy) or vmConfig.env with valueFrom: HOST (Istio)", a.TokenEnv)
	}
	return nil
}

// checkFilterChain checks one HTTP connection manager: the wasm filter
// comes before the router, the router is last, and every route to an
// upstream lets a streamed response run (Envoy's default 15 s route timeout
// would cut a long completion off mid-stream).
func checkFilterChain(path string, h *hcmv3.HttpConnectionManager) []error {
	var errs []error
	wasmAt, routerAt := -1, -1
	for i, f := range h.GetHttpFilters() {
		switch f.GetName() {
		case wasmFilterName:
			wasmAt = i
		case routerName:
			routerAt = i
		}
	}
	n := len(h.GetHttpFilters())
	switch {
	case routerAt != n-1:
		errs = append(errs, fmt.Errorf("%s.http_filters: the last filter must be %s", path, routerName))
	case wasmAt >= 0 && wasmAt > routerAt:
		errs = append(errs, fmt.Errorf("%s.http_filters: %s must come before %s", path, wasmFilterName, routerName))
	}
	for _, vh := range h.GetRouteConfig().GetVirtualHosts() {
		for i, r := range vh.GetRoutes() {
			ra, ok := r.GetAction().(*routev3.Route_Route)
			if !ok {
				continue
			}
			if t := ra.Route.GetTimeout(); t == nil || (t.AsDuration() != 0 && t.AsDuration().Minutes() < 10) {
				errs = append(errs, fmt.Errorf("%s.route_config.virtual_hosts[%s].routes[%d] (%s): route.timeout must be 0s (none) or at least 10m for streamed LLM responses",
					path, vh.GetName(), i, r.GetName()))
			}
		}
	}
	return errs
}

func routeNames(hcms []located[*hcmv3.HttpConnectionManager]) map[string]bool {
	names := map[string]bool{}
	for _, h := range hcms {
		for _, vh := range h.msg.GetRouteConfig().GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if r.GetName() != "" {
					names[r.GetName()] = true
				}
			}
		}
	}
	return names
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
