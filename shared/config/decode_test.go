package config

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeStrictProblems(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []string
	}{
		{
			name: "unknown field names the known ones",
			json: `{"governance":{"limits":[{"id":"a","attach":{"nod":"org:acme"}}]}}`,
			want: []string{`governance.limits[0].attach: unknown field "nod" (known: node, level)`},
		},
		{
			name: "unknown top-level field",
			json: `{"governanc":{}}`,
			want: []string{`top level: unknown field "governanc" (known: governance)`},
		},
		{
			name: "every problem is collected",
			json: `{"governance":{"enabled":"yes","require_key":1,"limits":[{"amount":"5","amount_usd":"5 USD","burst":1.5,"posture":{"thresholds":[0.5,"x"]}}],"tenants":{"org":"acme"}}}`,
			want: []string{
				`governance.enabled: expected true or false, got string "yes"`,
				`governance.limits[0].amount: expected an integer, got string "5"`,
				`governance.limits[0].amount_usd: expected a dollar amount (a number such as 1000 or 0.25, or a string such as "0.000001"), got string "5 USD"`,
				`governance.limits[0].burst: expected an integer, got number 1.5`,
				`governance.limits[0].posture.thresholds[1]: expected a number, got string "x"`,
				`governance.require_key: expected true or false, got number 1`,
				`governance.tenants: expected a list, got an object`,
			},
		},
		{
			name: "map entries are named by key",
			json: `{"governance":{"tenants":[{"org":"acme","users":{"ml":["a",7]}}]}}`,
			want: []string{`governance.tenants[0].users["ml"][1]: expected a string, got number 7 (quote it to make it a string)`},
		},
		{
			name: "usd precision and range",
			json: `{"governance":{"limits":[{"amount_usd":0.0000000001},{"amount_usd":1e12}]}}`,
			want: []string{
				`governance.limits[0].amount_usd: 0.0000000001 has more than 9 decimal places (amounts are held on a grid of 1e-9); round it to at most 9`,
				`governance.limits[1].amount_usd: 1e12 is out of range (at most 9223372036.854775807)`,
			},
		},
		{
			name: "integer range",
			json: `{"governance":{"limits":[{"amount":99999999999999999999}]}}`,
			want: []string{`governance.limits[0].amount: 99999999999999999999 is out of range`},
		},
		{
			name: "object expected",
			json: `{"governance":{"limits":[{"attach":"org:acme"}]}}`,
			want: []string{`governance.limits[0].attach: expected an object, got string "org:acme"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeJSON([]byte(tc.json))
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("error %v (%T), want Problems", err, err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	f, err := DecodeJSON([]byte(`{"governance":{"enabled":true,"tenants":[{"org":"acme","teams":["ml"],"users":{"ml":["dev1"]}}],
		"limits":[{"id":"b","attach":{"level":"org"},"type":"budget_usd","amount_usd":1000.5,"period":"month","amount":3e2,
		"posture":{"mode":"shadow","thresholds":[0.5,1]},"override":{"allow":true,"max_amount_usd":5000}}],
		"shared_state":{"redis":{"addr":"r:6379","db":2}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g := f.Governance
	if g.Enabled == nil || !*g.Enabled || g.Keys != nil {
		t.Errorf("enabled/keys: %v %v", g.Enabled, g.Keys)
	}
	if len(g.Tenants) != 1 || g.Tenants[0].Users["ml"][0] != "dev1" {
		t.Errorf("tenants: %+v", g.Tenants)
	}
	l := g.Limits[0]
	if l.AmountUSD == nil || l.AmountUSD.Nanos != 1000_500_000_000 || l.Amount == nil || *l.Amount != 300 {
		t.Errorf("amounts: %+v %+v", l.AmountUSD, l.Amount)
	}
	if l.Posture.Mode != "shadow" || len(l.Posture.Thresholds) != 2 || l.Override.MaxAmountUSD.Nanos != 5000*NanosPerUSD {
		t.Errorf("posture/override: %+v %+v", l.Posture, l.Override)
	}
	if g.SharedState.Redis.DB != 2 {
		t.Errorf("redis: %+v", g.SharedState.Redis)
	}
}

func TestDecodeNullLeavesZero(t *testing.T) {
	f, err := DecodeJSON([]byte(`{"governance":{"enabled":null,"limits":[{"id":"a","period":null,"match":null}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Governance.Enabled != nil || f.Governance.Limits[0].Period != "" || f.Governance.Limits[0].Match != nil {
		t.Fatalf("%+v", f.Governance)
	}
}

func TestDecodeStrictTargets(t *testing.T) {
	var n int
	if err := DecodeStrict(map[string]any{}, n, "x"); err == nil {
		t.Fatal("non-pointer target accepted")
	}
	var x struct {
		A int            `json:"a"`
		B []int          `json:"b"`
		C map[string]any `json:"c"`
		D any            `json:"d"`
		E uint8          `json:"e"`
		F float64        `json:"f"`
		G string         `json:"-"`
		H string
	}
	tree := map[string]any{"a": 5, "b": []any{1.0, int64(2)}, "c": map[string]any{"k": "v"}, "d": true, "e": 300, "f": 2, "H": "h"}
	err := DecodeStrict(tree, &x, "p")
	if err == nil || err.Error() != "p.e: 300 is out of range (expected a non-negative integer)" {
		t.Fatalf("err = %v", err)
	}
	if x.A != 5 || x.B[1] != 2 || x.C["k"] != "v" || x.D != true || x.F != 2 || x.H != "h" {
		t.Fatalf("%+v", x)
	}
	if err := DecodeStrict(map[string]any{"G": "g"}, &x, "p"); err == nil || !strings.Contains(err.Error(), `unknown field "G" (known: a, b, c, d, e, f, H)`) {
		t.Fatalf("json:\"-\" field decoded: %v", err)
	}
}

func TestParseJSON(t *testing.T) {
	tests := []struct {
		in, err string
	}{
		{in: "", err: "json: empty document"},
		{in: "{\"a\":1,\n \"a\":2}", err: `json: line 2, column 2: duplicate field "a" in the top-level object`},
		{in: `{"g":{"l":[{"x":1,"x":2}]}}`, err: `json: line 1, column 19: duplicate field "x" in g.l[0]`},
		{in: "{\n\"a\": }", err: "json: line 2, column 6: invalid character '}' looking for beginning of value"},
		{in: `{"a":1} {}`, err: "json: line 1, column 9: unexpected data after the top-level value"},
		{in: `{"a":[1,2`, err: "json: line 1, column 10: unexpected end of document"},
	}
	for _, tc := range tests {
		_, err := ParseJSON([]byte(tc.in))
		if err == nil || err.Error() != tc.err {
			t.Errorf("ParseJSON(%q): %v, want %q", tc.in, err, tc.err)
		}
	}
	v, err := ParseJSON([]byte(`{"n":0.000001,"l":[true,null,"s"]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if m["n"].(interface{ String() string }).String() != "0.000001" {
		t.Errorf("number literal not kept: %v", m["n"])
	}
}

func TestDecodeUSDForms(t *testing.T) {
	tests := []struct {
		lit   string
		nanos int64
		err   string
	}{
		{lit: `0.000001`, nanos: 1000},
		{lit: `"0.000001"`, nanos: 1000},
		{lit: `1e-7`, nanos: 100},
		{lit: `1E-6`, nanos: 1000},
		{lit: `1e-07`, nanos: 100},
		{lit: `2.5E+3`, nanos: 2500 * NanosPerUSD},
		{lit: `"1e-7"`, nanos: 100},
		{lit: `"5000"`, nanos: 5000 * NanosPerUSD},
		{lit: `"-0"`, nanos: 0},
		{lit: `1e-10`, err: `1e-10 has more than 9 decimal places (amounts are held on a grid of 1e-9); round it to at most 9`},
		{lit: `"0.0000000001"`, err: `0.0000000001 has more than 9 decimal places (amounts are held on a grid of 1e-9); round it to at most 9`},
		{lit: `"1e12"`, err: `1e12 is out of range (at most 9223372036.854775807)`},
		{lit: `""`, err: `expected a dollar amount (a number such as 1000 or 0.25, or a string such as "0.000001"), got string ""`},
		{lit: `" 5"`, err: `expected a dollar amount (a number such as 1000 or 0.25, or a string such as "0.000001"), got string " 5"`},
		{lit: `"$5"`, err: `expected a dollar amount (a number such as 1000 or 0.25, or a string such as "0.000001"), got string "$5"`},
		{lit: `"+5"`, err: `expected a dollar amount (a number such as 1000 or 0.25, or a string such as "0.000001"), got string "+5"`},
		{lit: `".5"`, err: `expected a dollar amount (a number such as 1000 or 0.25, or a string such as "0.000001"), got string ".5"`},
		{lit: `"1,000"`, err: `expected a dollar amount (a number such as 1000 or 0.25, or a string such as "0.000001"), got string "1,000"`},
		{lit: `true`, err: `expected a dollar amount (a number such as 1000 or 0.25, or a string such as "0.000001"), got true`},
	}
	for _, tc := range tests {
		for _, field := range []string{"amount_usd", "max_amount_usd"} {
			doc := `{"governance":{"limits":[{"amount_usd":` + tc.lit + `}]}}`
			path := "governance.limits[0].amount_usd"
			if field == "max_amount_usd" {
				doc = `{"governance":{"limits":[{"override":{"max_amount_usd":` + tc.lit + `}}]}}`
				path = "governance.limits[0].override.max_amount_usd"
			}
			f, err := DecodeJSON([]byte(doc))
			if tc.err != "" {
				if want := path + ": " + tc.err; err == nil || err.Error() != want {
					t.Errorf("%s %s: %v, want %q", field, tc.lit, err, want)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %s: %v", field, tc.lit, err)
				continue
			}
			l := f.Governance.Limits[0]
			got := l.AmountUSD
			if field == "max_amount_usd" {
				got = l.Override.MaxAmountUSD
			}
			if got == nil || got.Nanos != tc.nanos {
				t.Errorf("%s %s: decoded %v, want %d nanodollars", field, tc.lit, got, tc.nanos)
			}
		}
	}
}
