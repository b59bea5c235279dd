package wasmtest

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/shared/propertypath"
)

// Properties (shared/proxy-wasm.md 1.6, 3.8). A path is its segments
// joined by NUL; strings come back raw, integers as 8 bytes little-endian,
// maps in the pair format. An unknown path is NOT_FOUND.

// configProps turns Config.Properties (written paths) into wire keys,
// adding the top-level spellings older SDKs read (node, cluster_name, …)
// for every xds.* entry that the configuration does not set itself.
func configProps(in map[string][]byte) (map[string][]byte, error) {
	out := make(map[string][]byte, 2*len(in))
	set := make(map[string]bool, len(in))
	aliases := map[string][]byte{}
	for k, v := range in {
		segs, err := propertypath.Parse(k)
		if err != nil {
			return nil, fmt.Errorf("wasmtest: Config.Properties: %w", err)
		}
		key := propertypath.Wire(segs)
		out[key] = v
		set[key] = true
		if segs[0] == "xds" && len(segs) > 1 {
			aliases[propertypath.Wire(segs[1:])] = v
		}
	}
	for k, v := range aliases {
		if !set[k] {
			out[k] = v
		}
	}
	return out, nil
}

// proxy_get_property(path_ptr, path_size, ret_ptr, ret_size)
func hostGetProperty(v *vm, s []uint64) {
	pp, pn, rp, rs := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3])
	raw, ok := v.read(pp, pn)
	if !ok {
		s[0] = statusInvalidMemoryAccess
		return
	}
	path := append(v.scratch[:0], raw...) // the guest may run (allocate) before we are done
	v.scratch = path
	s[0] = uint64(v.property(path, rp, rs))
}

func (v *vm) property(path []byte, rp, rs uint32) status {
	_, st := v.context()
	seg := bytes.Split(path, []byte{0})
	top := string(seg[0])
	switch top {
	case "request":
		if st != nil && len(seg) > 1 {
			return st.requestProperty(v, seg[1:], rp, rs)
		}
		return statusNotFound
	case "response":
		if st != nil && len(seg) > 1 {
			return st.responseProperty(v, seg[1:], rp, rs)
		}
		return statusNotFound
	case "source", "destination":
		if st == nil || len(seg) != 2 {
			return statusNotFound
		}
		addr := st.remoteAddr
		if top == "destination" {
			addr = st.localAddr
		}
		switch string(seg[1]) {
		case "address":
			if addr == "" {
				return statusNotFound
			}
			return v.outString(addr, rp, rs)
		case "port":
			_, port, err := net.SplitHostPort(addr)
			n, err2 := strconv.ParseInt(port, 10, 64)
			if err != nil || err2 != nil {
				return statusNotFound
			}
			return v.outU64(uint64(n), rp, rs)
		}
		return statusNotFound
	case "upstream":
		// upstream.address: the host and port of the upstream the request
		// went to, once it went (an in-process handler has none).
		if st != nil && len(seg) == 2 && string(seg[1]) == "address" && st.px.upStarted {
			if t := st.upstreamTarget(); t != nil && t.base != nil {
				return v.outString(t.base.Host, rp, rs)
			}
		}
		return statusNotFound
	case "xds":
		if r, ok := v.routeProperty(st, seg[1:], rp, rs); ok {
			return r
		}
	case "route_name", "route_metadata", "cluster_name":
		// the older top-level spellings of the xds attributes
		if r, ok := v.routeProperty(st, seg, rp, rs); ok {
			return r
		}
	}
	if val, ok := v.h.props[string(path)]; ok {
		return v.outBytes(val, rp, rs)
	}
	if len(seg) == 1 {
		switch top {
		case "plugin_name":
			return v.outString(v.h.cfg.PluginName, rp, rs)
		case "plugin_root_id":
			return v.outString(v.h.cfg.RootID, rp, rs)
		case "plugin_vm_id":
			return v.outString(v.h.cfg.VMID, rp, rs)
		}
	}
	if st != nil {
		if val, ok := st.props[string(path)]; ok {
			return v.outBytes(val, rp, rs)
		}
	}
	return statusNotFound
}

// requestHeaderProperties are the request properties that are one
// header's value (request.host is :authority), by property name.
var requestHeaderProperties = map[string]string{
	"host":      ":authority",
	"scheme":    ":scheme",
	"method":    ":method",
	"referer":   "referer",
	"useragent": "user-agent",
	"id":        "x-request-id",
}

func (st *stream) requestProperty(v *vm, seg [][]byte, rp, rs uint32) status {
	hdr := st.req.hdr
	name := string(seg[0])
	if name == "headers" {
		return headersProperty(v, hdr, seg, rp, rs)
	}
	if len(seg) != 1 {
		return statusNotFound
	}
	if h, ok := requestHeaderProperties[name]; ok {
		return mapProperty(v, hdr, h, rp, rs)
	}
	path, _ := hdr.get(":path")
	switch name {
	case "path":
		return v.outString(path, rp, rs)
	case "url_path":
		p, _, _ := strings.Cut(path, "?")
		return v.outString(p, rp, rs)
	case "query":
		_, q, _ := strings.Cut(path, "?")
		return v.outString(q, rp, rs)
	case "protocol":
		return v.outString(st.proto, rp, rs)
	case "time":
		return v.outU64(uint64(st.start.UnixNano()), rp, rs)
	case "duration":
		if !st.inLog {
			return statusNotFound
		}
		return v.outU64(uint64(v.h.clock.Now().Sub(st.start)), rp, rs)
	case "size":
		return v.outU64(uint64(st.req.size), rp, rs)
	case "total_size":
		return v.outU64(uint64(st.req.size)+uint64(st.reqHeaderBytes), rp, rs)
	}
	return statusNotFound
}

func (st *stream) responseProperty(v *vm, seg [][]byte, rp, rs uint32) status {
	name := string(seg[0])
	if name == "code_details" && len(seg) == 1 {
		if st.details == "" {
			return statusNotFound
		}
		return v.outString(st.details, rp, rs)
	}
	if !st.respBegun {
		return statusNotFound
	}
	switch name {
	case "headers", "trailers":
		m := st.resp.hdr
		if name == "trailers" {
			m = st.resp.trl
		}
		return headersProperty(v, m, seg, rp, rs)
	}
	if len(seg) != 1 {
		return statusNotFound
	}
	switch name {
	case "code":
		code, err := strconv.Atoi(st.statusText())
		if err != nil {
			return statusNotFound
		}
		return v.outU64(uint64(code), rp, rs)
	case "flags":
		return v.outU64(0, rp, rs)
	case "size":
		return v.outU64(uint64(st.resp.size), rp, rs)
	case "total_size":
		return v.outU64(uint64(st.resp.size)+uint64(st.resp.hdr.byteSize()), rp, rs)
	}
	return statusNotFound
}

func (st *stream) statusText() string {
	c, _ := st.resp.hdr.get(":status")
	return c
}

// headersProperty is a header map's property: the map in the pair format
// (request.headers) or, with one more segment, one header
// (request.headers.NAME).
func headersProperty(v *vm, m hmap, seg [][]byte, rp, rs uint32) status {
	switch len(seg) {
	case 1:
		return v.outPairs(m, rp, rs)
	case 2:
		return headerProperty(v, m, seg[1], rp, rs)
	}
	return statusNotFound
}

// headerProperty is one header by name; several values are joined with
// commas, as Envoy's header wrapper does.
func headerProperty(v *vm, m hmap, name []byte, rp, rs uint32) status {
	var vals []string
	for i := range m {
		if equalLower(m[i].k, name) {
			vals = append(vals, m[i].v)
		}
	}
	if len(vals) == 0 {
		return statusNotFound
	}
	return v.outString(strings.Join(vals, ","), rp, rs)
}

func mapProperty(v *vm, m hmap, k string, rp, rs uint32) status {
	val, ok := m.get(k)
	if !ok {
		return statusNotFound
	}
	return v.outString(val, rp, rs)
}

// proxy_set_property(path_ptr, path_size, value_ptr, value_size): filter
// state of the stream, readable back by the same path.
func hostSetProperty(v *vm, s []uint64) {
	path, ok1 := v.read(uint32(s[0]), uint32(s[1]))
	val, ok2 := v.read(uint32(s[2]), uint32(s[3]))
	if !ok1 || !ok2 {
		s[0] = statusInvalidMemoryAccess
		return
	}
	_, st := v.context()
	if st == nil {
		s[0] = statusNotFound
		return
	}
	if st.props == nil {
		st.props = map[string][]byte{}
	}
	st.props[string(path)] = append([]byte(nil), val...)
	s[0] = statusOK
}
