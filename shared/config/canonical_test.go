package config

import (
	"encoding/json"
	"math"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{name: "absent block", v: (*Governance)(nil), want: `null`},
		{name: "empty block", v: &Governance{}, want: `{"enabled":null,"require_key":false,"keys":null,"tenants":null,"limits":null,"shared_state":null}`},
		{name: "nil and empty lists differ", v: &Tenant{Org: "a", Teams: []string{}}, want: `{"org":"a","teams":[],"users":null}`},
		{name: "map keys sorted", v: map[string][]string{"b": {"x"}, "a": nil, "B": {}}, want: `{"B":[],"a":null,"b":["x"]}`},
		{name: "usd exact", v: []USD{{Nanos: 1000}, {Nanos: 5000 * NanosPerUSD}, {Nanos: math.MaxInt64}, {Nanos: -1}}, want: `[0.000001,5000,9223372036.854775807,-0.000000001]`},
		{name: "floats as encoding/json writes them", v: []float64{0, 0.5, 1, 1e-7, 1e-6, 123456.789, 1e20, 1e21, 5e-324, -2.5e-9}, want: `[0,0.5,1,1e-7,0.000001,123456.789,100000000000000000000,1e+21,5e-324,-2.5e-9]`},
		{name: "strings escaped as encoding/json escapes them", v: "a\"\\/<>&\b\f\n\r\t\x00\x1f\x7f é\u2028\u2029\xff", want: `"a\"\\/\u003c\u003e\u0026\b\f\n\r\t\u0000\u001f` + "\x7f é" + `\u2028\u2029\ufffd"`},
	}
	for _, tc := range tests {
		got, err := CanonicalJSON(tc.v)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: CanonicalJSON = %s, %v\nwant %s", tc.name, got, err, tc.want)
		}
		marshalled, err := json.Marshal(tc.v)
		if err != nil || string(marshalled) != tc.want {
			t.Errorf("%s: encoding/json writes %s, %v; the canonical encoding has drifted from it", tc.name, marshalled, err)
		}
	}
}

func TestCanonicalJSONEverythingSet(t *testing.T) {
	g := &Governance{
		Enabled:    ptr(true),
		RequireKey: true,
		Keys:       &Keys{DiscloseLimits: ptr(false)},
		Tenants:    []Tenant{{Org: "acme", Teams: []string{"ml", "search"}, Users: map[string][]string{"search": {"s1"}, "ml": {"dev1", "dev2"}}}},
		Limits: []Limit{{
			ID: "a", Attach: Attach{Level: "org"}, Type: "budget_usd", AmountUSD: &USD{Nanos: 1}, Period: "month",
			Match:    &Match{Model: "gpt-<4>*", Provider: "openai", Endpoint: "/v1/chat/completions"},
			Posture:  &Posture{Mode: "shadow", Enforce: "soft", Fail: "closed", Thresholds: []float64{0.5, 0.8, 1}},
			Override: &Override{Allow: true, MaxAmountUSD: &USD{Nanos: 5000 * NanosPerUSD}},
		}, {
			ID: "b", Attach: Attach{Node: "__global"}, Type: "rpm", Amount: ptr(int64(120)), Period: "1m", Burst: ptr(int64(10)),
			Algorithm: "sliding_window", Store: "redis",
			Override: &Override{MaxAmount: ptr(int64(7))},
		}, {
			ID: "c", Attach: Attach{Level: "user"}, Type: "quota_tokens", Amount: ptr(int64(2000)), Period: "30d",
			Match: &Match{Customer: "*", Tag: "batch"}, Fit: true, MinOutput: ptr(int64(64)), Metric: "output",
			Timezone: "Europe/Berlin", Fallback: &Fallback{Model: "gpt-4o-mini"}, MaxDistinct: ptr(int64(100)),
		}},
		Attributes:  &Attributes{CustomerHeader: "X-Customer", CustomerFields: ptr([]string{}), TagsFields: []string{"metadata.tags"}},
		Timezone:    "America/New_York",
		SharedState: &SharedState{Redis: &Redis{Addr: "r:6379", Username: "u", PasswordEnv: "P", DB: 2, KeyPrefix: "tt"}},
	}
	got, err := CanonicalJSON(g)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("CanonicalJSON:\n%s\nencoding/json:\n%s", got, want)
	}
}

func TestCanonicalJSONRefuses(t *testing.T) {
	tests := []struct {
		v   any
		err string
	}{
		{v: &Posture{Thresholds: []float64{math.NaN()}}, err: "config: canonical encoding: unsupported value NaN"},
		{v: []float32{float32(math.Inf(1))}, err: "config: canonical encoding: unsupported value +Inf"},
		{v: map[int]string{1: "a"}, err: "config: canonical encoding: unsupported map key type int"},
		{v: [2]int{}, err: "config: canonical encoding: unsupported type [2]int"},
		{v: struct{ F func() }{}, err: "config: canonical encoding: unsupported type func()"},
	}
	for _, tc := range tests {
		if _, err := CanonicalJSON(tc.v); err == nil || err.Error() != tc.err {
			t.Errorf("CanonicalJSON(%T): %v, want %q", tc.v, err, tc.err)
		}
	}
}

// FuzzCanonicalJSON: for every document that decodes, the canonical
// encoding is the bytes encoding/json's Marshal writes.
func FuzzCanonicalJSON(f *testing.F) {
	f.Add([]byte(`{"governance":{"enabled":true,"tenants":[{"org":"a<&>","teams":["t"],"users":{"t":["u"],"s":[]}}],
		"limits":[{"id":"x","attach":{"level":"user"},"type":"budget_usd","amount_usd":"1e-7","period":"day",
		"posture":{"thresholds":[1e-7,0.25,1]},"override":{"allow":true,"max_amount_usd":5e3}}]}}`))
	f.Add([]byte(`{"governance":{"limits":[{"id":"\u2028\ud800","amount":1e3,"burst":-0}],"shared_state":{"redis":{"db":7}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := DecodeJSON(b)
		if err != nil {
			return
		}
		got, gerr := CanonicalJSON(file)
		want, werr := json.Marshal(file)
		if (gerr == nil) != (werr == nil) || string(got) != string(want) {
			t.Fatalf("CanonicalJSON:\n%s (%v)\nencoding/json:\n%s (%v)", got, gerr, want, werr)
		}
	})
}
