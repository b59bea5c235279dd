package envoy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/tokentriage/tokentriage/internal/stub"
	"github.com/tokentriage/tokentriage/internal/testwasm"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// seen records what reached one cluster.
type seen struct {
	name string
	mu   sync.Mutex
	hits []http.Header
	next http.Handler
}

func (s *seen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits = append(s.hits, r.Header.Clone())
	s.mu.Unlock()
	s.next.ServeHTTP(w, r)
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.hits)
}

// envoyRoutes translates the route table of a config's first HTTP
// connection manager into wasmtest's: the path prefix, the header matches
// (exact, prefix, safe_regex, present) and the cluster of each route that
// forwards. A match this translation does not know fails the test rather
// than be approximated.
func envoyRoutes(t *testing.T, cfg *envoyConfig) []wasmtest.Route {
	t.Helper()
	var out []wasmtest.Route
	for _, vh := range cfg.hcms[0].msg.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			ra, ok := r.GetAction().(*routev3.Route_Route)
			if !ok {
				continue // answered by Envoy itself
			}
			m := r.GetMatch()
			if _, ok := m.GetPathSpecifier().(*routev3.RouteMatch_Prefix); !ok || len(m.GetQueryParameters()) > 0 {
				t.Fatalf("route %s: a match other than a path prefix; teach envoyRoutes it", r.GetName())
			}
			wr := wasmtest.Route{Name: r.GetName(), PathPrefix: m.GetPrefix(), Cluster: ra.Route.GetCluster()}
			for _, h := range m.GetHeaders() {
				hm := wasmtest.HeaderMatch{Name: h.GetName()}
				sm := h.GetStringMatch()
				switch {
				case h.GetInvertMatch() || sm.GetIgnoreCase():
					t.Fatalf("route %s: header %s: an inverted or case-blind match; teach envoyRoutes it", r.GetName(), h.GetName())
				case sm.GetSafeRegex() != nil:
					hm.Regex = sm.GetSafeRegex().GetRegex()
				case sm.GetExact() != "":
					hm.Exact = sm.GetExact()
				case sm.GetPrefix() != "":
					hm.Prefix = sm.GetPrefix()
				case h.GetPresentMatch():
				default:
					t.Fatalf("route %s: header %s: a match envoyRoutes does not translate", r.GetName(), h.GetName())
				}
				wr.Headers = append(wr.Headers, hm)
			}
			out = append(out, wr)
		}
	}
	return out
}

// TestModelRoute runs envoy.yaml's own route table in wasmtest, with the
// real filter holding headers as envoy.yaml configures it: a request whose
// body asks for an open-weight model goes to the self_hosted cluster, with
// x-tt-model and x-tt-provider set; others go to OpenAI; a client's own
// x-tt-model never picks the backend.
func TestModelRoute(t *testing.T) {
	cfg, err := loadEnvoyConfig(readFile(t, "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.wasm) != 1 {
		t.Fatalf("%d wasm filters", len(cfg.wasm))
	}
	raw, err := pluginConfiguration(cfg.wasm[0].msg)
	if err != nil {
		t.Fatal(err)
	}
	// envoy.yaml's plugin configuration, with its plan embedded instead of
	// synced from an accountant (no key required, no limits).
	var pc map[string]any
	if err := json.Unmarshal(raw, &pc); err != nil {
		t.Fatal(err)
	}
	if pc["hold_headers"] != true || !cfg.wasm[0].msg.GetConfig().GetAllowOnHeadersStopIteration().GetValue() {
		t.Fatal("envoy.yaml does not hold headers")
	}
	delete(pc, "accountant")
	pc["governance"] = map[string]any{"enabled": true, "limits": []any{}}
	conf, _ := json.Marshal(pc)

	routes := envoyRoutes(t, cfg)
	clusters := map[string]wasmtest.Cluster{}
	upstreams := map[string]*seen{}
	for _, r := range routes {
		if upstreams[r.Cluster] == nil {
			s := &seen{name: r.Cluster, next: stub.New(stub.Options{History: -1})}
			upstreams[r.Cluster] = s
			clusters[r.Cluster] = wasmtest.Cluster{Handler: s}
		}
	}
	for _, want := range []string{"openai", "anthropic", "self_hosted"} {
		if upstreams[want] == nil {
			t.Fatalf("envoy.yaml routes to no cluster %s (routes %+v)", want, routes)
		}
	}
	h, err := wasmtest.New(context.Background(), wasmtest.Config{
		Module: testwasm.Filter(t), PluginConfig: conf, RootID: "tokentriage", VMID: "tokentriage",
		Clusters: clusters, Routes: routes, AllowOnHeadersStopIteration: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })

	chat := func(model string, hdr ...string) wasmtest.Response {
		hd := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(hdr); i += 2 {
			hd.Set(hdr[i], hdr[i+1])
		}
		return h.Do(wasmtest.Request{Method: "POST", Path: "/v1/chat/completions", Headers: hd,
			BodyChunks: [][]byte{[]byte(`{"model":"` + model + `","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)}})
	}
	for _, c := range []struct {
		model   string
		hdr     []string
		cluster string
	}{
		{"llama-3.1-8b-instruct", nil, "self_hosted"},
		{"qwen-2.5-7b", nil, "self_hosted"},
		{"gpt-4o-mini", nil, "openai"},
		{"gpt-4o-mini", []string{"X-Tt-Model", "llama-3.1-8b-instruct"}, "openai"}, // a client's own header
	} {
		before := map[string]int{}
		for n, s := range upstreams {
			before[n] = s.count()
		}
		resp := chat(c.model, c.hdr...)
		if resp.Status != 200 {
			t.Fatalf("%s: status %d %s", c.model, resp.Status, resp.Body)
		}
		for n, s := range upstreams {
			if d := s.count() - before[n]; (n == c.cluster) != (d == 1) || d > 1 {
				t.Errorf("model %s (client headers %v): cluster %s got %d requests; want it at %s", c.model, c.hdr, n, d, c.cluster)
			}
		}
		s := upstreams[c.cluster]
		s.mu.Lock()
		if len(s.hits) == before[c.cluster] {
			s.mu.Unlock()
			continue
		}
		got := s.hits[len(s.hits)-1]
		s.mu.Unlock()
		if m := got.Values("X-Tt-Model"); len(m) != 1 || m[0] != c.model {
			t.Errorf("model %s: %s saw x-tt-model %q", c.model, c.cluster, m)
		}
		if p := got.Get("X-Tt-Provider"); !strings.Contains("openai anthropic", p) || p == "" {
			t.Errorf("model %s: %s saw x-tt-provider %q", c.model, c.cluster, p)
		}
	}
}
