package govern

import (
	"math"
	"path"
	"strings"
)

// Matches reports whether a request with dims d satisfies the limit's match
// (seed 004 step 2): endpoint and provider compared exactly, model by
// path.Match. An empty match field matches anything.
func (l *Limit) Matches(d Dims) bool { return l.matches(d, false) }

// matches implements Matches; with unknownOK an empty dim in d is unknown
// and matches any value (ResolveAll). A request without a customer has the
// customer "" (which "*" matches: its requests share one counter); a tag
// pattern matches when any of the request's tags does.
func (l *Limit) matches(d Dims, unknownOK bool) bool {
	m := &l.Match
	if m.Endpoint != "" && m.Endpoint != d.Endpoint && !(unknownOK && d.Endpoint == "") {
		return false
	}
	if m.Provider != "" && m.Provider != d.Provider && !(unknownOK && d.Provider == "") {
		return false
	}
	if m.Model != "" && !(unknownOK && d.Model == "") {
		if !l.glob {
			if m.Model != d.Model {
				return false
			}
		} else if ok, _ := path.Match(m.Model, d.Model); !ok { // the pattern was checked at compile
			return false
		}
	}
	if m.Customer != "" && !(unknownOK && d.Customer == "") {
		if !l.customerGlob {
			if m.Customer != d.Customer {
				return false
			}
		} else if ok, _ := path.Match(m.Customer, d.Customer); !ok {
			return false
		}
	}
	if m.Tag != "" && !(unknownOK && d.Tags == "") {
		if !l.tagGlob {
			return hasTag(d.Tags, m.Tag)
		}
		return l.nextTag(d.Tags) != ""
	}
	return true
}

// nextTag returns the first tag of the JoinTags list tags that l's tag
// pattern matches, or "".
func (l *Limit) nextTag(tags string) string {
	for tags != "" {
		var t string
		t, tags, _ = strings.Cut(tags, ",")
		if ok, _ := path.Match(l.Match.Tag, t); ok {
			return t
		}
	}
	return ""
}

// Resolve returns, for a request with resolution chain chain and dims d,
// the limit instances that bind it at gate g (seed 004 steps 1 to 6): the
// armed limits of that gate in ascending id (Gate1: rpm and concurrency;
// Gate2: budget_usd, quota_tokens, quota_requests, tpm, and rpm and
// concurrency narrowed by what the body names, Limit.Gate) whose match d
// satisfies, each expanded to its nodes (a pinned node, or every tree node
// at the template's level) and kept where the node is in chain or is
// __global, with a per-node override substituted for the amount, ordered
// deepest node first, then limit id, then node id. The caller evaluates
// them in that order and stops at the first one over (step 7).
//
// The instances are appended to buf[:0]; when buf has the capacity, Resolve
// does not allocate. Only the first identity of a (node, model) pair of a
// limit whose match.model is a glob is built here, once.
func (a *Armed) Resolve(chain []string, d Dims, g Gate, buf []Instance) []Instance {
	if g != Gate1 && g != Gate2 {
		return buf[:0]
	}
	return a.resolve(chain, nil, d, a.gate[g], false, buf[:0])
}

// ResolveFacts is Resolve for a plan armed without the runtime plane
// (Arm(Runtime{})), the runtime plane's say on each node of the chain
// given in facts, parallel to chain: a node the config does not declare
// is in the tree at its kind's level when its facts say Tree, and an
// override in a node's facts replaces its instance's amount, as Arm would
// have folded them in (an override that breaks the limit's rules is not
// applied). The filter resolves so, looking up only the nodes of the
// request's chain, so a runtime plane of any size costs it nothing per
// node.
func (a *Armed) ResolveFacts(chain []string, facts []NodeFacts, d Dims, g Gate, buf []Instance) []Instance {
	if g != Gate1 && g != Gate2 || len(facts) != len(chain) {
		return a.Resolve(chain, d, g, buf)
	}
	return a.resolve(chain, facts, d, a.gate[g], false, buf[:0])
}

// ResolveAllFacts is ResolveAll with the runtime plane's facts of each
// chain node, as ResolveFacts.
func (a *Armed) ResolveAllFacts(chain []string, facts []NodeFacts, d Dims, buf []Instance) []Instance {
	if len(facts) != len(chain) {
		facts = nil
	}
	return a.resolve(chain, facts, d, a.all, true, buf[:0])
}

// ResolveAll lists every instance on the chain regardless of gate, for
// GET /tt/v1/me, in the same order as Resolve. A dim left empty in d is
// treated as unknown and matches every value, since /tt/v1/me carries no
// request body: a limit narrowed to a model is listed (it binds the caller
// whenever the model matches). Where the counter depends on the unknown
// value (match.model is a glob, so there is one counter per model), the
// instance is marked Unresolved and its ID is empty; an exact match.model,
// match.provider or match.endpoint names its single counter and keeps its
// ID. The same holds of a customer or tag pattern. A dim given in d must
// match, as in Resolve.
func (a *Armed) ResolveAll(chain []string, d Dims, buf []Instance) []Instance {
	return a.resolve(chain, nil, d, a.all, true, buf[:0])
}

func (a *Armed) resolve(chain []string, facts []NodeFacts, d Dims, limits []int32, all bool, buf []Instance) []Instance {
	// What the tree knows of each chain entry, looked up once.
	var small [8]nodeInfo
	infos := small[:0]
	if len(chain) > len(small) {
		infos = make([]nodeInfo, 0, len(chain))
	}
	for i, n := range chain {
		info := a.tree[n]
		if info.level == lvNone && facts != nil && facts[i].Tree && n != Global {
			// A runtime node: in the tree at its kind's level, with no
			// armed index (its identities are built as met).
			lv := levelCode(NodeLevel(n))
			if lv == lvKey {
				lv = lvOther // a key leaf is never a tree node
			}
			info = nodeInfo{idx: -1, depth: uint16(min(NodeDepth(n), math.MaxUint16)), level: lv}
		}
		infos = append(infos, info)
	}
	// over is the overrides the runtime plane's facts hold at chain[i].
	over := func(i int) []Override {
		if facts == nil {
			return nil
		}
		return facts[i].Overrides
	}
	// The key leaf, first in a keyed request's chain: the one instance of
	// a key-level template.
	keyLeaf := ""
	if a.keyLevel && len(chain) > 0 {
		if _, _, ok := SplitKeyLeaf(chain[0]); ok {
			keyLeaf = chain[0]
		}
	}

	for _, li := range limits {
		al := &a.limits[li]
		l := al.l
		if !l.matches(d, all) {
			continue
		}
		switch {
		case l.Node == Global:
			var ov []Override
			if n := len(chain); n > 0 && chain[n-1] == Global {
				ov = over(n - 1)
			}
			buf = al.instance(buf, Global, 0, 0, d, all, ov)
		case l.Node != "":
			for i, n := range chain {
				if n == l.Node {
					buf = al.instance(buf, n, int(infos[i].depth), 0, d, all, over(i))
					break
				}
			}
		case al.level == lvKey:
			if keyLeaf != "" {
				buf = al.instance(buf, keyLeaf, NodeDepth(keyLeaf), -1, d, all, over(0))
			}
		default:
			for i, n := range chain {
				if infos[i].level == al.level {
					buf = al.instance(buf, n, int(infos[i].depth), infos[i].idx, d, all, over(i))
				}
			}
		}
	}
	sortInstances(buf)
	return buf
}

// instance appends the instances of al at node (one, or one per matching
// tag of a per-tag limit); idx is the node's position among the limit's
// instances (-1 for a runtime node met in a chain, not armed); over are
// the overrides the runtime plane's facts hold at node.
func (al *armedLimit) instance(buf []Instance, node string, depth int, idx int32, d Dims, all bool, over []Override) []Instance {
	l := al.l
	if !l.tagGlob || d.Tags == "" {
		return al.instanceTag(buf, node, depth, idx, d, all, "", over)
	}
	for tags := d.Tags; tags != ""; {
		var t string
		t, tags, _ = strings.Cut(tags, ",")
		if ok, _ := path.Match(l.Match.Tag, t); ok {
			buf = al.instanceTag(buf, node, depth, idx, d, all, t, over)
		}
	}
	return buf
}

func (al *armedLimit) instanceTag(buf []Instance, node string, depth int, idx int32, d Dims, all bool, tag string, over []Override) []Instance {
	l := al.l
	inst := Instance{Limit: l, Node: node, Amount: l.Amount, Depth: depth, Tag: tag}
	if al.over != nil {
		if v, ok := al.over[node]; ok {
			inst.Amount, inst.Overridden = v, true
		}
	}
	if !inst.Overridden {
		for _, o := range over {
			if o.LimitID == l.ID {
				if overrideFits(l, o.Amount) {
					inst.Amount, inst.Overridden = o.Amount, true
				}
				break
			}
		}
	}
	switch {
	case all && (l.glob && d.Model == "" || l.customerGlob && d.Customer == "" || l.tagGlob && tag == ""):
		inst.Unresolved = true
	case al.keys != nil:
		inst.ID = al.keys.identity(l, node, d, tag)
	case idx < 0 && al.rt != nil:
		inst.ID = al.rt.identity(l, node, d, tag)
	case !l.PerValue():
		inst.ID = al.ids[idx]
	default:
		inst.ID = al.cache.identity(l, idx, node, d, tag)
	}
	return append(buf, inst)
}

// sortInstances orders instances deepest node first, then limit id, then
// node id (seed 004 step 6). The lists are short: insertion sort, no
// allocation.
func sortInstances(s []Instance) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && instanceLess(&s[j], &s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func instanceLess(a, b *Instance) bool {
	if a.Depth != b.Depth {
		return a.Depth > b.Depth
	}
	if a.Limit.ID != b.Limit.ID {
		return a.Limit.ID < b.Limit.ID
	}
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	return a.Tag < b.Tag
}
