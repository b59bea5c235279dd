package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestAdmins(t *testing.T) {
	f := newFixture(t, seed002)
	var c CreatedAdmin
	raw := f.must(http.StatusCreated, "POST", Prefix+"admins", adminToken, AdminRequest{Scope: "org:acme/team:ml"}, &c)
	if !strings.HasPrefix(c.Token, "tt-adm_") || c.Scope != "org:acme/team:ml" || c.Note != AdminNote {
		t.Fatalf("created %+v", c)
	}
	var list AdminList
	b := f.must(http.StatusOK, "GET", Prefix+"admins", adminToken, nil, &list)
	if strings.Contains(string(b), c.Token[len("tt-adm_")+13:]) || len(list.Admins) != 1 || list.Admins[0].ID != c.ID {
		t.Fatalf("GET admins %s (created %s)", b, raw)
	}
	f.wantError("POST", Prefix+"admins", adminToken, AdminRequest{Scope: "org:zeta"}, http.StatusBadRequest, "invalid_request",
		`scope "org:zeta" is not a node of the tenancy tree; declare it in the config's tenants or create it with POST /tt/api/v1/nodes first`)
	f.wantError("POST", Prefix+"admins", adminToken, AdminRequest{Scope: "org:acme/../org:zeta"}, http.StatusBadRequest, "invalid_request",
		"scope: "+nodeIDError("org:acme/../org:zeta"))
	f.must(http.StatusOK, "GET", Prefix+"keys", c.Token, nil, nil)
	f.must(http.StatusOK, "POST", Prefix+"admins/"+c.ID+"/revoke", adminToken, nil, nil)
	f.wantError("GET", Prefix+"keys", c.Token, nil, http.StatusUnauthorized, "unauthorized",
		"the bearer token is neither the admin token nor a live delegated admin token; check TT_ADMIN_TOKEN, or ask an admin for a new delegated token")
}

func TestAuditPaged(t *testing.T) {
	f := newFixture(t, seed002)
	ml, mlID := f.delegate("org:acme/team:ml")
	f.must(http.StatusCreated, "POST", Prefix+"nodes", adminToken, NodeRequest{ID: "org:beta"}, nil)
	f.must(http.StatusCreated, "POST", Prefix+"keys", ml, MintRequest{Owner: "org:acme/team:ml/user:dev1"}, nil)
	f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:beta"}, nil)
	f.must(http.StatusCreated, "POST", Prefix+"nodes", ml, NodeRequest{ID: "org:acme/team:ml/user:dev3"}, nil)

	var p AuditPage
	f.must(http.StatusOK, "GET", Prefix+"audit?limit=2", adminToken, nil, &p)
	if len(p.Entries) != 2 || p.Entries[0].Action != "admin.create" || p.Entries[1].Action != "node.create" || p.Next != 2 {
		t.Fatalf("page 1: %+v", p)
	}
	f.must(http.StatusOK, "GET", Prefix+"audit?after=2&limit=2", adminToken, nil, &p)
	if len(p.Entries) != 2 || p.Entries[0].Seq != 3 || p.Entries[0].Who != mlID || p.Next != 4 {
		t.Fatalf("page 2: %+v", p)
	}
	f.must(http.StatusOK, "GET", Prefix+"audit?after=4", adminToken, nil, &p)
	if len(p.Entries) != 1 || p.Entries[0].Seq != 5 || p.Next != 5 {
		t.Fatalf("page 3: %+v", p)
	}
	f.must(http.StatusOK, "GET", Prefix+"audit?after=5", adminToken, nil, &p)
	if len(p.Entries) != 0 || p.Next != 5 {
		t.Fatalf("past the end: %+v", p)
	}
	// The delegated admin reads its own subtree's entries: its admin row,
	// the key it minted and the node it created.
	f.must(http.StatusOK, "GET", Prefix+"audit", ml, nil, &p)
	if len(p.Entries) != 3 || p.Entries[0].Action != "admin.create" || p.Entries[1].Action != "key.mint" || p.Entries[2].Action != "node.create" {
		t.Fatalf("delegated audit: %+v", p)
	}
	f.wantError("GET", Prefix+"audit?limit=0", adminToken, nil, http.StatusBadRequest, "invalid_request", "limit=0 is out of range; ask for 1 to 1000 entries")
	f.wantError("GET", Prefix+"audit?after=x", adminToken, nil, http.StatusBadRequest, "invalid_request", `after="x" is not a non-negative integer`)
}

func TestReload(t *testing.T) {
	f := newFixture(t, seed002)
	b := f.must(http.StatusOK, "POST", Prefix+"reload", adminToken, nil, nil)
	if string(b) != `{"reloaded":true,"note":"`+ReloadNote+`"}`+"\n" {
		t.Fatalf("reload answer %s", b)
	}
	if f.reloadBy != "admin" {
		t.Fatalf("the reload was asked for as %q, want admin (its audit entry names who)", f.reloadBy)
	}
	f.reload = errors.New(`governance.limits[0].attach: must set exactly one of {node, level}`)
	f.wantError("POST", Prefix+"reload", adminToken, nil, http.StatusConflict, "reload_failed",
		"the config was not reloaded and the plan armed before stays in force: governance.limits[0].attach: must set exactly one of {node, level}; fix the config file and POST /tt/api/v1/reload again")
	if f.changed.Load() != 0 {
		t.Fatal("reload called Changed")
	}
}

func TestNotArmed(t *testing.T) {
	f := newFixture(t, seed002)
	f.armed.Store(nil)
	const msg = "no governance plan is armed (the config did not compile); fix the config file and POST /tt/api/v1/reload"
	f.wantError("POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme"}, http.StatusServiceUnavailable, "not_armed", msg)
	f.wantError("POST", Prefix+"nodes", adminToken, NodeRequest{ID: "org:beta"}, http.StatusServiceUnavailable, "not_armed", msg)
	f.wantError("PUT", Prefix+"overrides", adminToken, OverrideRequest{LimitID: "org_monthly_budget", Node: "org:acme", AmountUSD: usdPtr("1")}, http.StatusServiceUnavailable, "not_armed", msg)
	f.wantError("GET", Prefix+"governance/limits", adminToken, nil, http.StatusServiceUnavailable, "not_armed", msg)
	f.must(http.StatusOK, "GET", Prefix+"keys", adminToken, nil, nil)
	f.must(http.StatusOK, "GET", Prefix+"nodes", adminToken, nil, nil)
}

func TestUnknownRoute(t *testing.T) {
	f := newFixture(t, seed002)
	f.wantError("PATCH", Prefix+"keys", adminToken, nil, http.StatusMethodNotAllowed, "method_not_allowed",
		"PATCH /tt/api/v1/keys: method not allowed; this route takes GET, POST")
	f.wantError("GET", Prefix+"nope", "", nil, http.StatusNotFound, "not_found",
		"no route GET /tt/api/v1/nope; the management API serves, under /tt/api/v1/: "+routeList)
}
