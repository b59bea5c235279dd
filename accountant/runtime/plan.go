package runtime

import (
	"strings"

	"github.com/tokentriage/tokentriage/shared/govern"
)

// Plan is the part of the armed plan a runtime write is checked against:
// which nodes the config declares, which nodes the armed tree holds, and the
// limits. The accountant passes the plan armed now through ArmedPlan.
type Plan interface {
	// ConfigNode reports whether id is a node of the config's tenants.
	ConfigNode(id string) bool
	// TreeNode reports whether id is a node of the armed tree: the config's
	// tenants and the runtime nodes folded in when it was armed.
	TreeNode(id string) bool
	// Limit returns the compiled limit with this id, or nil.
	Limit(id string) *govern.Limit
}

// ArmedPlan is the Plan of an armed governance plan.
func ArmedPlan(a *govern.Armed) Plan { return armedPlan{a} }

type armedPlan struct{ a *govern.Armed }

func (p armedPlan) ConfigNode(id string) bool     { return p.a.Plan.HasNode(id) }
func (p armedPlan) TreeNode(id string) bool       { return p.a.HasNode(id) }
func (p armedPlan) Limit(id string) *govern.Limit { return p.a.Plan.Limit(id) }

var _ Plan = armedPlan{}

// levels are the node kinds of the tenancy tree, from the root down.
var levels = []string{"org", "team", "user"}

// level returns the kind of a node's last segment ("team" for
// org:acme/team:ml) and its depth (1 for an org).
func level(id string) (kind string, depth int) {
	return govern.NodeLevel(id), govern.NodeDepth(id)
}

// parent returns the node a node hangs from, or "" for a root.
func parent(id string) string {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return ""
	}
	return id[:i]
}

// InSubtree reports whether node is root or lies below it, comparing whole
// segments: org:acme owns org:acme/team:ml but not org:acmecorp. Both ids
// must already have passed govern.ValidNodeID.
func InSubtree(root, node string) bool {
	return node == root || strings.HasPrefix(node, root+"/")
}
