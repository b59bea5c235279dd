package api

import (
	"net/http"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
)

// AdminRequest is the body of POST admins: the node whose subtree the new
// delegated admin manages.
type AdminRequest struct {
	Scope string `json:"scope"`
}

// CreatedAdmin answers POST admins: the delegated admin's token, shown this
// once, and its details.
type CreatedAdmin struct {
	Token     string    `json:"token"`
	ID        string    `json:"id"`
	Scope     string    `json:"scope"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	Note      string    `json:"note"`
}

// AdminNote is the note every CreatedAdmin carries.
const AdminNote = "the token is shown once, now; only its SHA-256 is stored. It manages nodes, overrides and keys below its scope, and mints keys at its scope"

// AdminList answers GET admins.
type AdminList struct {
	Admins []runtime.Admin `json:"admins"`
}

func (h *handler) createAdmin(w http.ResponseWriter, r *http.Request, p principal) {
	var req AdminRequest
	if !decodeBody(w, r, &req) || !nodeParam(w, "scope", req.Scope, false) {
		return
	}
	plan, ok := h.armed(w)
	if !ok {
		return
	}
	tok, a, err := h.DB.CreateAdmin(plan, req.Scope, runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionAdminCreate, a.ID)
	writeJSON(w, http.StatusCreated, CreatedAdmin{Token: tok, ID: a.ID, Scope: a.Scope,
		CreatedAt: a.CreatedAt, CreatedBy: a.CreatedBy, Note: AdminNote})
}

func (h *handler) listAdmins(w http.ResponseWriter, r *http.Request, p principal) {
	admins, err := h.DB.Admins()
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if admins == nil {
		admins = []runtime.Admin{}
	}
	writeJSON(w, http.StatusOK, AdminList{Admins: admins})
}

func (h *handler) revokeAdmin(w http.ResponseWriter, r *http.Request, p principal) {
	a, err := h.DB.RevokeAdmin(r.PathValue("id"), runtime.Stamp{Who: p.who, At: h.Now()})
	if err != nil {
		h.writeRefusal(w, r, err)
		return
	}
	h.wrote(p, runtime.ActionAdminRevoke, a.ID)
	writeJSON(w, http.StatusOK, a)
}
