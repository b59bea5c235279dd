package wasmtest

import (
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Route is one entry of the host's route table: Envoy's route_config in
// miniature. The first route whose match fits the request picks the cluster
// it goes to; its name and metadata are the xds.route_name and
// xds.route_metadata properties.
//
// As in Envoy, the route is chosen when the request headers arrive, before
// the filter runs, and kept: a filter that changes the headers a route
// matches on must clear the route cache (the foreign function
// clear_route_cache) for the change to pick another route. It is chosen
// again, from the headers as they are then, the next time it is needed.
type Route struct {
	// Name is the route's name (xds.route_name).
	Name string
	// PathPrefix matches the start of :path; "" matches every path.
	PathPrefix string
	// Headers must all match.
	Headers []HeaderMatch
	// Cluster names the Config.Clusters entry the request goes to; "" is
	// Config.Upstream.
	Cluster string
	// Metadata is the route's filter_metadata: per filter name (such as
	// envoy.filters.http.wasm), a JSON-like object of strings, numbers,
	// bools, nil, []any and map[string]any, as a google.protobuf.Struct
	// holds it.
	Metadata map[string]map[string]any
}

// HeaderMatch matches one request header by name: its first value equals
// Exact, starts with Prefix, or matches Regex whole (Envoy's safe_regex: an
// RE2 expression that must match the entire value); with none set, the
// header need only be present. Absent says the header must not be there.
type HeaderMatch struct {
	Name   string
	Exact  string
	Prefix string
	Regex  string
	Absent bool
}

// route is a checked Route.
type route struct {
	Route
	target *target
	meta   map[string]any   // filter name → map[string]any
	res    []*regexp.Regexp // per Headers entry, its Regex anchored (nil without)
}

func (h *Host) compileRoutes(rs []Route) error {
	for i, r := range rs {
		where := fmt.Sprintf("wasmtest: Config.Routes[%d] (%s)", i, r.Name)
		cr := &route{Route: r, target: h.upstream}
		cr.Headers = slices.Clone(r.Headers) // lower-cased below; the caller's stay as given
		if r.Cluster != "" {
			t, ok := h.clusters[r.Cluster]
			if !ok {
				return fmt.Errorf("%s: cluster %q is not in Config.Clusters", where, r.Cluster)
			}
			cr.target = t
		}
		for j, m := range r.Headers {
			if m.Name == "" {
				return fmt.Errorf("%s: Headers[%d] has no Name", where, j)
			}
			set := 0
			for _, v := range []string{m.Exact, m.Prefix, m.Regex} {
				if v != "" {
					set++
				}
			}
			if m.Absent && set > 0 || set > 1 {
				return fmt.Errorf("%s: Headers[%d] (%s): give one of Exact, Prefix, Regex and Absent", where, j, m.Name)
			}
			var re *regexp.Regexp
			if m.Regex != "" {
				var err error
				if re, err = regexp.Compile(`^(?:` + m.Regex + `)$`); err != nil {
					return fmt.Errorf("%s: Headers[%d] (%s): Regex: %w", where, j, m.Name, err)
				}
			}
			cr.res = append(cr.res, re)
			cr.Headers[j].Name = strings.ToLower(m.Name)
		}
		if len(r.Metadata) > 0 {
			cr.meta = make(map[string]any, len(r.Metadata))
			for name, obj := range r.Metadata {
				if err := checkValue(obj); err != nil {
					return fmt.Errorf("%s: Metadata[%q]: %v", where, name, err)
				}
				cr.meta[name] = obj
			}
		}
		h.routes = append(h.routes, cr)
	}
	return nil
}

// checkValue accepts what a google.protobuf.Struct can hold.
func checkValue(x any) error {
	switch x := x.(type) {
	case nil, string, bool, float64, float32, int, int32, int64, uint, uint32, uint64:
		return nil
	case []any:
		for i, e := range x {
			if err := checkValue(e); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return nil
	case map[string]any:
		for k, e := range x {
			if err := checkValue(e); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
		}
		return nil
	}
	return fmt.Errorf("a %T is not a Struct value (use string, float64, bool, nil, []any or map[string]any)", x)
}

func (r *route) matches(hdr hmap) bool {
	if r.PathPrefix != "" {
		p, _ := hdr.get(":path")
		if !strings.HasPrefix(p, r.PathPrefix) {
			return false
		}
	}
	for i, m := range r.Headers {
		v, ok := hdr.get(m.Name)
		switch {
		case !m.Absent && ok && r.res[i] != nil && !r.res[i].MatchString(v):
			return false
		case m.Absent:
			if ok {
				return false
			}
		case !ok:
			return false
		case m.Exact != "" && v != m.Exact:
			return false
		case m.Prefix != "" && !strings.HasPrefix(v, m.Prefix):
			return false
		}
	}
	return true
}

// routeState is a stream's cached route.
type routeState uint8

const (
	routeUnset   routeState = iota // not chosen yet, or the cache was cleared
	routeChosen                    // s.rt is the route (nil: none matched)
	routeImplied                   // no route table: everything goes to Upstream
)

// currentRoute is the stream's route, chosen from its request headers as
// they are now if the cache is empty. nil means no route matched.
func (s *stream) currentRoute() *route {
	if s.rtState == routeUnset {
		s.chooseRoute()
	}
	return s.rt
}

func (s *stream) chooseRoute() {
	if len(s.h.routes) == 0 {
		s.rtState, s.rt = routeImplied, nil
		return
	}
	s.rtState, s.rt = routeChosen, nil
	for _, r := range s.h.routes {
		if r.matches(s.req.hdr) {
			s.rt = r
			return
		}
	}
}

// upstreamTarget is where the request goes: its route's cluster, Upstream
// without a route table, nil for no route.
func (s *stream) upstreamTarget() *target {
	if s.currentRoute() == nil {
		if s.rtState == routeImplied {
			return s.h.upstream
		}
		return nil
	}
	return s.rt.target
}

// routeProperty answers xds.route_name, xds.route_metadata… and
// xds.cluster_name from the route table; ok is false when the host has no
// route table (Config.Properties answers then).
func (v *vm) routeProperty(st *stream, seg [][]byte, rp, rs uint32) (status, bool) {
	if len(v.h.routes) == 0 || st == nil || len(seg) == 0 {
		return 0, false
	}
	r := st.currentRoute()
	switch string(seg[0]) {
	case "route_name":
		if len(seg) != 1 || r == nil {
			return statusNotFound, true
		}
		return v.outString(r.Name, rp, rs), true
	case "cluster_name":
		if len(seg) != 1 || r == nil {
			return statusNotFound, true
		}
		name := r.Cluster
		if name == "" {
			name = "upstream"
		}
		return v.outString(name, rp, rs), true
	case "route_metadata":
		if r == nil {
			return statusNotFound, true
		}
		b, st := metadataProperty(r.meta, seg[1:])
		if st != statusOK {
			return st, true
		}
		return v.outBytes(b, rp, rs), true
	}
	return 0, false
}

// metadataProperty walks an envoy.config.core.v3.Metadata the way Envoy's
// getProperty does: the message itself comes back serialized; its
// filter_metadata field is a map of Structs, a Struct is a map, a
// ListValue a list indexed by number, and a leaf is serialized as CEL
// values are (strings raw, numbers as 8-byte doubles, bools as one byte,
// maps and lists in the pair format, null a serialization failure).
func metadataProperty(meta map[string]any, seg [][]byte) ([]byte, status) {
	if len(seg) == 0 {
		return encodeMetadata(meta), statusOK
	}
	switch string(seg[0]) {
	case "filter_metadata":
		var x any = meta
		if meta == nil {
			x = map[string]any{}
		}
		return valueProperty(x, seg[1:])
	case "typed_filter_metadata":
		if len(seg) > 1 {
			return nil, statusNotFound
		}
		return pairsBytes(nil), statusOK // an empty map
	}
	return nil, statusNotFound
}

func valueProperty(x any, seg [][]byte) ([]byte, status) {
	for _, s := range seg {
		switch c := x.(type) {
		case map[string]any:
			e, ok := c[string(s)]
			if !ok {
				return nil, statusNotFound
			}
			x = e
		case []any:
			i, err := strconv.Atoi(string(s))
			if err != nil || i < 0 || i >= len(c) {
				return nil, statusNotFound
			}
			x = c[i]
		default:
			return nil, statusNotFound
		}
	}
	return serializeValue(x)
}

func serializeValue(x any) ([]byte, status) {
	switch x := x.(type) {
	case nil:
		return nil, statusSerializationFailed
	case string:
		return []byte(x), statusOK
	case bool:
		if x {
			return []byte{1}, statusOK
		}
		return []byte{0}, statusOK
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		m := make(hmap, 0, len(keys))
		for _, k := range keys {
			b, st := serializeValue(x[k])
			if st != statusOK {
				return nil, statusSerializationFailed
			}
			m = append(m, hpair{k, string(b)})
		}
		return pairsBytes(m), statusOK
	case []any:
		m := make(hmap, 0, len(x))
		for _, e := range x {
			b, st := serializeValue(e)
			if st != statusOK {
				return nil, statusSerializationFailed
			}
			m = append(m, hpair{string(b), ""})
		}
		return pairsBytes(m), statusOK
	}
	f, _ := number(x)
	return binary.LittleEndian.AppendUint64(nil, math.Float64bits(f)), statusOK
}

// pairsBytes is m in the pair format; an empty map is the 4-byte n=0 form,
// as Envoy's serializer writes it.
func pairsBytes(m hmap) []byte {
	if len(m) == 0 {
		return []byte{0, 0, 0, 0}
	}
	b := make([]byte, m.pairsSize())
	m.marshalTo(b)
	return b
}

func number(x any) (float64, bool) {
	switch x := x.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

// encodeMetadata is the wire encoding of an envoy.config.core.v3.Metadata
// holding filter_metadata (field 1, map<string, google.protobuf.Struct>),
// map entries in key order, as a deterministic marshal writes them.
func encodeMetadata(meta map[string]any) []byte {
	var b []byte
	for _, k := range sortedKeys(meta) {
		obj, _ := meta[k].(map[string]any)
		entry := protowire.AppendTag(nil, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, k)
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendBytes(entry, encodeStruct(obj))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	return b
}

// encodeStruct encodes a google.protobuf.Struct: fields (1) is a
// map<string, Value>.
func encodeStruct(m map[string]any) []byte {
	var b []byte
	for _, k := range sortedKeys(m) {
		entry := protowire.AppendTag(nil, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, k)
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendBytes(entry, encodeValue(m[k]))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	return b
}

// encodeValue encodes a google.protobuf.Value: null_value 1, number_value
// 2, string_value 3, bool_value 4, struct_value 5, list_value 6.
func encodeValue(x any) []byte {
	switch x := x.(type) {
	case nil:
		return protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 0)
	case string:
		return protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), x)
	case bool:
		return protowire.AppendVarint(protowire.AppendTag(nil, 4, protowire.VarintType), protowire.EncodeBool(x))
	case map[string]any:
		return protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), encodeStruct(x))
	case []any:
		var l []byte
		for _, e := range x {
			l = protowire.AppendTag(l, 1, protowire.BytesType)
			l = protowire.AppendBytes(l, encodeValue(e))
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), l)
	}
	f, _ := number(x)
	return protowire.AppendFixed64(protowire.AppendTag(nil, 2, protowire.Fixed64Type), math.Float64bits(f))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
