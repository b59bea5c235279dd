package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestAuthRefusesBadTokens(t *testing.T) {
	f := newFixture(t, seed002)
	tok, id := f.delegate("org:acme/team:ml")
	f.must(http.StatusOK, "POST", Prefix+"admins/"+id+"/revoke", adminToken, nil, nil)

	const bad = "the bearer token is neither the admin token nor a live delegated admin token; check TT_ADMIN_TOKEN, or ask an admin for a new delegated token"
	for i, c := range []struct {
		header string
		msg    string
	}{
		{"", "missing bearer token; send Authorization: Bearer <token> with the admin token or a delegated admin token"},
		{"Basic YWRtaW46YWRtaW4=", "the Authorization header is not a bearer token; send Authorization: Bearer <token>"},
		{"Bearer", "the Authorization header is not a bearer token; send Authorization: Bearer <token>"},
		{"Bearer ", "the Authorization header is not a bearer token; send Authorization: Bearer <token>"},
		{"Bearer " + adminToken + "x", bad},
		{"Bearer " + adminToken[:len(adminToken)-1], bad},
		{"Bearer tt-adm_000000000000-00000000000000000000000000000000", bad},
		{"Bearer " + tok, bad}, // revoked
	} {
		var hs []string
		if c.header != "" {
			hs = []string{c.header}
		}
		rec := f.getKeys(hs...)
		want := `{"error":{"type":"unauthorized","message":` + jsonString(c.msg) + "}}\n"
		if rec.Code != http.StatusUnauthorized || rec.Body.String() != want {
			t.Errorf("step %d: %q → %d %s\nwant 401 %s", i, c.header, rec.Code, rec.Body, want)
		}
	}
	// "bearer" in any case is the scheme.
	if rec := f.getKeys("bearer " + adminToken); rec.Code != http.StatusOK {
		t.Fatalf("lowercase bearer scheme: %d %s", rec.Code, rec.Body)
	}
}

// getKeys is GET keys with each of headers as an Authorization header.
func (f *fixture) getKeys(headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", Prefix+"keys", nil)
	for _, h := range headers {
		req.Header.Add("Authorization", h)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec
}

// TestAuthRefusesTwoDifferentHeaders: two different Authorization headers
// are refused whichever comes first, as the gateway refuses two different
// credentials; the same token twice is one token.
func TestAuthRefusesTwoDifferentHeaders(t *testing.T) {
	f := newFixture(t, seed002)
	const msg = "the request carries 2 Authorization headers with different values; send one"
	for i, hs := range [][]string{
		{"Bearer " + adminToken, "Bearer wrong"},
		{"Bearer wrong", "Bearer " + adminToken},
		{"Bearer " + adminToken, "Basic YWRtaW46YWRtaW4="},
	} {
		rec := f.getKeys(hs...)
		want := `{"error":{"type":"unauthorized","message":` + jsonString(msg) + "}}\n"
		if rec.Code != http.StatusUnauthorized || rec.Body.String() != want {
			t.Errorf("step %d: %q → %d %s\nwant 401 %s", i, hs, rec.Code, rec.Body, want)
		}
	}
	if rec := f.getKeys("Bearer "+adminToken, "Bearer "+adminToken); rec.Code != http.StatusOK {
		t.Fatalf("the admin token twice: %d %s", rec.Code, rec.Body)
	}
}

func TestAuthWithoutAdminToken(t *testing.T) {
	f := newFixture(t, seed002)
	f.h = New(Deps{DB: f.db, Armed: f.armed.Load})
	f.wantError("GET", Prefix+"keys", "anything", nil, http.StatusUnauthorized, "unauthorized",
		"the bearer token is not a live delegated admin token, and no admin token is configured on this accountant (set TT_ADMIN_TOKEN where it runs)")
	f.wantError("GET", Prefix+"keys", "", nil, http.StatusUnauthorized, "unauthorized",
		"missing bearer token; send Authorization: Bearer <token> with the admin token or a delegated admin token")
}

// TestDelegatedSubtree: a delegated admin of org:acme/team:ml acts on its
// subtree, is refused outside it with 403, and every node id is
// charset-checked before it is compared, so ".." cannot climb out.
func TestDelegatedSubtree(t *testing.T) {
	f := newFixture(t, overridesConfig)
	ml, mlID := f.delegate("org:acme/team:ml")
	acme, _ := f.delegate("org:acme")

	// In the subtree.
	var n NodeView
	f.must(http.StatusCreated, "POST", Prefix+"nodes", ml, NodeRequest{ID: "org:acme/team:ml/user:dev3"}, &n)
	if n.ID != "org:acme/team:ml/user:dev3" || n.Source != "runtime" || n.CreatedBy != mlID || !n.CreatedAt.Equal(t0) {
		t.Fatalf("created %+v", n)
	}
	var k MintedKey
	f.must(http.StatusCreated, "POST", Prefix+"keys", ml, MintRequest{Owner: "org:acme/team:ml/user:dev3"}, &k)
	f.must(http.StatusCreated, "POST", Prefix+"keys", ml, MintRequest{Owner: "org:acme/team:ml"}, nil)
	f.must(http.StatusOK, "GET", Prefix+"keys/"+k.KID, ml, nil, nil)
	f.must(http.StatusOK, "GET", Prefix+"keys?owner=org:acme/team:ml/user:dev3", ml, nil, nil)

	// Out of the subtree: siblings, parents, and an id that shares a prefix
	// but not a whole segment.
	outside := func(field, node string) string {
		return field + ` "` + node + `" is outside the subtree of delegated admin ` + mlID + " (scope org:acme/team:ml); ask an admin, or an admin of that subtree"
	}
	f.wantError("POST", Prefix+"nodes", ml, NodeRequest{ID: "org:acme/team:search/user:x"}, http.StatusForbidden, "forbidden", outside("node", "org:acme/team:search/user:x"))
	f.wantError("POST", Prefix+"nodes", ml, NodeRequest{ID: "org:acme/team:mlops"}, http.StatusForbidden, "forbidden", outside("node", "org:acme/team:mlops"))
	f.wantError("POST", Prefix+"keys", ml, MintRequest{Owner: "org:acme"}, http.StatusForbidden, "forbidden", outside("owner", "org:acme"))
	f.wantError("POST", Prefix+"keys", ml, MintRequest{Owner: "org:acme/team:search"}, http.StatusForbidden, "forbidden", outside("owner", "org:acme/team:search"))
	f.wantError("GET", Prefix+"keys?owner=org:acme", ml, nil, http.StatusForbidden, "forbidden", outside("owner", "org:acme"))
	f.wantError("PUT", Prefix+"overrides", ml, OverrideRequest{LimitID: "team_daily_requests", Node: "org:acme/team:search", Amount: ptr(int64(5))},
		http.StatusForbidden, "forbidden", outside("node", "org:acme/team:search"))
	f.wantError("PUT", Prefix+"overrides", ml, OverrideRequest{LimitID: "team_daily_requests", Node: "__global", Amount: ptr(int64(5))},
		http.StatusForbidden, "forbidden", outside("node", "__global"))
	// Its own scope: keys yes, caps no.
	f.wantError("PUT", Prefix+"overrides", ml, OverrideRequest{LimitID: "team_daily_requests", Node: "org:acme/team:ml", Amount: ptr(int64(5))},
		http.StatusForbidden, "forbidden", `node "org:acme/team:ml" is the scope of delegated admin `+mlID+" itself; a delegated admin writes only below its scope, so ask an admin for this one")
	// The admin of the org above may.
	f.must(http.StatusOK, "PUT", Prefix+"overrides", acme, OverrideRequest{LimitID: "team_daily_requests", Node: "org:acme/team:ml", Amount: ptr(int64(5))}, nil)

	var ks KeyList
	f.must(http.StatusOK, "GET", Prefix+"keys", adminToken, nil, &ks)
	var searchKey MintedKey
	f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme/team:search"}, &searchKey)
	keyOutside := "key " + searchKey.KID + ` is owned by "org:acme/team:search", outside the subtree of delegated admin ` + mlID + " (scope org:acme/team:ml); ask an admin"
	f.wantError("GET", Prefix+"keys/"+searchKey.KID, ml, nil, http.StatusForbidden, "forbidden", keyOutside)
	f.wantError("POST", Prefix+"keys/"+searchKey.KID+"/revoke", ml, nil, http.StatusForbidden, "forbidden", keyOutside)
	var mine KeyList
	f.must(http.StatusOK, "GET", Prefix+"keys", ml, nil, &mine)
	if len(mine.Keys) != 2 {
		t.Fatalf("delegated list shows %d keys, want its 2: %+v", len(mine.Keys), mine.Keys)
	}

	// ".." and other out-of-charset ids are refused before any comparison.
	for _, c := range []struct{ method, path, field, node string }{
		{"POST", Prefix + "nodes", "id", "org:acme/team:ml/../../team:search"},
		{"POST", Prefix + "nodes", "id", "org:acme/team:ml/.."},
		{"POST", Prefix + "keys", "owner", "org:acme/team:ml/../team:search"},
		{"PUT", Prefix + "overrides", "node", "org:acme/team:ml/../team:search"},
		{"DELETE", Prefix + "nodes?id=org:acme/team:ml/../team:search", "id", "org:acme/team:ml/../team:search"},
		{"GET", Prefix + "keys?owner=org:acme/team:ml/..", "owner", "org:acme/team:ml/.."},
		{"POST", Prefix + "keys", "owner", "org:acme/team:ML"},
	} {
		var body any
		switch c.field {
		case "owner":
			if c.method == "POST" {
				body = MintRequest{Owner: c.node}
			}
		case "node":
			body = OverrideRequest{LimitID: "team_daily_requests", Node: c.node, Amount: ptr(int64(1))}
		case "id":
			if c.method == "POST" {
				body = NodeRequest{ID: c.node}
			}
		}
		for _, tok := range []string{ml, adminToken} {
			f.wantError(c.method, c.path, tok, body, http.StatusBadRequest, "invalid_request", c.field+": "+nodeIDError(c.node))
		}
	}

	// Admin-only routes.
	for _, c := range []struct{ method, path string }{
		{"POST", Prefix + "admins"}, {"GET", Prefix + "admins"}, {"POST", Prefix + "admins/" + mlID + "/revoke"}, {"POST", Prefix + "reload"},
	} {
		f.wantError(c.method, c.path, ml, nil, http.StatusForbidden, "forbidden",
			c.method+" "+c.path+" needs the admin token; delegated admin "+mlID+" (scope org:acme/team:ml) cannot call it")
	}
}

func ptr[T any](v T) *T { return &v }
