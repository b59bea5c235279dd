package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// USD's JSON methods serve native code that uses encoding/json; the guards
// live here so that the package itself does not link it.
var (
	_ json.Marshaler   = USD{}
	_ json.Unmarshaler = (*USD)(nil)
)

func TestParseUSD(t *testing.T) {
	tests := []struct {
		in    string
		nanos int64
		err   string
	}{
		{in: "1000", nanos: 1000_000_000_000},
		{in: "0.000001", nanos: 1000},
		{in: "12.5", nanos: 12_500_000_000},
		{in: "0.1", nanos: 100_000_000},
		{in: "0.000000001", nanos: 1},
		{in: "1.5000000000", nanos: 1_500_000_000},
		{in: "2.5e3", nanos: 2_500_000_000_000},
		{in: "1E-9", nanos: 1},
		{in: "-3", nanos: -3_000_000_000},
		{in: "0", nanos: 0},
		{in: "0e-5000", nanos: 0},
		{in: "9223372036.854775807", nanos: 9223372036854775807},
		{in: "0.0000000001", err: "0.0000000001 has more than 9 decimal places (amounts are held on a grid of 1e-9); round it to at most 9"},
		{in: "1e-10", err: "1e-10 has more than 9 decimal places"},
		{in: "9223372036.854775808", err: "9223372036.854775808 is out of range (at most 9223372036.854775807)"},
		{in: "1e20", err: "1e20 is out of range"},
		{in: "1e5000", err: "1e5000 is out of range"},
		{in: "abc", err: `"abc" is not a number`},
		{in: "1.2.3", err: `"1.2.3" is not a number`},
		{in: "1e", err: `"1e" is not a number`},
	}
	for _, tc := range tests {
		got, err := ParseUSD(tc.in)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("ParseUSD(%q): error %v, want prefix %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got.Nanos != tc.nanos {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", tc.in, got.Nanos, err, tc.nanos)
		}
	}
}

func TestUSDStringRoundTrip(t *testing.T) {
	for _, n := range []int64{0, 1, 1000, 1_000_000_000, 12_500_000_000, -7, 9223372036854775807, -9223372036854775808} {
		u := USD{Nanos: n}
		back, err := ParseUSD(u.String())
		if n == -9223372036854775808 {
			continue // its magnitude is one past the parser's range
		}
		if err != nil || back != u {
			t.Errorf("%d: String %q parsed back as %d, %v", n, u.String(), back.Nanos, err)
		}
	}
	if got := (USD{Nanos: 1000}).String(); got != "0.000001" {
		t.Errorf("String = %q", got)
	}
}

func TestUSDJSON(t *testing.T) {
	var v struct {
		A USD  `json:"a"`
		B *USD `json:"b"`
	}
	if err := json.Unmarshal([]byte(`{"a":0.000001,"b":5000}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A.Nanos != 1000 || v.B.Nanos != 5000_000_000_000 {
		t.Fatalf("decoded %d %d", v.A.Nanos, v.B.Nanos)
	}
	out, err := json.Marshal(v)
	if err != nil || string(out) != `{"a":0.000001,"b":5000}` {
		t.Fatalf("Marshal = %s, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"a":"1"}`), &v); err == nil {
		t.Fatal("a string amount decoded")
	}
	err = json.Unmarshal([]byte(`{"a":"1e400"}`), &v)
	if want := `config: usd amount: "1e400" is a string; write the amount as a JSON number of dollars, e.g. 12.5`; err == nil || err.Error() != want {
		t.Errorf("a string amount: %v, want %s", err, want)
	}
}
