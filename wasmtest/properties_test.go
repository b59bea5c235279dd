package wasmtest

import (
	"strconv"
	"strings"
	"testing"
)

func TestProperties(t *testing.T) {
	h := newHost(t, Config{
		PluginName: "tokentriage.istio-system",
		RootID:     "tt_root",
		VMID:       "tt_vm",
		Properties: map[string][]byte{
			"xds.cluster_name": []byte("outbound|443||api.openai.com"),
			"xds.route_name":   []byte("llm"),
			"xds.node.id":      []byte("router~10.0.0.1~gw.istio-system"),
			"xds.listener_metadata.filter_metadata['envoy.lb'].zone": []byte("eu-1"),
		},
	})
	resp := h.Do(Request{Path: "/v1/chat?x=1", Host: "gw.local", Headers: hdr("X-Mode", "properties", "X-Request-Id", "req-1", "X-Foo", "bar", "User-Agent", "ua/1")})
	want := strings.Join([]string{
		"id=req-1", "path=/v1/chat?x=1", "url_path=/v1/chat", "query=x=1", "method=GET", "host=gw.local",
		"scheme=http", "protocol=HTTP/1.1", "useragent=ua/1", "header=bar", "time=" + strconv.FormatInt(t0.UnixNano(), 10),
		"plugin_name=tokentriage.istio-system", "plugin_root_id=tt_root", "plugin_vm_id=tt_vm",
		"cluster=outbound|443||api.openai.com", "route=llm", "node_id=router~10.0.0.1~gw.istio-system",
		"legacy_node_id=router~10.0.0.1~gw.istio-system", "response_code=!1", "unknown=!1", "source_port=40000",
	}, " ")
	if got := string(resp.Body); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// A segment with dots in it is one segment: the filter reads it at
	// xds / listener_metadata / filter_metadata / envoy.lb / zone.
	resp = h.Do(Request{Headers: hdr("X-Mode", "property", "X-Path", "xds,listener_metadata,filter_metadata,envoy.lb,zone")})
	if got := string(resp.Body); got != "0:eu-1" {
		t.Errorf("dotted segment: got %q", got)
	}
	resp = h.Do(Request{Headers: hdr("X-Mode", "property", "X-Path", "listener_metadata,filter_metadata,envoy.lb,zone")})
	if got := string(resp.Body); got != "0:eu-1" {
		t.Errorf("older top-level spelling: got %q", got)
	}
}

// proxy_set_property writes filter state the stream reads back; empty
// values come back as (0,0) without the allocator being asked for 0 bytes
// (the guest's allocator traps on 0).
func TestSetPropertyAndEmptyResults(t *testing.T) {
	h := newHost(t, Config{})
	h.Do(Request{Headers: hdr("X-Mode", "set-property", "X-Request-Id", "sp")})
	if n := notes(t, h, "sp"); !strings.Contains(n, "set=0;get=0:my-value") {
		t.Errorf("notes %q", n)
	}
	resp := h.Do(Request{Headers: hdr("X-Mode", "alloc-empty", "X-Request-Id", "ae", "X-Empty", "")})
	if resp.Status != 200 {
		t.Fatalf("status %d; logs %v", resp.Status, h.Logs())
	}
	n := notes(t, h, "ae")
	for _, want := range []string{"empty=0:", "nobody=0:0", "root=0:", "plugin-config=1", "resp-pairs=0:0"} {
		if !strings.Contains(n, want) {
			t.Errorf("notes %q lack %q", n, want)
		}
	}
}

func TestLogLevel(t *testing.T) {
	h := newHost(t, Config{LogLevel: LogWarn})
	resp := h.Do(Request{Headers: hdr("X-Mode", "log-level")})
	if got := string(resp.Body); got != "level=3 st=0" {
		t.Errorf("got %q", got)
	}
}

// An allocator that answers 0 makes the host call INVALID_MEMORY_ACCESS; an
// allocator that calls the host traps (cpp-host runs malloc restricted).
func TestAllocatorBehaviours(t *testing.T) {
	h := newHost(t, Config{})
	if resp := h.Do(Request{Headers: hdr("X-Mode", "alloc-zero")}); string(resp.Body) != "st=6" {
		t.Errorf("got %q", resp.Body)
	}
	if resp := h.Do(Request{Headers: hdr("X-Mode", "alloc-restricted")}); resp.Status != 503 {
		t.Errorf("got %d %q", resp.Status, resp.Body)
	}
	_, why := h.Failed(1)
	if want := "Function: proxy_on_memory_allocate failed: restricted_callback: env.proxy_get_property is not allowed"; !strings.HasPrefix(why, want) {
		t.Errorf("failure %q, want prefix %q", why, want)
	}
}
