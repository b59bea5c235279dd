package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestWritesLimitedPerAdmin: each admin may make DefaultWriteBurst writes
// at once and DefaultWriteRate a second after that; a write past it is
// answered 429 with Retry-After and writes nothing; another admin's
// bucket is its own, and reads are never limited. Before, a delegated
// admin could mint keys as fast as it could send them.
func TestWritesLimitedPerAdmin(t *testing.T) {
	f := newFixture(t, seed002)
	ml, _ := f.delegate("org:acme/team:ml") // the admin token's first write
	for i := 1; i < DefaultWriteBurst; i++ {
		f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme"}, nil)
	}
	mint := func(token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", Prefix+"keys", strings.NewReader(`{"owner":"org:acme/team:ml"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, req)
		return w
	}
	w := mint(adminToken)
	want := `{"error":{"type":"rate_limited","message":"POST /tt/api/v1/keys: admin admin made more writes than the management API takes (200 at once, then 20 a second per admin); retry after 1 s"}}`
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || strings.TrimSpace(w.Body.String()) != want {
		t.Fatalf("write %d: %d Retry-After %q %s", DefaultWriteBurst+1, w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	var list KeyList
	f.must(http.StatusOK, "GET", Prefix+"keys", adminToken, nil, &list) // reads go on
	if len(list.Keys) != DefaultWriteBurst-1 {
		t.Errorf("%d keys, want the %d minted before the limit", len(list.Keys), DefaultWriteBurst-1)
	}
	if w := mint(ml); w.Code != http.StatusCreated {
		t.Errorf("another admin's write: %d %s", w.Code, w.Body)
	}
	// A second later, twenty more.
	f.now = f.now.Add(time.Second)
	for i := 0; i < DefaultWriteRate; i++ {
		if w := mint(adminToken); w.Code != http.StatusCreated {
			t.Fatalf("write %d of the next second: %d %s", i+1, w.Code, w.Body)
		}
	}
	if w := mint(adminToken); w.Code != http.StatusTooManyRequests {
		t.Errorf("write %d of the next second: %d", DefaultWriteRate+1, w.Code)
	}
}
