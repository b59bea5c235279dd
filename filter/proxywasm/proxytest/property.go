package proxytest

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/filter/proxywasm/internal/abi"
	"github.com/tokentriage/tokentriage/shared/propertypath"
)

// GetProperty answers from, in order: what the filter set on the current
// stream, Options.Properties, the plugin_* properties, and the stream's
// request.* / response.* attributes derived from its headers (request.id
// is x-request-id, as in Envoy; response.code is 8 bytes little-endian).
func (h *vmHost) GetProperty(path []byte) ([]byte, uint32) {
	h.hostCalls++
	key := string(path)
	s := h.cur()
	if s != nil {
		if v, ok := s.props[key]; ok {
			return clone(v), abi.StatusOK
		}
	}
	segs := strings.Split(key, "\x00")
	if v, ok := h.proc.props[key]; ok {
		return clone(v), abi.StatusOK
	}
	switch key {
	case "plugin_name":
		return []byte(h.proc.opts.PluginName), abi.StatusOK
	case "plugin_root_id":
		return []byte(h.proc.opts.RootID), abi.StatusOK
	case "plugin_vm_id":
		return []byte(h.proc.opts.VMID), abi.StatusOK
	}
	if s != nil {
		if v, ok := streamAttribute(s, segs); ok {
			return v, abi.StatusOK
		}
	}
	return nil, abi.StatusNotFound
}

// wireProperties keys Options.Properties by their wire path, and serves
// every xds.* entry at its older top-level spelling too, as wasmtest does
// (both read the written form with shared/propertypath). A key that is not
// a path is a mistake in the test's setup: it panics with the reason.
func wireProperties(in map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, 2*len(in))
	aliases := map[string][]byte{}
	for k, v := range in {
		segs, err := propertypath.Parse(k)
		if err != nil {
			panic("proxytest: Options.Properties: " + err.Error())
		}
		out[propertypath.Wire(segs)] = v
		if segs[0] == "xds" && len(segs) > 1 {
			aliases[propertypath.Wire(segs[1:])] = v
		}
	}
	for k, v := range aliases {
		if _, set := out[k]; !set {
			out[k] = v
		}
	}
	return out
}

func streamAttribute(s *stream, segs []string) ([]byte, bool) {
	if len(segs) < 2 {
		return nil, false
	}
	header := func(m [][2]string, k string) ([]byte, bool) {
		v, ok := firstValue(m, k)
		return []byte(v), ok
	}
	switch segs[0] {
	case "request":
		path, _ := firstValue(s.req.headers, ":path")
		switch segs[1] {
		case "id":
			return header(s.req.headers, "x-request-id")
		case "path":
			return header(s.req.headers, ":path")
		case "url_path":
			p, _, _ := strings.Cut(path, "?")
			return []byte(p), path != ""
		case "query":
			_, q, _ := strings.Cut(path, "?")
			return []byte(q), path != ""
		case "host":
			return header(s.req.headers, ":authority")
		case "method":
			return header(s.req.headers, ":method")
		case "scheme":
			return header(s.req.headers, ":scheme")
		case "headers":
			if len(segs) == 3 {
				return header(s.req.headers, segs[2])
			}
			return abi.AppendPairs(nil, s.req.headers), true
		}
	case "response":
		switch segs[1] {
		case "code":
			st, ok := firstValue(s.resp.headers, ":status")
			n, err := strconv.ParseInt(st, 10, 64)
			if !ok || err != nil {
				return nil, false
			}
			return binary.LittleEndian.AppendUint64(nil, uint64(n)), true
		case "headers":
			if len(segs) == 3 {
				return header(s.resp.headers, segs[2])
			}
			return abi.AppendPairs(nil, s.resp.headers), true
		}
	}
	return nil, false
}

// SetProperty stores a property on the current stream; the root context
// has none (NOT_FOUND), as in Envoy.
func (h *vmHost) SetProperty(path, value []byte) uint32 {
	h.hostCalls++
	s := h.cur()
	if s == nil {
		return abi.StatusNotFound
	}
	if s.props == nil {
		s.props = map[string][]byte{}
	}
	s.props[string(path)] = clone(value)
	return abi.StatusOK
}
