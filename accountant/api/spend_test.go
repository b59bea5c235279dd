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
