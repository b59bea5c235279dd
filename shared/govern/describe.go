package govern

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/shared/config"
)

// Describe renders the compiled plan as text: the switches with their
// defaults applied, the tree, and every limit with its effective settings,
// instances and counter identities. `tokentriage validate --plan` prints it
// and the golden tests compare it.
func (p *Plan) Describe() string {
	var b strings.Builder
	shape := ShapeTokentriage
	if p.ProviderRefusals {
		shape = ShapeProvider
	}
	fmt.Fprintf(&b, "enabled: %t\nrequire_key: %t\ndisclose_limits: %t\nrefusals.shape: %s\nhash: %s\n", p.Enabled, p.RequireKey, p.DiscloseLimits, shape, p.Hash)
	if s := p.SharedState; s != nil && s.Redis != nil {
		r := s.Redis
		fmt.Fprintf(&b, "shared_state.redis: addr=%s db=%d key_prefix=%s timeout=%s", r.Addr, r.DB, r.KeyPrefix, p.RedisTimeout())
		if r.Username != "" {
			fmt.Fprintf(&b, " username=%s", r.Username)
		}
		if r.PasswordEnv != "" {
			fmt.Fprintf(&b, " password_env=%s", r.PasswordEnv)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "nodes (%d):\n", len(p.nodes))
	for _, n := range p.nodes {
		fmt.Fprintf(&b, "  %s  (%s, depth %d)\n", n, NodeLevel(n), NodeDepth(n))
	}
	fmt.Fprintf(&b, "limits (%d):\n", len(p.Limits))
	for _, l := range p.Limits {
		describeLimit(&b, l, p.Instances(l))
	}
	fmt.Fprintf(&b, "instances: %d\n", p.InstanceCount())
	return b.String()
}

func describeLimit(b *strings.Builder, l *Limit, nodes []string) {
	fmt.Fprintf(b, "  %s  (%s)\n", l.ID, l.Path)
	fmt.Fprintf(b, "    type: %s  class: %s  gate: %s  unit: %s  error.type: %s  wire class: %s\n",
		l.Type, l.Type.Class(), l.Type.Gate(), l.Type.Unit(), l.Type.ErrorType(), l.Type.WireClass())
	if l.Node != "" {
		fmt.Fprintf(b, "    attach: node %s\n", l.Node)
	} else {
		fmt.Fprintf(b, "    attach: level %s\n", l.Level)
	}
	fmt.Fprintf(b, "    amount: %s\n", amountText(l, l.Amount))
	fmt.Fprintf(b, "    period: %q\n", l.Period.String())
	if l.Type.IsRate() {
		fmt.Fprintf(b, "    burst: %d  algorithm: %s  store: %s\n", l.Burst, AlgorithmName(l.Algorithm), l.Store)
	} else if l.Type == Concurrency {
		fmt.Fprintf(b, "    store: %s\n", l.Store)
	}
	if m := l.Match; m != (Match{}) {
		fmt.Fprintf(b, "    match: model=%q provider=%q endpoint=%q\n", m.Model, m.Provider, m.Endpoint)
	}
	fmt.Fprintf(b, "    posture: mode=%s enforce=%s fail=%s (%s)", l.Mode, l.Enforce, l.Fail, l.PostureLabel())
	if len(l.Thresholds) > 0 {
		th := make([]string, len(l.Thresholds))
		for i, t := range l.Thresholds {
			th[i] = strconv.FormatFloat(t, 'g', -1, 64)
		}
		fmt.Fprintf(b, " thresholds=[%s]", strings.Join(th, ", "))
	}
	b.WriteByte('\n')
	switch {
	case l.OverrideAllow && l.OverrideMax >= 0:
		fmt.Fprintf(b, "    override: allowed, ceiling %s\n", amountText(l, l.OverrideMax))
	case l.OverrideAllow:
		fmt.Fprintf(b, "    override: allowed, no ceiling\n")
	}
	if l.Reserve {
		fmt.Fprintf(b, "    reserve: on (admission reserves the dearest cost the call can reach)\n")
	}
	if l.Mode == ModeOff {
		fmt.Fprintf(b, "    not armed: mode off compiles and resolves to nothing\n")
	}
	if l.Level == LevelKey {
		leaf, model := KeyLeaf("<owner>", "<kid>"), l.Match.Model
		if l.glob {
			model = "<model>"
		}
		fmt.Fprintf(b, "    instances: one per virtual key, at its node %s: identity e.g. %s\n", leaf,
			Identity(l, leaf, Dims{Model: model, Provider: l.Match.Provider, Endpoint: l.Match.Endpoint}))
		return
	}
	fmt.Fprintf(b, "    instances (%d):\n", len(nodes))
	for _, n := range nodes {
		if l.glob {
			fmt.Fprintf(b, "      %s  identity per model, e.g. %s\n", n, Identity(l, n, Dims{Model: "<model>", Provider: l.Match.Provider, Endpoint: l.Match.Endpoint}))
		} else {
			fmt.Fprintf(b, "      %s  identity %s\n", n, Identity(l, n, Dims{Model: l.Match.Model, Provider: l.Match.Provider, Endpoint: l.Match.Endpoint}))
		}
	}
}

// amountText renders an amount in the limit's unit.
func amountText(l *Limit, v int64) string {
	if l.Type == BudgetUSD {
		return "$" + config.USD{Nanos: v}.String()
	}
	return strconv.FormatInt(v, 10) + " " + l.Type.Unit()
}
