package govern

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/tokentriage/tokentriage/shared/config"
)

// Plan is a compiled governance block. It is immutable once Compile returns
// it and safe to share between goroutines.
type Plan struct {
	// Enabled arms governance (governance.enabled, default false).
	Enabled bool
	// RequireKey refuses requests without a valid key (default false).
	RequireKey bool
	// DiscloseLimits adds the Ratelimit-Policy and X-Ratelimit-* headers to
	// served responses (governance.keys.disclose_limits, default true).
	DiscloseLimits bool
	// ProviderRefusals adds OpenAI's param and code members to the bodies
	// of refusals on OpenAI paths (governance.refusals.shape: provider).
	ProviderRefusals bool
	// Limits are the compiled limits in ascending id order, which is the
	// order resolution walks them (seed 004 step 1). Limits in mode off are
	// here too; they are never armed.
	Limits []*Limit
	// Hash is the plan version: the hex SHA-256 of config.CanonicalJSON of
	// the governance block as decoded (schema field order, every field,
	// sorted map keys, exact dollar amounts; "null" for an absent block),
	// the same bytes encoding/json's Marshal writes. It is identical in
	// native and wasm builds. The filter and the accountant compare it to
	// tell whether they enforce one plan.
	Hash string
	// Source is the block the plan was compiled from; nil when absent.
	Source *config.Governance
	// Attributes is governance.attributes with defaults applied: where a
	// request's customer and tags are read.
	Attributes Attributes
	// SharedState is governance.shared_state with defaults applied
	// (redis.key_prefix "tt"); nil when no shared store is configured.
	SharedState *config.SharedState

	tree  map[string]uint8 // config nodes -> level code
	nodes []string         // config nodes, lexical order
	byID  map[string]*Limit
}

// Nodes lists the tree nodes declared in governance.tenants, in lexical
// order. __global is not among them.
func (p *Plan) Nodes() []string { return p.nodes }

// HasNode reports whether node is declared in governance.tenants.
func (p *Plan) HasNode(node string) bool { return p.tree[node] != lvNone }

// Limit returns the limit with the given id, or nil.
func (p *Plan) Limit(id string) *Limit { return p.byID[id] }

// Instances lists the nodes l instantiates at over the config tree: its
// pinned node, or every declared node at its level, in lexical order.
func (p *Plan) Instances(l *Limit) []string { return nodesAt(l, p.nodes, p.tree) }

// InstanceCount is the number of limit instances over the config tree,
// every limit counted (mode off included).
func (p *Plan) InstanceCount() int {
	n := 0
	for _, l := range p.Limits {
		n += len(p.Instances(l))
	}
	return n
}

// hashGovernance is the hex SHA-256 of the canonical JSON of a governance
// block ("null" for an absent one).
func hashGovernance(g *config.Governance) (string, error) {
	b, err := config.CanonicalJSON(g)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
