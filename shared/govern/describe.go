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
		if len(r.Addrs) > 0 {
			fmt.Fprintf(&b, " addrs=%s", strings.Join(r.Addrs, ","))
		}
		if r.Cluster {
			b.WriteString(" cluster=true")
		}
		if r.SentinelMaster != "" {
			fmt.Fprintf(&b, " sentinel_master=%s", r.SentinelMaster)
		}
		if r.TLS || strings.HasPrefix(r.Addr, "rediss://") {
			b.WriteString(" tls=true")
			if r.TLSCAFile != "" {
				fmt.Fprintf(&b, " tls_ca_file=%s", r.TLSCAFile)
			}
		}
		b.WriteByte('\n')
	}
	if src := p.Source; src != nil && src.Timezone != "" {
		fmt.Fprintf(&b, "timezone: %s\n", src.Timezone)
	}
	if src := p.Source; src != nil && src.Attributes != nil {
		a := p.Attributes
		fmt.Fprintf(&b, "attributes: customer_header=%s tags_header=%s customer_fields=[%s] tags_fields=[%s]\n",
			a.CustomerHeader, a.TagsHeader, strings.Join(a.CustomerFields, ", "), strings.Join(a.TagsFields, ", "))
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
		l.Type, l.Type.Class(), l.Gate(), l.Type.Unit(), l.Type.ErrorType(), l.Type.WireClass())
	if l.Node != "" {
		fmt.Fprintf(b, "    attach: node %s\n", l.Node)
	} else {
		fmt.Fprintf(b, "    attach: level %s\n", l.Level)
	}
	fmt.Fprintf(b, "    amount: %s\n", amountText(l, l.Amount))
	if l.Period.Zone != "" {
		fmt.Fprintf(b, "    period: %q in %s\n", l.Period.String(), l.Period.Zone)
	} else {
		fmt.Fprintf(b, "    period: %q\n", l.Period.String())
	}
	if l.Period.Rolling > 0 {
		fmt.Fprintf(b, "    rolling: %d day buckets, the oldest counted by the share of the current day still to run\n", l.Period.Rolling)
	}
	if l.Type.IsRate() {
		fmt.Fprintf(b, "    burst: %d  algorithm: %s  store: %s\n", l.Burst, AlgorithmName(l.Algorithm), l.Store)
	} else if l.Type == Concurrency {
		fmt.Fprintf(b, "    store: %s\n", l.Store)
	}
	if m := l.Match; m != (Match{}) {
		fmt.Fprintf(b, "    match: model=%q provider=%q endpoint=%q", m.Model, m.Provider, m.Endpoint)
		if m.Customer != "" {
			fmt.Fprintf(b, " customer=%q", m.Customer)
		}
		if m.Tag != "" {
			fmt.Fprintf(b, " tag=%q", m.Tag)
		}
		b.WriteByte('\n')
	}
	if l.DisclosedMaxDistinct() > 0 {
		fmt.Fprintf(b, "    max_distinct: %d counters per instance and period; further values share the overflow counter\n", l.MaxDistinct)
	}
	if l.Metric != MetricTotal {
		fmt.Fprintf(b, "    metric: %s tokens\n", MetricName(l.Metric))
	}
	if l.Fit {
		fmt.Fprintf(b, "    fit: the output maximum is lowered to what is left; min_output %d\n", l.MinOutput)
	}
	if l.Fallback != "" {
		fmt.Fprintf(b, "    fallback: a request this limit would refuse is served by model %s\n", l.Fallback)
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
	example := l.InstanceDims(Dims{Model: "<model>", Customer: "<customer>"}, "<tag>")
	if l.Level == LevelKey {
		leaf := KeyLeaf("<owner>", "<kid>")
		fmt.Fprintf(b, "    instances: one per virtual key, at its node %s: identity e.g. %s\n", leaf, Identity(l, leaf, example))
		return
	}
	fmt.Fprintf(b, "    instances (%d):\n", len(nodes))
	for _, n := range nodes {
		if l.PerValue() {
			fmt.Fprintf(b, "      %s  identity per %s, e.g. %s\n", n, l.perValueNames(), Identity(l, n, example))
		} else {
			fmt.Fprintf(b, "      %s  identity %s\n", n, Identity(l, n, example))
		}
	}
}

// perValueNames names the dims l keeps one counter per value of: "model",
// "customer", "model and customer", ...
func (l *Limit) perValueNames() string {
	var names []string
	if l.glob {
		names = append(names, "model")
	}
	if l.customerGlob {
		names = append(names, "customer")
	}
	if l.tagGlob {
		names = append(names, "tag")
	}
	switch len(names) {
	case 1:
		return names[0]
	case 2:
		return names[0] + " and " + names[1]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// amountText renders an amount in the limit's unit.
func amountText(l *Limit, v int64) string {
	if l.Type == BudgetUSD {
		return "$" + config.USD{Nanos: v}.String()
	}
	return strconv.FormatInt(v, 10) + " " + l.Type.Unit()
}
