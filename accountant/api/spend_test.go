package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/accountant/spend"
)

// TestSpendWhileTheHistoryIsRead: 503 with Retry-After and the progress,
// never a partial report.
func TestSpendWhileTheHistoryIsRead(t *testing.T) {
	h := New(Deps{AdminToken: adminToken, Spend: func(spend.Query, string) (*spend.Report, error) {
		return nil, &NotReadyError{What: "the spend history", Done: 3 << 20, Total: 12 << 20}
	}})
	req := httptest.NewRequest(http.MethodGet, Prefix+"spend", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	want := `{"error":{"type":"not_ready","message":"the spend history is being read from the ledger since the accountant started (25% of 12 MiB); try again in a few seconds"}}`
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "2" || strings.TrimSpace(w.Body.String()) != want {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	for _, q := range []string{"format=xml", "format=csv&format=json"} {
		req = httptest.NewRequest(http.MethodGet, Prefix+"spend?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		w = httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", q, w.Code, w.Body)
		}
	}
}

// TestSpendNamesKeys: a report grouped by key names the keys that have a
// name, in JSON and in CSV (key_name after key).
func TestSpendNamesKeys(t *testing.T) {
	f := newFixture(t, seed002)
	var named, plain MintedKey
	f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme", Name: "=evil, \"quoted\""}, &named)
	f.must(http.StatusCreated, "POST", Prefix+"keys", adminToken, MintRequest{Owner: "org:acme"}, &plain)
	h := New(Deps{DB: f.db, AdminToken: adminToken, Spend: func(q spend.Query, _ string) (*spend.Report, error) {
		rep := &spend.Report{}
		for _, d := range q.GroupBy {
			rep.GroupBy = append(rep.GroupBy, d.String())
		}
		for _, k := range []string{named.KID, plain.KID, ""} {
			rep.Groups = append(rep.Groups, spend.Group{Key: map[string]string{"key": k}, Series: []spend.Point{{Start: t0}}})
		}
		rep.Groups = append(rep.Groups, spend.Group{Other: true, Groups: 3, Series: []spend.Point{{Start: t0}}})
		return rep, nil
	}})
	get := func(q string) string {
		req := httptest.NewRequest(http.MethodGet, Prefix+"spend?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", q, w.Code, w.Body)
		}
		return w.Body.String()
	}
	if body := get("group_by=key"); !strings.Contains(body, `"key_names":{"`+named.KID+`":"=evil, \"quoted\""}`) {
		t.Errorf("JSON: %s", body)
	}
	csv := get("group_by=key&format=csv")
	lines := strings.Split(csv, "\n")
	if !strings.HasPrefix(lines[0], `"bucket_start","key","key_name","requests",`) ||
		!strings.HasPrefix(lines[1], `"2026-08-14T09:00:00Z","`+named.KID+`","'=evil, ""quoted""",0,`) ||
		!strings.HasPrefix(lines[2], `"2026-08-14T09:00:00Z","`+plain.KID+`","",0,`) || !strings.HasPrefix(lines[4], `"2026-08-14T09:00:00Z","(other)","",0`) {
		t.Errorf("CSV:\n%s", csv)
	}
	if body := get("group_by=model"); strings.Contains(body, "key_names") {
		t.Errorf("a report not grouped by key names keys: %s", body)
	}
}
