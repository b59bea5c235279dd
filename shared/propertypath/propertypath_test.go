package propertypath

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"plugin_name", []string{"plugin_name"}},
		{"xds.node.id", []string{"xds", "node", "id"}},
		{"xds.route_metadata.filter_metadata['envoy.filters.http.wasm'].backend",
			[]string{"xds", "route_metadata", "filter_metadata", "envoy.filters.http.wasm", "backend"}},
		{`a["x'y"].b`, []string{"a", "x'y", "b"}},
		{"a['b.c']", []string{"a", "b.c"}},
		{"a.['b.c'].d", []string{"a", "b.c", "d"}},
		{"request\x00headers\x00x-foo.bar", []string{"request", "headers", "x-foo.bar"}},
	} {
		got, err := Parse(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Parse(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", `property path "": ends without a segment (write a segment after every dot)`},
		{"a.", `property path "a.": ends without a segment (write a segment after every dot)`},
		{"a..b", `property path "a..b": empty segment at byte 2`},
		{"a[b]", `property path "a[b]": a bracket at byte 1 must hold a quoted key, like ['envoy.filters.http.wasm']`},
		{"a['b", `property path "a['b": the bracket at byte 1 is not closed by ']`},
		{"a['b'", `property path "a['b'": the bracket at byte 1 is not closed by ']`},
		{"a['']", `property path "a['']": the bracket at byte 1 holds an empty key`},
		{"a['b']c", `property path "a['b']c": unexpected 'c' at byte 6 (segments are joined by dots)`},
		{"a\x00\x00b", `property path "a\\0\\0b": segment 1 is empty`},
	} {
		_, err := Parse(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q) error = %v; want %s", c.in, err, c.want)
		}
	}
}

// Format and Parse are inverses.
func TestFormatRoundTrip(t *testing.T) {
	for _, segs := range [][]string{
		{"xds", "node", "id"},
		{"xds", "route_metadata", "filter_metadata", "envoy.filters.http.wasm", "k"},
		{"a", "it's", "b"},
		{"a", "x[1]"},
	} {
		s := Format(segs)
		got, err := Parse(s)
		if err != nil || !slices.Equal(got, segs) {
			t.Errorf("Parse(Format(%q)) = Parse(%q) = %q, %v", segs, s, got, err)
		}
	}
	if got := Format([]string{"xds", "route_metadata", "filter_metadata", "envoy.filters.http.wasm"}); got != "xds.route_metadata.filter_metadata['envoy.filters.http.wasm']" {
		t.Errorf("Format = %s", got)
	}
	if Wire([]string{"a", "b"}) != "a\x00b" {
		t.Error("Wire")
	}
}
