package wasmtest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// named is an upstream that answers with its own name.
func named(name string) Cluster {
	return Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, name+" model="+r.Header.Get("X-Model"))
	})}
}

const wasmFilter = "envoy.filters.http.wasm"

func routeTable() []Route {
	return []Route{
		{
			Name:    "big-models",
			Headers: []HeaderMatch{{Name: "X-Model", Prefix: "big-"}},
			Cluster: "big",
			Metadata: map[string]map[string]any{wasmFilter: {
				"backend": "pool-big", "weight": 2.5, "on": true, "tags": []any{"a", "b"}, "nothing": nil,
			}},
		},
		{
			Name:     "default",
			Metadata: map[string]map[string]any{wasmFilter: {"backend": "pool-small", "weight": 1, "on": false, "tags": []any{"x", "y"}}},
		},
	}
}

// The route is chosen from the headers as they arrive; a filter that
// changes a header the routes match on moves the request only when it
// clears the route cache, as in Envoy. The route's metadata is read at
// Envoy's path, a filter name with dots in it included.
func TestRoutesAndRouteMetadata(t *testing.T) {
	h := newHost(t, Config{
		Clusters: map[string]Cluster{"big": named("big")},
		Upstream: named("small"),
		Routes:   routeTable(),
	})
	for _, c := range []struct {
		name, model, setModel string
		clear                 bool
		upstream, before      string
		after                 string
	}{
		{"headers as sent", "big-1", "", false, "big model=big-1",
			"big-models/pool-big/2.5/1/b/!3/null3/legacy=big-models", ""}, // a Struct holding a null does not serialize, as in Envoy
		{"changed, cache kept", "small-1", "big-2", false, "small model=big-2",
			"default/pool-small/1/0/y/backend+on+tags+weight/null1/legacy=default", "default/"},
		{"changed, cache cleared", "small-1", "big-2", true, "big model=big-2",
			"default/", "big-models/pool-big/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hd := hdr("X-Mode", "route", "X-Request-Id", c.name, "X-Model", c.model)
			if c.setModel != "" {
				hd.Set("X-Set-Model", c.setModel)
			}
			if c.clear {
				hd.Set("X-Clear", "1")
			}
			resp := h.Do(Request{Headers: hd})
			if resp.Status != 200 || string(resp.Body) != c.upstream {
				t.Fatalf("got %d %q; want %q", resp.Status, resp.Body, c.upstream)
			}
			n := notes(t, h, c.name)
			if !strings.Contains(n, "before="+c.before) {
				t.Errorf("notes %q: want before=%s", n, c.before)
			}
			if c.after != "" && !strings.Contains(n, "after="+c.after) {
				t.Errorf("notes %q: want after=%s", n, c.after)
			}
		})
	}
}

// A request no route matches is Envoy's 404 route_not_found.
func TestNoRouteMatches(t *testing.T) {
	h := newHost(t, Config{
		Upstream: named("small"),
		Routes:   []Route{{Name: "only-v1", PathPrefix: "/v1/"}},
	})
	if resp := h.Do(Request{Path: "/v2/x"}); resp.Status != 404 {
		t.Errorf("got %d %q", resp.Status, resp.Body)
	}
	if resp := h.Do(Request{Path: "/v1/x"}); resp.Status != 200 {
		t.Errorf("got %d %q", resp.Status, resp.Body)
	}
}

// A header's Regex must match its whole value, as Envoy's safe_regex does.
func TestRouteHeaderRegex(t *testing.T) {
	routes := []Route{
		{Name: "open-weights", Headers: []HeaderMatch{{Name: "X-Model", Regex: "(llama|qwen)-.*"}}, Cluster: "big"},
		{Name: "default"},
	}
	h := newHost(t, Config{Clusters: map[string]Cluster{"big": named("big")}, Upstream: named("small"), Routes: routes})
	for model, want := range map[string]string{
		"llama-3.1-8b": "big", "qwen-2": "big",
		"my-llama-3": "small", // the expression is anchored at the start…
		"llama":      "small", // …and must match to the end
		"":           "small",
	} {
		hd := hdr()
		if model != "" {
			hd.Set("X-Model", model)
		}
		if resp := h.Do(Request{Headers: hd}); !strings.HasPrefix(string(resp.Body), want+" ") {
			t.Errorf("X-Model %q went to %q, want %s", model, resp.Body, want)
		}
	}
	if routes[0].Headers[0].Name != "X-Model" {
		t.Errorf("the caller's route table was changed: %q", routes[0].Headers[0].Name)
	}
}

func TestRouteConfigErrors(t *testing.T) {
	for _, c := range []struct {
		routes []Route
		want   string
	}{
		{[]Route{{Name: "r", Cluster: "nope"}}, `wasmtest: Config.Routes[0] (r): cluster "nope" is not in Config.Clusters`},
		{[]Route{{Name: "r", Headers: []HeaderMatch{{}}}}, `wasmtest: Config.Routes[0] (r): Headers[0] has no Name`},
		{[]Route{{Name: "r", Headers: []HeaderMatch{{Name: "a", Absent: true, Exact: "x"}}}}, `wasmtest: Config.Routes[0] (r): Headers[0] (a): give one of Exact, Prefix, Regex and Absent`},
		{[]Route{{Name: "r", Headers: []HeaderMatch{{Name: "a", Exact: "x", Regex: "x"}}}}, `wasmtest: Config.Routes[0] (r): Headers[0] (a): give one of Exact, Prefix, Regex and Absent`},
		{[]Route{{Name: "r", Headers: []HeaderMatch{{Name: "a", Regex: "("}}}}, "wasmtest: Config.Routes[0] (r): Headers[0] (a): Regex: error parsing regexp: missing closing ): `^(?:()$`"},
		{[]Route{{Name: "r", Metadata: map[string]map[string]any{"f": {"k": struct{}{}}}}}, `wasmtest: Config.Routes[0] (r): Metadata["f"]: "k": a struct {} is not a Struct value (use string, float64, bool, nil, []any or map[string]any)`},
	} {
		_, err := New(context.Background(), Config{Module: conformance(t), Routes: c.routes})
		if err == nil || err.Error() != c.want {
			t.Errorf("error %v\nwant  %s", err, c.want)
		}
	}
	_, err := New(context.Background(), Config{Module: conformance(t), Properties: map[string][]byte{"a..b": nil}})
	if want := `wasmtest: Config.Properties: property path "a..b": empty segment at byte 2`; err == nil || err.Error() != want {
		t.Errorf("error %v\nwant  %s", err, want)
	}
}

// Envoy's foreign functions that the host has: zlib compress and
// uncompress, clear_route_cache; any other name is NOT_FOUND.
func TestForeignFunctions(t *testing.T) {
	h := newHost(t, Config{})
	resp := h.Do(Request{Headers: hdr("X-Mode", "foreign")})
	if got, want := string(resp.Body), "compress=0:true uncompress=0:true corrupt=3 clear=0 unknown=1"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
