package govern

import (
	"maps"
	"slices"
	"strconv"

	"github.com/tokentriage/tokentriage/shared/config"
)

// level codes of tree nodes; 0 means "not a tree node".
const (
	lvNone uint8 = iota
	lvOrg
	lvTeam
	lvUser
	lvKey   // key leaves: never tree nodes, found in a request's chain
	lvOther // a runtime node of another kind: in the tree, at no template level
)

func levelCode(level string) uint8 {
	switch level {
	case LevelOrg:
		return lvOrg
	case LevelTeam:
		return lvTeam
	case LevelUser:
		return lvUser
	case LevelKey:
		return lvKey
	}
	return lvOther
}

// tenancy builds the declarative plane of the tree from governance.tenants:
// org:<o>, org:<o>/team:<t> and org:<o>/team:<t>/user:<u>. A declaration
// with a problem contributes no node, so one typo does not cascade into a
// pinned limit's "not in tenancy tree".
func (c *compiler) tenancy(ts []config.Tenant) map[string]uint8 {
	tree := map[string]uint8{}
	orgs := map[string]string{} // org id -> path of its declaration
	for i, t := range ts {
		p := "governance.tenants[" + strconv.Itoa(i) + "]"
		if !c.tenantID(p+".org", "org", t.Org) {
			continue
		}
		if prev, dup := orgs[t.Org]; dup {
			c.at(p+".org", "duplicate org %q (also %s); declare each org once with all its teams", t.Org, prev)
			continue
		}
		orgs[t.Org] = p
		org := "org:" + t.Org
		tree[org] = lvOrg

		teams := map[string]string{}
		for j, team := range t.Teams {
			tp := p + ".teams[" + strconv.Itoa(j) + "]"
			if !c.newTenant(teams, tp, "team", team) {
				continue
			}
			tree[org+"/team:"+team] = lvTeam
		}

		for _, team := range slices.Sorted(maps.Keys(t.Users)) {
			up := p + ".users[" + strconv.Quote(team) + "]"
			if _, ok := teams[team]; !ok {
				c.at(up, "names a team not declared in teams")
				continue
			}
			users := map[string]string{}
			for k, user := range t.Users[team] {
				pp := up + "[" + strconv.Itoa(k) + "]"
				if !c.newTenant(users, pp, "user", user) {
					continue
				}
				tree[org+"/team:"+team+"/user:"+user] = lvUser
			}
		}
	}
	return tree
}

// tenantID checks one org, team or user id of the tenants block.
// newTenant checks a team or user id declared at path, and that seen (id
// -> path of its declaration) does not hold it yet; it records a new one.
func (c *compiler) newTenant(seen map[string]string, path, what, id string) bool {
	if !c.tenantID(path, what, id) {
		return false
	}
	if prev, dup := seen[id]; dup {
		c.at(path, "duplicate %s %q (also %s)", what, id, prev)
		return false
	}
	seen[id] = path
	return true
}

func (c *compiler) tenantID(path, what, id string) bool {
	switch {
	case id == "":
		c.at(path, "%s id is required", what)
		return false
	case id == Global:
		c.at(path, "%q is the synthetic root and cannot be declared; a limit reaches it with attach: { node: __global }", id)
		return false
	}
	if err := validIDPart(id); err != nil {
		c.at(path, "%s %s", what, err)
		return false
	}
	return true
}

// sortedNodes lists a tree's nodes in lexical order.
func sortedNodes(tree map[string]uint8) []string { return slices.Sorted(maps.Keys(tree)) }

// nodesAt lists the nodes of a sorted node list a limit instantiates at: its
// pinned node, or every node at its template level (lexical order).
func nodesAt(l *Limit, sorted []string, tree map[string]uint8) []string {
	if l.Node != "" {
		return []string{l.Node}
	}
	want := levelCode(l.Level)
	var out []string
	for _, n := range sorted {
		if tree[n] == want {
			out = append(out, n)
		}
	}
	return out
}
