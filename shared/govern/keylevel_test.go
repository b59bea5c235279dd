package govern_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/govern"
)

const keyLevel = tenancy + `  limits:
    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 10, period: 1m }
    - { id: key_day, attach: { level: key }, type: budget_usd, amount_usd: 5, period: day, override: { allow: true, max_amount_usd: 50 } }
    - { id: key_gpt, attach: { level: key }, type: quota_tokens, amount: 1000, period: month, match: { model: "gpt-*" } }
    - { id: user_rpm, attach: { level: user }, type: rpm, amount: 100, period: 1m }
`

// TestKeyLevel: a key-level template has one instance per virtual key, at
// the key leaf of its chain (the deepest node, so it is evaluated first),
// with a counter of its own: two keys of one user never share it, and a
// request without a key has none. A key's own override of a spend or
// quota template replaces its amount and no other key's.
func TestKeyLevel(t *testing.T) {
	const other = "vk_0therKey00000"
	leaf, otherLeaf := govern.KeyLeaf(dev1, kid), govern.KeyLeaf(dev1, other)
	a := mustArm(t, keyLevel, govern.Runtime{Overrides: []govern.Override{{LimitID: "key_day", Node: leaf, Amount: 20 * usd}}})
	d := govern.Dims{Model: "gpt-4o", Provider: "openai", Endpoint: "/v1/chat/completions"}
	for _, tc := range []struct {
		name  string
		chain []string
		gate  govern.Gate
		want  string
	}{
		{"gate1", govern.Chain(dev1, kid), govern.Gate1, "key_rpm@" + leaf + "=10 user_rpm@" + dev1 + "=100"},
		{"gate2 with the override", govern.Chain(dev1, kid), govern.Gate2, fmt.Sprintf("key_day@%s=%d(override) key_gpt@%s=1000", leaf, 20*usd, leaf)},
		{"another key of the same user", govern.Chain(dev1, other), govern.Gate2, fmt.Sprintf("key_day@%s=%d key_gpt@%s=1000", otherLeaf, 5*usd, otherLeaf)},
		{"anonymous", govern.Chain("", ""), govern.Gate1, ""},
		{"an owner outside the tree still has its key's cell", govern.Chain("org:zzz", other), govern.Gate1, "key_rpm@org:zzz/key:" + other + "=10"},
	} {
		if got := show(a.Resolve(tc.chain, d, tc.gate, nil)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
	ids := map[string]bool{}
	for _, k := range []string{kid, other} {
		for _, in := range a.Resolve(govern.Chain(dev1, k), d, govern.Gate2, nil) {
			if ids[in.ID] || !strings.Contains(in.ID, "/key:"+k+"|") {
				t.Errorf("identity %s: shared, or not the key's", in.ID)
			}
			ids[in.ID] = true
		}
	}
	// Per model under a glob: the same key, two models, two counters.
	i1 := a.Resolve(govern.Chain(dev1, kid), govern.Dims{Model: "gpt-4o"}, govern.Gate2, nil)
	i2 := a.Resolve(govern.Chain(dev1, kid), govern.Dims{Model: "gpt-4o-mini"}, govern.Gate2, nil)
	if i1[1].ID == i2[1].ID || !strings.Contains(i2[1].ID, "model=gpt-4o-mini") {
		t.Errorf("per-model identities %s and %s", i1[1].ID, i2[1].ID)
	}
	// /tt/v1/me lists them, the glob one unresolved without a model.
	if got := show(a.ResolveAll(govern.Chain(dev1, kid), govern.Dims{}, nil)); got != fmt.Sprintf("key_day@%s=%d(override) key_gpt@%s=1000(per model) key_rpm@%s=10 user_rpm@%s=100", leaf, 20*usd, leaf, leaf, dev1) {
		t.Errorf("ResolveAll: %s", got)
	}
}

// TestKeyLevelOverrides: an override of a key-level template names a key's
// node; anything else is dropped with its reason.
func TestKeyLevelOverrides(t *testing.T) {
	_, probs := mustPlan(t, keyLevel).Arm(govern.Runtime{Overrides: []govern.Override{
		{LimitID: "key_day", Node: dev1, Amount: usd},
		{LimitID: "key_day", Node: dev1 + "/key:vk_short", Amount: usd},
		{LimitID: "key_day", Node: govern.KeyLeaf(dev1, kid), Amount: 51 * usd},
		{LimitID: "key_rpm", Node: govern.KeyLeaf(dev1, kid), Amount: 5},
	}})
	want := []string{
		`runtime.overrides[0]: limit "key_day" at node "org:acme/team:ml/user:dev1": "org:acme/team:ml/user:dev1" is not a key's node (write <owner node>/key:<kid>, e.g. org:acme/team:ml/user:dev1/key:vk_FEKZdMs2UQRi); the override is dropped`,
		`runtime.overrides[1]: limit "key_day" at node "org:acme/team:ml/user:dev1/key:vk_short": key node "org:acme/team:ml/user:dev1/key:vk_short": "vk_short" is not a kid (vk_ followed by 12 letters and digits); the override is dropped`,
		`runtime.overrides[2]: limit "key_day" at node "org:acme/team:ml/user:dev1/key:vk_FEKZdMs2UQRi": amount_usd 51 is above the ceiling override.max_amount_usd 50; the override is dropped`,
	}
	if len(probs) != 4 {
		t.Fatalf("%d problems: %v", len(probs), govern.Problems(probs))
	}
	for i, w := range want {
		if got := probs[i].String(); got != w {
			t.Errorf("problem %d:\n got %s\nwant %s", i, got, w)
		}
	}
	if !strings.Contains(probs[3].String(), `limit type "rpm" does not support per-node overrides`) {
		t.Errorf("problem 3: %s", probs[3])
	}
}

// TestKeyLevelAllocs holds the per-request path of a key-level limit to
// zero allocations once its key's identity is cached.
func TestKeyLevelAllocs(t *testing.T) {
	a := mustArm(t, keyLevel, govern.Runtime{})
	chain := govern.Chain(dev1, kid)
	d := govern.Dims{Model: "gpt-4o", Provider: "openai", Endpoint: "/v1/chat/completions"}
	buf := make([]govern.Instance, 0, 16)
	for _, g := range []govern.Gate{govern.Gate1, govern.Gate2} {
		a.Resolve(chain, d, g, buf) // the key's first request builds its identities
		if n := testing.AllocsPerRun(100, func() { buf = a.Resolve(chain, d, g, buf) }); n != 0 {
			t.Errorf("%s: %v allocations per Resolve", g, n)
		}
	}
}

// BenchmarkResolveKeyLevel is BenchmarkResolve's gate 1 with a key-level
// rpm beside the user rpm, against the same chain without it (the plan
// of user_rpm alone): what a per-key limit adds to a request.
func BenchmarkResolveKeyLevel(b *testing.B) {
	userOnly := tenancy + `  limits:
    - { id: user_rpm, attach: { level: user }, type: rpm, amount: 100, period: 1m }
`
	withKey := userOnly + `    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 10, period: 1m }
`
	chain := govern.Chain(dev1, kid)
	d := govern.Dims{Endpoint: "/v1/chat/completions"}
	for _, c := range []struct{ name, yaml string }{{"user_only", userOnly}, {"user_and_key", withKey}} {
		a := mustArm(b, c.yaml, govern.Runtime{})
		b.Run(c.name, func(b *testing.B) {
			buf := make([]govern.Instance, 0, 16)
			b.ReportAllocs()
			for b.Loop() {
				buf = a.Resolve(chain, d, govern.Gate1, buf)
			}
			b.ReportMetric(float64(len(buf)), "instances/op")
		})
	}
}
