package govern_test

import (
	"testing"
	"testing/quick"

	"github.com/tokentriage/tokentriage/shared/govern"
)

func limitIdentity(t *testing.T, limitYAML, id, node string, d govern.Dims) string {
	t.Helper()
	p := mustPlan(t, tenancy+"  limits:\n"+limitYAML)
	return govern.Identity(p.Limit(id), node, d)
}

// TestIdentityStability checks seed 004's rules: an amount edit keeps the
// counter; a period or algorithm change rotates it.
func TestIdentityStability(t *testing.T) {
	const node = "org:acme/team:ml"
	id := func(limit string) string {
		return limitIdentity(t, "    - { id: team_rpm, attach: { level: team }, type: rpm, "+limit+" }\n", "team_rpm", node, govern.Dims{})
	}
	orig := id("amount: 300, period: 1m")
	if orig != "team_rpm|rpm|org:acme/team:ml||1m0s|gcra" {
		t.Fatalf("identity %q", orig)
	}
	tests := []struct {
		name, limit string
		same        bool
	}{
		{"amount edit", "amount: 600, period: 1m", true},
		{"burst edit", "amount: 300, period: 1m, burst: 10", true},
		{"posture edit", "amount: 300, period: 1m, posture: { mode: shadow, enforce: soft }", true},
		{"60s is 1m", "amount: 300, period: 60s", true},
		{"explicit default algorithm", "amount: 300, period: 1m, algorithm: gcra", true},
		{"period change", "amount: 300, period: 1h", false},
		{"algorithm change", "amount: 300, period: 1m, algorithm: sliding_window", false},
		{"match added", "amount: 300, period: 1m, match: { endpoint: /v1/chat/completions }", false},
	}
	for _, tc := range tests {
		if got := id(tc.limit); (got == orig) != tc.same {
			t.Errorf("%s: identity %q vs %q, want same=%t", tc.name, got, orig, tc.same)
		}
	}
}

// TestIdentityPerModel: match.model "gpt-*" keeps one counter per requested
// model, so gpt-4o and gpt-4o-mini are separate cells; dims the limit does
// not constrain are not part of the identity.
func TestIdentityPerModel(t *testing.T) {
	a := mustArm(t, sixLimits, govern.Runtime{})
	chain := govern.Chain(dev1, kid)
	ids := map[string]string{}
	for _, m := range []string{"gpt-4o", "gpt-4o-mini"} {
		for _, p := range []string{"openai", "azure"} {
			for _, in := range a.Resolve(chain, govern.Dims{Model: m, Provider: p, Endpoint: "/v1/chat/completions"}, govern.Gate2, nil) {
				if in.Limit.ID == "team_tpm" {
					ids[m+"/"+p] = in.ID
				}
				if want := govern.Identity(in.Limit, in.Node, govern.Dims{Model: m, Provider: p, Endpoint: "/v1/chat/completions"}); in.ID != want {
					t.Errorf("%s: Resolve ID %q, Identity %q", in.Limit.ID, in.ID, want)
				}
			}
		}
	}
	if ids["gpt-4o/openai"] == ids["gpt-4o-mini/openai"] {
		t.Errorf("gpt-4o and gpt-4o-mini share a cell: %q", ids["gpt-4o/openai"])
	}
	if ids["gpt-4o/openai"] != ids["gpt-4o/azure"] {
		t.Errorf("an unconstrained dim split the cell: %q vs %q", ids["gpt-4o/openai"], ids["gpt-4o/azure"])
	}
	if ids["gpt-4o/openai"] != "team_tpm|tpm|org:acme/team:ml|model=gpt-4o|1m0s|gcra" {
		t.Errorf("identity %q", ids["gpt-4o/openai"])
	}
}

// TestIdentityInjective: distinct (node, dims) never share an identity,
// however the values are spelt.
func TestIdentityInjective(t *testing.T) {
	p := mustPlan(t, tenancy+"  limits:\n    - { id: l, attach: { node: __global }, type: quota_requests, amount: 1, period: day, match: { model: \"*\", provider: p, endpoint: /e } }\n")
	l := p.Limit("l")
	alphabet := []byte("a|,=%2C7")
	str := func(seed []byte) string {
		b := make([]byte, len(seed))
		for i, c := range seed {
			b[i] = alphabet[int(c)%len(alphabet)]
		}
		return string(b)
	}
	f := func(n1, m1, p1, e1, n2, m2, p2, e2 []byte) bool {
		a := [4]string{str(n1), str(m1), str(p1), str(e1)}
		b := [4]string{str(n2), str(m2), str(p2), str(e2)}
		ia := govern.Identity(l, a[0], govern.Dims{Model: a[1], Provider: a[2], Endpoint: a[3]})
		ib := govern.Identity(l, b[0], govern.Dims{Model: b[1], Provider: b[2], Endpoint: b[3]})
		return (ia == ib) == (a == b)
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 20000}); err != nil {
		t.Error(err)
	}
	if got := govern.Identity(l, "n|x", govern.Dims{Model: "a,b=c%"}); got != "l|quota_requests|n%7Cx|model=a%2Cb%3Dc%25,provider=,endpoint=|day|" {
		t.Errorf("escaped identity %q", got)
	}
}

func TestAppendIdentity(t *testing.T) {
	p := mustPlan(t, sixLimits)
	l := p.Limit("team_tpm")
	d := govern.Dims{Model: "gpt-4o"}
	buf := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() { buf = govern.AppendIdentity(buf[:0], l, "org:acme/team:ml", d) }); n != 0 {
		t.Errorf("AppendIdentity allocates %v times", n)
	}
	if string(buf) != govern.Identity(l, "org:acme/team:ml", d) {
		t.Errorf("AppendIdentity %q != Identity", buf)
	}
}
