package govern_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/govern"
)

// show renders instances as "limit@node amount" for comparison.
func show(insts []govern.Instance) string {
	var parts []string
	for _, in := range insts {
		s := fmt.Sprintf("%s@%s=%d", in.Limit.ID, in.Node, in.Amount)
		if in.Overridden {
			s += "(override)"
		}
		if in.Unresolved {
			s += "(per model)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

const usd = 1_000_000_000

// TestResolveSeed004Walk follows seed 004's walk: four caps on dev1's
// chain with acme_month lowered to $50. The rate caps settle at gate 1,
// deepest first; at gate 2 ml_daily (depth 2) comes before the tighter
// acme_month (depth 1), so it is the one a 429 names when both are over.
func TestResolveSeed004Walk(t *testing.T) {
	a := mustArm(t, seed004Walk, govern.Runtime{})
	chain := govern.Chain(dev1, kid)
	if got := strings.Join(chain, " "); got != "org:acme/team:ml/user:dev1/key:vk_FEKZdMs2UQRi org:acme/team:ml/user:dev1 org:acme/team:ml org:acme __global" {
		t.Fatalf("chain %s", got)
	}
	d := govern.Dims{Model: "gpt-4o", Provider: "openai", Endpoint: "/v1/chat/completions"}
	tests := []struct {
		name  string
		chain []string
		gate  govern.Gate
		want  string
	}{
		{"gate1", chain, govern.Gate1, "user_rpm@org:acme/team:ml/user:dev1=120 global_rpm@__global=5000"},
		{"gate2", chain, govern.Gate2, fmt.Sprintf("ml_daily@org:acme/team:ml=%d acme_month@org:acme=%d", 200*usd, 50*usd)},
		{"anonymous gate1", govern.Chain("", ""), govern.Gate1, "global_rpm@__global=5000"},
		{"anonymous gate2", govern.Chain("", ""), govern.Gate2, ""},
		{"dev2 is another user's cell", govern.Chain("org:acme/team:ml/user:dev2", kid), govern.Gate1, "user_rpm@org:acme/team:ml/user:dev2=120 global_rpm@__global=5000"},
		{"search is out of ml_daily's chain", govern.Chain("org:acme/team:search", kid), govern.Gate2, fmt.Sprintf("acme_month@org:acme=%d", 50*usd)},
		{"a team-owned key has no user cell", govern.Chain("org:acme/team:ml", kid), govern.Gate1, "global_rpm@__global=5000"},
		{"an undeclared owner resolves against nodes that exist", govern.Chain("org:acme/team:ml/user:dev9", kid), govern.Gate1, "global_rpm@__global=5000"},
		{"an undeclared owner still meets its declared prefixes", govern.Chain("org:acme/team:ml/user:dev9", kid), govern.Gate2, fmt.Sprintf("ml_daily@org:acme/team:ml=%d acme_month@org:acme=%d", 200*usd, 50*usd)},
		{"another org", govern.Chain("org:other", kid), govern.Gate2, ""},
		{"a chain without __global still meets __global", []string{dev1}, govern.Gate1, "user_rpm@org:acme/team:ml/user:dev1=120 global_rpm@__global=5000"},
		{"no gate", chain, govern.Gate(9), ""},
	}
	for _, tc := range tests {
		got := show(a.Resolve(tc.chain, d, tc.gate, nil))
		if got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.name, got, tc.want)
		}
	}
	all := show(a.ResolveAll(chain, govern.Dims{}, nil))
	if want := fmt.Sprintf("user_rpm@org:acme/team:ml/user:dev1=120 ml_daily@org:acme/team:ml=%d acme_month@org:acme=%d global_rpm@__global=5000", 200*usd, 50*usd); all != want {
		t.Errorf("ResolveAll:\n got  %s\n want %s", all, want)
	}
}

// TestResolveOrder checks step 6 where depth ties: limit id, then node id.
func TestResolveOrder(t *testing.T) {
	a := mustArm(t, tenancy+`  limits:
    - { id: b_team, attach: { level: team }, type: quota_requests, amount: 1, period: day }
    - { id: a_team, attach: { level: team }, type: quota_requests, amount: 2, period: day }
    - { id: c_pin, attach: { node: "org:acme/team:ml" }, type: quota_requests, amount: 3, period: day }
    - { id: a_org, attach: { level: org }, type: quota_requests, amount: 4, period: day }
    - { id: z_user, attach: { level: user }, type: quota_requests, amount: 5, period: day }
`, govern.Runtime{})
	// A hand-built chain with two nodes at one depth shows the node tiebreak.
	chain := []string{"org:acme/team:search", dev1, "org:acme/team:ml", "org:acme", govern.Global}
	got := show(a.Resolve(chain, govern.Dims{}, govern.Gate2, nil))
	want := "z_user@org:acme/team:ml/user:dev1=5 a_team@org:acme/team:ml=2 a_team@org:acme/team:search=2 b_team@org:acme/team:ml=1 b_team@org:acme/team:search=1 c_pin@org:acme/team:ml=3 a_org@org:acme=4"
	if got != want {
		t.Errorf("order:\n got  %s\n want %s", got, want)
	}
}

// TestResolveMatch covers step 2: a limit whose match the request does not
// satisfy yields no instance; model patterns follow path.Match.
func TestResolveMatch(t *testing.T) {
	a := mustArm(t, tenancy+`  limits:
    - { id: gpt_tpm, attach: { level: team }, type: tpm, amount: 20000, period: 1m, match: { model: "gpt-*" } }
    - { id: llama, attach: { level: org }, type: quota_tokens, amount: 9, period: day, match: { model: "llama*" } }
    - { id: fw_llama, attach: { level: org }, type: quota_tokens, amount: 9, period: day, match: { model: "accounts/fireworks/models/llama*" } }
    - { id: openai_only, attach: { level: org }, type: quota_requests, amount: 9, period: day, match: { provider: openai } }
    - { id: chat_rpm, attach: { level: user }, type: rpm, amount: 9, period: 1m, match: { endpoint: /v1/chat/completions } }
    - { id: exact, attach: { level: org }, type: budget_usd, amount_usd: 1, period: day, match: { model: gpt-4o, endpoint: /v1/chat/completions } }
`, govern.Runtime{})
	chain := govern.Chain(dev1, kid)
	tests := []struct {
		d    govern.Dims
		gate govern.Gate
		want string
	}{
		{govern.Dims{Model: "gpt-4o", Provider: "openai", Endpoint: "/v1/chat/completions"}, govern.Gate2, "gpt_tpm@org:acme/team:ml=20000 exact@org:acme=1000000000 openai_only@org:acme=9"},
		{govern.Dims{Model: "gpt-4o-mini", Provider: "azure", Endpoint: "/v1/responses"}, govern.Gate2, "gpt_tpm@org:acme/team:ml=20000"},
		{govern.Dims{Model: "claude-3-5-sonnet", Provider: "anthropic"}, govern.Gate2, ""},
		{govern.Dims{Model: "accounts/fireworks/models/llama-v3"}, govern.Gate2, "fw_llama@org:acme=9"},
		{govern.Dims{Model: "llama-v3"}, govern.Gate2, "llama@org:acme=9"},
		{govern.Dims{Endpoint: "/v1/chat/completions"}, govern.Gate1, "chat_rpm@org:acme/team:ml/user:dev1=9"},
		{govern.Dims{Endpoint: "/v1/embeddings"}, govern.Gate1, ""},
	}
	for i, tc := range tests {
		if got := show(a.Resolve(chain, tc.d, tc.gate, nil)); got != tc.want {
			t.Errorf("step %d (%+v):\n got  %s\n want %s", i, tc.d, got, tc.want)
		}
	}
	// /tt/v1/me: unknown dims match; a per-model counter is unresolved.
	got := show(a.ResolveAll(chain, govern.Dims{}, nil))
	want := "chat_rpm@org:acme/team:ml/user:dev1=9 gpt_tpm@org:acme/team:ml=20000(per model) exact@org:acme=1000000000 fw_llama@org:acme=9(per model) llama@org:acme=9(per model) openai_only@org:acme=9"
	if got != want {
		t.Errorf("ResolveAll:\n got  %s\n want %s", got, want)
	}
	for _, in := range a.ResolveAll(chain, govern.Dims{}, nil) {
		if in.Unresolved != (in.ID == "") {
			t.Errorf("%s: Unresolved %t with ID %q", in.Limit.ID, in.Unresolved, in.ID)
		}
	}
	// A given dim must still match.
	if got := show(a.ResolveAll(chain, govern.Dims{Model: "gpt-4o"}, nil)); !strings.Contains(got, "gpt_tpm@org:acme/team:ml=20000 ") || strings.Contains(got, "llama") {
		t.Errorf("ResolveAll with a model: %s", got)
	}
}

func TestModeOffIsNeverArmed(t *testing.T) {
	a := mustArm(t, tenancy+`  limits:
    - { id: off_rpm, attach: { node: __global }, type: rpm, amount: 1, period: 1s, posture: { mode: "off" } }
    - { id: shadow_rpm, attach: { node: __global }, type: rpm, amount: 1, period: 1s, posture: { mode: shadow } }
`, govern.Runtime{})
	if got := show(a.ResolveAll(govern.Chain("", ""), govern.Dims{}, nil)); got != "shadow_rpm@__global=1" {
		t.Errorf("got %s", got)
	}
}

// TestResolveReusesBuffer checks Resolve appends to buf[:0].
func TestResolveReusesBuffer(t *testing.T) {
	a := mustArm(t, seed004Walk, govern.Runtime{})
	buf := make([]govern.Instance, 3, 8)
	out := a.Resolve(govern.Chain("", ""), govern.Dims{}, govern.Gate1, buf)
	if len(out) != 1 || &out[0] != &buf[0] {
		t.Fatalf("Resolve did not reuse buf: len %d", len(out))
	}
}

// TestResolveAllocs holds the per-request path to zero allocations once the
// buffer has capacity, including a glob-model limit after its first
// request of a model.
func TestResolveAllocs(t *testing.T) {
	a := mustArm(t, sixLimits, govern.Runtime{})
	chain := govern.Chain(dev1, kid)
	d := govern.Dims{Model: "gpt-4o", Provider: "openai", Endpoint: "/v1/chat/completions"}
	buf := make([]govern.Instance, 0, 16)
	a.Resolve(chain, d, govern.Gate2, buf) // first request of the model builds its identity
	for _, g := range []govern.Gate{govern.Gate1, govern.Gate2} {
		n := testing.AllocsPerRun(100, func() { buf = a.Resolve(chain, d, g, buf) })
		if n != 0 {
			t.Errorf("%s: %v allocations per Resolve", g, n)
		}
	}
	n := testing.AllocsPerRun(100, func() { buf = a.ResolveAll(chain, govern.Dims{}, buf) })
	if n != 0 {
		t.Errorf("ResolveAll: %v allocations", n)
	}
}

func BenchmarkResolve(b *testing.B) {
	a := mustArm(b, sixLimits, govern.Runtime{})
	chain := govern.Chain(dev1, kid)
	d := govern.Dims{Model: "gpt-4o", Provider: "openai", Endpoint: "/v1/chat/completions"}
	for _, g := range []govern.Gate{govern.Gate1, govern.Gate2} {
		b.Run(g.String(), func(b *testing.B) {
			buf := make([]govern.Instance, 0, 16)
			b.ReportAllocs()
			for b.Loop() {
				buf = a.Resolve(chain, d, g, buf)
			}
			b.ReportMetric(float64(len(buf)), "instances/op")
		})
	}
}
