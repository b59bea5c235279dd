package api

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNodes(t *testing.T) {
	f := newFixture(t, seed002)
	f.must(http.StatusCreated, "POST", Prefix+"nodes", adminToken, NodeRequest{ID: "org:acme/team:infra"}, nil)
	f.must(http.StatusCreated, "POST", Prefix+"nodes", adminToken, NodeRequest{ID: "org:beta"}, nil)
	f.wantError("POST", Prefix+"nodes", adminToken, NodeRequest{ID: "org:acme/team:ml"}, http.StatusConflict, "conflict",
		`node "org:acme/team:ml" is declared in the config's tenants and is already in force; no runtime node was created`)
	f.wantError("POST", Prefix+"nodes", adminToken, NodeRequest{ID: "org:beta"}, http.StatusConflict, "conflict",
		`node "org:beta" already exists in the runtime plane`)
	f.wantError("POST", Prefix+"nodes", adminToken, NodeRequest{ID: "org:gamma/team:x"}, http.StatusBadRequest, "invalid_request",
		`parent node "org:gamma" of "org:gamma/team:x" does not exist; create "org:gamma" first`)
	if !f.armed.Load().HasNode("org:beta") {
		t.Fatal("the armed tree does not hold the new runtime node after Changed")
	}

	// The config now declares infra too: the runtime row collides.
	src, err := os.ReadFile(seed002)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "reloaded.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(string(src), "teams: [ml, search]", "teams: [ml, search, infra]", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	f.plan = compileFile(t, path)
	f.arm()

	b := f.must(http.StatusOK, "GET", Prefix+"nodes", adminToken, nil, nil)
	want := `{"nodes":[` +
		`{"id":"org:acme","source":"config"},` +
		`{"id":"org:acme/team:infra","source":"config"},` +
		`{"id":"org:acme/team:infra","source":"runtime","created_at":"2026-08-14T09:00:00Z","created_by":"admin","conflict":` + jsonString(conflictText("org:acme/team:infra")) + `},` +
		`{"id":"org:acme/team:ml","source":"config"},` +
		`{"id":"org:acme/team:ml/user:dev1","source":"config"},` +
		`{"id":"org:acme/team:ml/user:dev2","source":"config"},` +
		`{"id":"org:acme/team:search","source":"config"},` +
		`{"id":"org:beta","source":"runtime","created_at":"2026-08-14T09:00:00Z","created_by":"admin"}` +
		`],"conflicts":["org:acme/team:infra"]}` + "\n"
	if string(b) != want {
		t.Fatalf("GET nodes\n%s\nwant\n%s", b, want)
	}
	if !strings.Contains(conflictText("org:acme/team:infra"), "DELETE /tt/api/v1/nodes?id=org:acme/team:infra") {
		t.Fatal("the conflict does not say how to remove the runtime row")
	}

	// A delegated admin sees its subtree only.
	tok, _ := f.delegate("org:acme/team:ml")
	b = f.must(http.StatusOK, "GET", Prefix+"nodes", tok, nil, nil)
	want = `{"nodes":[{"id":"org:acme/team:ml","source":"config"},{"id":"org:acme/team:ml/user:dev1","source":"config"},{"id":"org:acme/team:ml/user:dev2","source":"config"}],"conflicts":[]}` + "\n"
	if string(b) != want {
		t.Fatalf("delegated GET nodes\n%s\nwant\n%s", b, want)
	}

	// Delete when unused; in use is a conflict that says what to do.
	var k MintedKey
	f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:beta"}, &k)
	f.wantError("DELETE", Prefix+"nodes?id=org:beta", adminToken, nil, http.StatusConflict, "conflict",
		`node "org:beta" is still in use (1 live key); delete its child nodes, revoke its keys and admins and delete its overrides first`)
	f.must(http.StatusOK, "POST", Prefix+"keys/"+k.KID+"/revoke", adminToken, nil, nil)
	f.must(http.StatusOK, "DELETE", Prefix+"nodes?id=org:beta", adminToken, nil, nil)
	f.wantError("DELETE", Prefix+"nodes?id=org:beta", adminToken, nil, http.StatusNotFound, "not_found",
		`no runtime node "org:beta"; a node declared in the config is removed by editing its tenants`)
	f.must(http.StatusOK, "DELETE", Prefix+"nodes?id=org:acme/team:infra", adminToken, nil, nil)
	if f.armed.Load().HasNode("org:beta") {
		t.Fatal("the armed tree still holds a deleted runtime node")
	}
}
