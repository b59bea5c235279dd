package govern_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// FuzzCompile feeds arbitrary bytes through both front ends, the decoder,
// Compile, Arm and resolution: none of them may panic, and whatever
// compiles must resolve consistently.
func FuzzCompile(f *testing.F) {
	files, _ := filepath.Glob("testdata/compile/*.golden")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		in, _, _ := strings.Cut(string(b), goldenSep)
		f.Add([]byte(in))
	}
	f.Add([]byte(`{"governance":{"enabled":true,"tenants":[{"org":"a","teams":["b"],"users":{"b":["c"]}}],"limits":[{"id":"x","attach":{"level":"user"},"type":"tpm","amount":20000,"period":"1m","match":{"model":"g*"}}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if f, err := config.DecodeJSON(b); err == nil {
			exercise(t, f)
		}
		if f, err := configfile.Parse("fuzz.yaml", b); err == nil {
			exercise(t, f)
		}
	})
}

func exercise(t *testing.T, f *config.File) {
	p, err := govern.Compile(f.Governance)
	if err != nil {
		if _, ok := err.(govern.Problems); !ok || err.Error() == "" {
			t.Fatalf("Compile error %T %q", err, err)
		}
		return
	}
	_ = p.Describe()
	nodes := append([]string{"org:x/team:y", "bad id", govern.Global}, p.Nodes()...)
	var overrides []govern.Override
	for _, l := range p.Limits {
		overrides = append(overrides, govern.Override{LimitID: l.ID, Node: l.Node, Amount: l.Amount})
		for _, n := range p.Instances(l) {
			overrides = append(overrides, govern.Override{LimitID: l.ID, Node: n, Amount: l.Amount + 1})
		}
	}
	a, _ := p.Arm(govern.Runtime{Nodes: nodes, Overrides: overrides})
	buf := make([]govern.Instance, 0, 8)
	for _, n := range append(a.Nodes(), "", "org:nope") {
		chain := govern.Chain(n, "vk_FEKZdMs2UQRi")
		for _, d := range []govern.Dims{{}, {Model: "gpt-4o", Provider: "openai", Endpoint: "/v1/chat/completions"}} {
			for _, g := range []govern.Gate{govern.Gate1, govern.Gate2} {
				buf = a.Resolve(chain, d, g, buf)
				for i, in := range buf {
					if in.Limit.Gate() != g || in.ID == "" {
						t.Fatalf("instance %+v at %s", in, g)
					}
					if i > 0 && in.Depth > buf[i-1].Depth {
						t.Fatalf("instances out of order: %+v", buf)
					}
				}
			}
			_ = a.ResolveAll(chain, d, buf)
		}
	}
}
