package api

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
)

// NodeView is one node of GET nodes. Source is "config" (declared in
// governance.tenants) or "runtime" (created through this API). A runtime
// node that the config also declares is listed twice, its runtime entry
// carrying Conflict: the config node is the one in force.
type NodeView struct {
	ID        string     `json:"id"`
	Source    string     `json:"source"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
	CreatedBy string     `json:"created_by,omitempty"`
	Conflict  string     `json:"conflict,omitempty"`
}

// NodeList is the answer of GET nodes: the nodes the caller may see, and
// the ids of the runtime nodes that collide with config nodes.
type NodeList struct {
	Nodes     []NodeView `json:"nodes"`
	Conflicts []string   `json:"conflicts"`
}

// NodeRequest is the body of POST nodes.
type NodeRequest struct {
	ID string `json:"id"`
}

func runtimeNodeView(n runtime.Node) NodeView {
	at := n.CreatedAt
	return NodeView{ID: n.ID, Source: "runtime", CreatedAt: &at, CreatedBy: n.CreatedBy}
}

func conflictText(id string) string {
	return fmt.Sprintf("node %q is declared in governance.tenants and was also created through the API; the config node is in force and this runtime row is ignored; remove it with DELETE %snodes?id=%s", id, Prefix, id)
}

func (h *handler) listNodes(w http.ResponseWriter, r *http.Request, p principal) {
	rows, err := h.DB.Nodes()
	if err != nil {
		h.internal(w, r, err)
		return
	}
	out := NodeList{Nodes: []NodeView{}, Conflicts: []string{}}
	config := map[string]bool{}
	if a := h.Armed(); a != nil {
		for _, id := range a.Plan.Nodes() {
			config[id] = true
			if p.owns(id) {
				out.Nodes = append(out.Nodes, NodeView{ID: id, Source: "config"})
			}
		}
	}
	for _, n := range rows {
		if !p.owns(n.ID) {
			continue
		}
		v := runtimeNodeView(n)
		if config[n.ID] {
			v.Conflict = conflictText(n.ID)
			out.Conflicts = append(out.Conflicts, n.ID)
		}
		out.Nodes = append(out.Nodes, v)
	}
	sort.SliceStable(out.Nodes, func(i, j int) bool { return out.Nodes[i].ID < out.Nodes[j].ID })
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) createNode(w http.ResponseWriter, r *http.Request, p principal) {
	var req NodeRequest
	if !decodeBody(w, r, &req) || !nodeParam(w, "id", req.ID, false) || !p.mayWrite(w, "node", req.ID) {
		return
	}
	plan, ok := h.armed(w)
	if !ok {
		return
	}
	n, err := h.DB.CreateNode(plan, req.ID, runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionNodeCreate, n.ID)
	writeJSON(w, http.StatusCreated, runtimeNodeView(n))
}

func (h *handler) deleteNode(w http.ResponseWriter, r *http.Request, p principal) {
	id := r.URL.Query().Get("id")
	if !nodeParam(w, "id", id, false) || !p.mayWrite(w, "node", id) {
		return
	}
	n, err := h.DB.DeleteNode(id, runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionNodeDelete, n.ID)
	writeJSON(w, http.StatusOK, runtimeNodeView(n))
}
