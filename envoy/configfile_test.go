package envoy_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// loadConfigYAML checks a tokentriage config file, the YAML the accountant
// reads with -c, the way `tokentriage validate` does: strict decode, the
// full compile, then arming with an empty runtime plane.
func loadConfigYAML(src []byte) (*govern.Armed, error) {
	f, err := configfile.Parse("tokentriage.yaml", src)
	if err != nil {
		return nil, err
	}
	plan, err := govern.Compile(f.Governance)
	if err != nil {
		return nil, err
	}
	armed, probs := plan.Arm(govern.Runtime{})
	if len(probs) > 0 {
		return nil, govern.Problems(probs)
	}
	return armed, nil
}

func checkConfigYAML(src []byte) error {
	_, err := loadConfigYAML(src)
	return err
}

// The node `tokentriage dev` mints its demo key for, and the most requests
// a short shell loop from that key should need to meet a limit.
const (
	demoOwner      = "org:acme/team:ml/user:dev1"
	demoLoopLength = 5
)

// TestExampleConfig checks examples/tokentriage.yaml, the config `make run`
// serves and the README's Envoy walk-through gives the accountant: it
// passes validate, uses every limit type, and its demo key meets an
// enforcing rpm limit at the first gate within a short loop, the one limit
// of its chain that small.
func TestExampleConfig(t *testing.T) {
	armed, err := loadConfigYAML(readFile(t, filepath.Join("..", "examples", "tokentriage.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	chain := govern.Chain(demoOwner, "vk_DemoKey00001")
	all := armed.ResolveAll(chain, govern.Dims{Model: "gpt-4o-mini", Provider: "openai", Endpoint: "/v1/chat/completions"}, nil)
	types := map[govern.Type]bool{}
	for _, in := range all {
		types[in.Limit.Type] = true
	}
	for _, ty := range []govern.Type{govern.BudgetUSD, govern.QuotaTokens, govern.QuotaRequests, govern.RPM, govern.TPM, govern.Concurrency} {
		if !types[ty] {
			t.Errorf("no %s limit binds the demo key's requests", ty)
		}
	}

	// The evaluation order the example's header comment spells out.
	for _, g := range []struct {
		gate govern.Gate
		want string
	}{
		{govern.Gate1, "user_concurrency user_rpm team_rpm global_rpm"},
		{govern.Gate2, "key_daily user_daily_requests ml_daily team_monthly_tokens team_tpm acme_month"},
	} {
		var ids []string
		for _, in := range armed.Resolve(chain, govern.Dims{Model: "gpt-4o-mini", Provider: "openai", Endpoint: "/v1/chat/completions"}, g.gate, nil) {
			ids = append(ids, in.Limit.ID)
		}
		if got := strings.Join(ids, " "); got != g.want {
			t.Errorf("gate %d evaluates %q, the example's comment says %q: update the comment", g.gate, got, g.want)
		}
	}

	var small []string
	for _, in := range armed.Resolve(chain, govern.Dims{Endpoint: "/v1/chat/completions"}, govern.Gate1, nil) {
		l := in.Limit
		if l.Type == govern.RPM && l.Mode == govern.ModeOn && l.Enforce == govern.EnforceHard && l.Burst <= demoLoopLength {
			small = append(small, fmt.Sprintf("%s@%s (burst %d)", l.ID, in.Node, l.Burst))
		}
	}
	if len(small) != 1 {
		t.Errorf("gate-1 rpm limits a %d-request loop from %s meets: %v; want exactly one, so the demo's 429 is deterministic",
			demoLoopLength, demoOwner, small)
	}
}
