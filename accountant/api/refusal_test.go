package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
)

// TestRefusalsAreAudited: a delegated admin's 403 escape and a wrong
// token's 401 are logged, counted and written to the audit log (who, the
// route, the status, the reason, a fingerprint of the token, never the
// token); a flood is audited MaxRefusalAudits a minute, counted whole,
// and summed up in one line when the minute ends.
func TestRefusalsAreAudited(t *testing.T) {
	f := newFixture(t, seed002)
	var logs bytes.Buffer
	counted := map[int]int{}
	h := f.h.(*handler)
	h.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h.Refused = func(status int) { counted[status]++ }
	ml, id := f.delegate("org:acme/team:ml")

	f.do("POST", Prefix+"keys", ml, MintRequest{Owner: "org:acme/team:search/user:x"})
	f.do("GET", Prefix+"admins", ml, nil)
	const wrong = "not-the-admin-token-at-all"
	f.do("GET", Prefix+"keys", wrong, nil)
	if counted[403] != 2 || counted[401] != 1 {
		t.Fatalf("counted %v; want two 403 and one 401", counted)
	}
	var page struct{ Entries []runtime.AuditEntry }
	f.must(http.StatusOK, "GET", Prefix+"audit", adminToken, nil, &page)
	var got []string
	for _, e := range page.Entries {
		if e.Action != runtime.ActionAPIRefused {
			continue
		}
		var r runtime.Refusal
		json.Unmarshal(e.After, &r)
		got = append(got, e.Who+" "+e.Target+" "+e.Node+" "+r.Token+" "+strings.Fields(r.Reason)[0])
		if strings.Contains(string(e.After), wrong) {
			t.Errorf("the audit entry holds the token: %s", e.After)
		}
	}
	want := []string{
		id + " POST /tt/api/v1/keys org:acme/team:ml  owner",
		id + " GET /tt/api/v1/admins org:acme/team:ml  GET",
		"unauthenticated GET /tt/api/v1/keys __global sha256:" + fingerprint(wrong) + " the",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audited refusals:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l := logs.String(); strings.Count(l, "management API: refused") != 3 || strings.Contains(l, wrong) {
		t.Errorf("log:\n%s", l)
	}

	// A flood of wrong tokens.
	logs.Reset()
	for range 200 {
		f.do("GET", Prefix+"keys", wrong, nil)
	}
	if counted[401] != 201 {
		t.Errorf("counted %d 401s; want 201", counted[401])
	}
	f.must(http.StatusOK, "GET", Prefix+"audit", adminToken, nil, &page)
	n := 0
	for _, e := range page.Entries {
		if e.Action == runtime.ActionAPIRefused {
			n++
		}
	}
	if n != MaxRefusalAudits {
		t.Errorf("%d refusals audited in a minute; want %d", n, MaxRefusalAudits)
	}
	f.now = f.now.Add(time.Minute)
	f.do("GET", Prefix+"keys", wrong, nil)
	if l := logs.String(); strings.Count(l, "management API: refused") != MaxRefusalAudits-3+1 || !strings.Contains(l, "held_back=173") {
		t.Errorf("log after the flood:\n%s", l)
	}
}

func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:4])
}
