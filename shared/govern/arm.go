package govern

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/tokentriage/tokentriage/shared/config"
)

// Armed is a Plan folded together with the runtime plane (seed 004, "At
// each arm both fold into one tree"): the config tree plus API-created
// nodes, and the per-node overrides that passed validation. Everything
// Resolve needs per request is precomputed here. An Armed is immutable in
// effect and safe for concurrent use.
type Armed struct {
	Plan *Plan

	tree      map[string]nodeInfo // config and runtime nodes
	nodes     []string            // lexical order
	byLevel   [lvOther][]string   // org, team, user nodes, lexical order
	limits    []armedLimit        // parallel to Plan.Limits
	gate      [3][]int32          // Gate1, Gate2 -> armed limits, ascending id
	all       []int32             // every armed limit, ascending id
	overrides []Override          // the overrides kept, in runtime order
	keyLevel  bool                // some armed limit is a key-level template
}

// nodeInfo is what resolution needs of a tree node, found with one map
// probe per chain entry.
type nodeInfo struct {
	idx   int32  // position among the nodes of its level (byLevel)
	depth uint16 // NodeDepth
	level uint8  // level code; lvNone for a node not in the tree
}

// armedLimit is one limit with what resolution needs precomputed.
type armedLimit struct {
	l     *Limit
	level uint8            // template level code; lvNone when pinned
	ids   []string         // identities by instance: byLevel index, or [0] when pinned
	over  map[string]int64 // instance node -> override amount
	cache *modelCache      // glob model: identities per instance and model
	keys  *keyCache        // key level: identities per key leaf (and model)
	// rt: a level template's identities at runtime nodes that ResolveFacts
	// meets in chains (not armed, so not in ids), per node (and model).
	rt *keyCache
}

// Arm folds the runtime plane into the plan. Runtime nodes are checked
// against the node id grammar; one that collides with a node declared in
// governance.tenants is reported and the config node kept. A runtime node's
// missing ancestors join the tree with it (org:beta/team:x brings org:beta).
// Each override is validated on its own (seed 004, "One bad override is
// dropped on its own"): an invalid one is dropped with its reason and the
// rest are kept. Mode-off limits are compiled but never armed: they resolve
// to nothing.
func (p *Plan) Arm(rt Runtime) (*Armed, []Problem) {
	a := &Armed{Plan: p}
	var probs []Problem
	levels := make(map[string]uint8, len(p.tree)+len(rt.Nodes))
	for n, lv := range p.tree {
		levels[n] = lv
	}
	runtime := map[string]bool{}
	for i, n := range rt.Nodes {
		if err := ValidNodeID(n); err != nil {
			probs = append(probs, Problem{Path: runtimeNodePath(i), Message: err.Error() + "; the runtime node is skipped"})
			continue
		}
		if p.tree[n] != lvNone {
			probs = append(probs, Problem{Path: runtimeNodePath(i), Message: fmt.Sprintf("node %q is also declared in governance.tenants; the config node is kept and the runtime node skipped", n)})
			continue
		}
		if runtime[n] {
			continue
		}
		runtime[n] = true
		for end := len(n); end > 0; {
			prefix := n[:end]
			if levels[prefix] == lvNone {
				lv := levelCode(NodeLevel(prefix))
				if lv == lvKey {
					lv = lvOther // a key leaf is never a tree node
				}
				levels[prefix] = lv
			}
			end = strings.LastIndexByte(prefix, '/')
			if end < 0 {
				break
			}
		}
	}
	a.nodes = sortedNodes(levels)
	a.tree = make(map[string]nodeInfo, len(a.nodes))
	for _, n := range a.nodes {
		lv := levels[n]
		info := nodeInfo{idx: -1, depth: uint16(min(NodeDepth(n), math.MaxUint16)), level: lv}
		if lv < lvOther {
			info.idx = int32(len(a.byLevel[lv]))
			a.byLevel[lv] = append(a.byLevel[lv], n)
		}
		a.tree[n] = info
	}

	a.limits = make([]armedLimit, len(p.Limits))
	for i, l := range p.Limits {
		al := &a.limits[i]
		al.l = l
		if l.Level != "" {
			al.level = levelCode(l.Level)
		}
		if l.Mode == ModeOff {
			continue
		}
		nodes := a.Instances(l)
		switch {
		case l.Level == LevelKey:
			al.keys = &keyCache{m: map[[4]string]string{}}
			a.keyLevel = true
		case l.PerValue():
			al.cache = &modelCache{m: make([]map[[3]string]string, len(nodes))}
			al.rt = &keyCache{m: map[[4]string]string{}}
		default:
			al.ids = make([]string, len(nodes))
			d := l.InstanceDims(Dims{}, "")
			for k, n := range nodes {
				al.ids[k] = Identity(l, n, d)
			}
			if l.Level != "" {
				al.rt = &keyCache{m: map[[4]string]string{}}
			}
		}
		g := l.Gate()
		a.gate[g] = append(a.gate[g], int32(i))
		a.all = append(a.all, int32(i))
	}

	index := map[*Limit]int{}
	for i, l := range p.Limits {
		index[l] = i
	}
	kept := map[[2]string]int{}
	for i, o := range rt.Overrides {
		path := "runtime.overrides[" + strconv.Itoa(i) + "]"
		l, msg := a.checkOverride(o)
		if msg == "" {
			if first, dup := kept[[2]string{o.LimitID, o.Node}]; dup {
				msg = fmt.Sprintf("limit %q at node %q: a second override for this instance; the first (runtime.overrides[%d]) is kept", o.LimitID, o.Node, first)
			}
		}
		if msg != "" {
			probs = append(probs, Problem{Path: path, Message: msg})
			continue
		}
		kept[[2]string{o.LimitID, o.Node}] = i
		al := &a.limits[index[l]]
		if al.over == nil {
			al.over = map[string]int64{}
		}
		al.over[o.Node] = o.Amount
		a.overrides = append(a.overrides, o)
	}
	return a, probs
}

// overrideFits applies the rules of checkOverride that need only the
// limit and the amount, to an override met at one of the limit's
// instances (ResolveFacts): one that fails them is not applied.
func overrideFits(l *Limit, amount int64) bool {
	return l.Type.Overridable() && l.OverrideAllow && amount > 0 && (l.OverrideMax < 0 || amount <= l.OverrideMax)
}

// checkOverride validates one per-node override against the plan and the
// merged tree, returning the reason it must be dropped ("" to keep it).
func (a *Armed) checkOverride(o Override) (*Limit, string) {
	l := a.Plan.Limit(o.LimitID)
	if l == nil {
		return nil, fmt.Sprintf("limit %q is not in the plan; the override is dropped", o.LimitID)
	}
	if !l.Type.Overridable() {
		return l, OverrideRefusal(l.Type)
	}
	at := fmt.Sprintf("limit %q at node %q: ", l.ID, o.Node)
	if !l.OverrideAllow {
		return l, at + "the limit does not allow per-node overrides (set override: { allow: true } on it); the override is dropped"
	}
	switch {
	case l.Level == LevelKey:
		if err := ValidKeyLeaf(o.Node); err != nil {
			return l, at + err.Error() + "; the override is dropped"
		}
	case o.Node != Global:
		if err := ValidNodeID(o.Node); err != nil {
			return l, at + err.Error() + "; the override is dropped"
		}
	}
	if !a.instantiates(l, o.Node) {
		where := fmt.Sprintf("the node %q", l.Node)
		if l.Level != "" {
			where = "every " + l.Level + " node"
		}
		return l, at + "not an instance of the limit (it instantiates at " + where + "); the override is dropped"
	}
	amount, ceiling := "amount "+strconv.FormatInt(o.Amount, 10), "override.max_amount "+strconv.FormatInt(l.OverrideMax, 10)
	if l.Type == BudgetUSD {
		amount, ceiling = "amount_usd "+config.USD{Nanos: o.Amount}.String(), "override.max_amount_usd "+config.USD{Nanos: l.OverrideMax}.String()
	}
	if o.Amount <= 0 {
		return l, at + amount + " must be positive (an override of zero or less would switch the cap off rather than lower it); the override is dropped"
	}
	if l.OverrideMax >= 0 && o.Amount > l.OverrideMax {
		return l, at + amount + " is above the ceiling " + ceiling + "; the override is dropped"
	}
	return l, ""
}

func (a *Armed) instantiates(l *Limit, node string) bool {
	switch {
	case l.Node != "":
		return node == l.Node
	case l.Level == LevelKey:
		return ValidKeyLeaf(node) == nil // whether the key exists is the runtime plane's to say
	}
	return a.tree[node].level == levelCode(l.Level)
}

// Nodes lists every node of the merged tree (config and runtime), in
// lexical order. __global is not among them.
func (a *Armed) Nodes() []string { return a.nodes }

// HasNode reports whether node is in the merged tree.
func (a *Armed) HasNode(node string) bool { return a.tree[node].level != lvNone }

// Instances lists the nodes l instantiates at over the merged tree: none
// for a key-level template, whose instances are the keys' leaves, met in
// the chains of requests and rows. The slice is shared: do not modify it.
func (a *Armed) Instances(l *Limit) []string {
	if l.Node != "" {
		return []string{l.Node}
	}
	return a.byLevel[levelCode(l.Level)]
}

// Overrides lists the overrides that were kept, in runtime order.
func (a *Armed) Overrides() []Override { return a.overrides }

// Override returns the override amount of a limit at a node, if one is kept.
func (a *Armed) Override(limitID, node string) (int64, bool) {
	l := a.Plan.Limit(limitID)
	if l == nil {
		return 0, false
	}
	i := sort.Search(len(a.Plan.Limits), func(i int) bool { return a.Plan.Limits[i].ID >= limitID })
	v, ok := a.limits[i].over[node]
	return v, ok
}

// modelCache memoizes the identities of a limit that keeps one counter per
// value (a model, customer or tag pattern), so the identity carries the
// values and cannot be computed at arm. It is bounded; past the bound an
// identity is built per call.
type modelCache struct {
	mu sync.Mutex
	n  int
	m  []map[[3]string]string // by instance index: (model, customer, tag) -> identity
}

const modelCacheMax = 4096

// keyCache memoizes the identities of a key-level limit: one counter per
// key leaf (and per value, for a per-value limit). It is bounded; past the
// bound an identity is built per call.
type keyCache struct {
	mu sync.Mutex
	m  map[[4]string]string // (key leaf, model, customer, tag) -> identity
}

const keyCacheMax = 16384

func (c *keyCache) identity(l *Limit, node string, d Dims, tag string) string {
	id := l.InstanceDims(d, tag)
	k := [4]string{node, id.Model, id.Customer, id.Tags}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v
	}
	v := Identity(l, node, id)
	if len(c.m) < keyCacheMax {
		// The strings may be slices of a request: kept as copies.
		c.m[[4]string{strings.Clone(node), strings.Clone(id.Model), strings.Clone(id.Customer), strings.Clone(id.Tags)}] = v
	}
	return v
}

func (c *modelCache) identity(l *Limit, idx int32, node string, d Dims, tag string) string {
	id := l.InstanceDims(d, tag)
	k := [3]string{id.Model, id.Customer, id.Tags}
	c.mu.Lock()
	defer c.mu.Unlock()
	mm := c.m[idx]
	if v, ok := mm[k]; ok {
		return v
	}
	v := Identity(l, node, id)
	if c.n < modelCacheMax {
		if mm == nil {
			mm = map[[3]string]string{}
			c.m[idx] = mm
		}
		// The values may be slices of a request body: kept as copies.
		mm[[3]string{strings.Clone(k[0]), strings.Clone(k[1]), strings.Clone(k[2])}] = v
		c.n++
	}
	return v
}

// runtimeNodePath is the path of the i-th runtime node, built only for a
// problem: a plane of 100,000 nodes arms without 100,000 strings.
func runtimeNodePath(i int) string { return "runtime.nodes[" + strconv.Itoa(i) + "]" }
