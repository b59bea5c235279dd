package runtime

import (
	"strings"

	"github.com/tokentriage/tokentriage/shared/govern"
)

// Plan is the part of the armed plan a runtime write is checked against:
// which nodes the config declares, and the armed limits. The accountant
// passes the plan armed now; ArmedPlan adapts a *govern.Armed.
type Plan interface {
	// ConfigNode reports whether id is a node of the config's tenants.
	ConfigNode(id string) bool
	// Limit returns the armed limit with this id, or nil.
	Limit(id string) *govern.Limit
}

// levels are the node kinds of the tenancy tree, from the root down.
var levels = []string{"org", "team", "user"}

// level returns the kind of a node's last segment ("team" for
// org:acme/team:ml) and its depth (1 for an org).
func level(id string) (kind string, depth int) {
	depth = strings.Count(id, "/") + 1
	last := id[strings.LastIndexByte(id, '/')+1:]
	kind, _, _ = strings.Cut(last, ":")
	return kind, depth
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
