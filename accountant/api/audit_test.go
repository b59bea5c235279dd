package api

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestAuditFilters: the audit log read newest first and paged back, by
// action, by action family, by who and by subtree; a delegated admin's
// node= outside its subtree is refused.
func TestAuditFilters(t *testing.T) {
	f := newFixture(t, seed002)
	ml, id := f.delegate("org:acme/team:ml")
	var k MintedKey
	f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme/team:search"}, &k)
	f.must(http.StatusOK, "POST", Prefix+"keys/"+k.KID+"/revoke", adminToken, nil, nil)
	f.must(http.StatusCreated, "POST", Prefix+"keys", ml, MintRequest{Owner: "org:acme/team:ml/user:dev1", Name: "nb"}, nil)
	read := func(token, q string) []string {
		var page AuditPage
		f.must(http.StatusOK, "GET", Prefix+"audit?"+q, token, nil, &page)
		var out []string
		for _, e := range page.Entries {
			out = append(out, e.Who+" "+e.Action+" "+e.Node)
		}
		return out
	}
	for _, c := range []struct {
		token, q, want string
	}{
		{adminToken, "order=desc&limit=2", "" + id + " key.mint org:acme/team:ml/user:dev1|admin key.revoke org:acme/team:search"},
		{adminToken, "action=key.&order=desc", id + " key.mint org:acme/team:ml/user:dev1|admin key.revoke org:acme/team:search|admin key.mint org:acme/team:search"},
		{adminToken, "action=key.revoke", "admin key.revoke org:acme/team:search"},
		{adminToken, "who=" + id, id + " key.mint org:acme/team:ml/user:dev1"},
		{adminToken, "node=org:acme/team:search", "admin key.mint org:acme/team:search|admin key.revoke org:acme/team:search"},
		{ml, "", "admin admin.create org:acme/team:ml|" + id + " key.mint org:acme/team:ml/user:dev1"},
	} {
		if got := strings.Join(read(c.token, c.q), "|"); got != c.want {
			t.Errorf("audit?%s: %s\nwant %s", c.q, got, c.want)
		}
	}
	var page AuditPage
	f.must(http.StatusOK, "GET", Prefix+"audit?order=desc&limit=1", adminToken, nil, &page)
	last := page.Next
	f.must(http.StatusOK, "GET", Prefix+"audit?order=desc&limit=1&before="+itoa(last), adminToken, nil, &page)
	if len(page.Entries) != 1 || page.Entries[0].Seq != last-1 {
		t.Errorf("paging back from %d: %+v", last, page)
	}
	f.wantError("GET", Prefix+"audit?node=org:acme/team:search", ml, nil, http.StatusForbidden, "forbidden",
		`node "org:acme/team:search" is outside the subtree of delegated admin `+id+` (scope org:acme/team:ml); ask an admin, or an admin of that subtree`)
	f.wantError("GET", Prefix+"audit?order=up", adminToken, nil, http.StatusBadRequest, "invalid_request", `order="up" is not asc or desc`)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
