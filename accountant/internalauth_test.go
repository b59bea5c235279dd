package accountant

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// TestInternalPlaneNeedsTheToken: ingest, sync and gate alerts answer 401
// to a call without the internal token, with a wrong one, with two, or
// with another scheme, and count nothing: no row, no replica (so made-up
// replica names cannot shrink a share cap), no dropped rows. Each refusal
// is counted in a metric; the log gets one line per interval, not one per
// call. The admin token is not the internal token.
func TestInternalPlaneNeedsTheToken(t *testing.T) {
	f := newFixture(t, testConfig)
	rows := batch(row(reqID(1), t0, "org:acme/team:ml", "gpt-4o-mini", 1000, 1000))
	alert := []byte(`{"limit_id":"team_tpm","limit_type":"tpm","node":"org:acme/team:ml","counter":"c","threshold":0.9,"window":"1m0s","observed":1,"limit":2,"at":"2026-08-10T12:00:30Z"}` + "\n")
	calls := []struct {
		method, path string
		body         []byte
	}{
		{http.MethodPost, syncwire.IngestPath + "?replica=evil&dropped=" + strconv.FormatInt(math.MaxInt64, 10), rows},
		{http.MethodGet, syncwire.SyncPath + "?replica=made-up-1", nil},
		{http.MethodGet, syncwire.SyncPath + "?replica=made-up-2&dropped=7", nil},
		{http.MethodPost, syncwire.AlertsPath, alert},
	}
	auths := []struct {
		name    string
		headers []string
		want    string
	}{
		{"none", nil, "missing internal token: the accountant's internal endpoints take Authorization: Bearer <token>"},
		{"empty", []string{""}, "missing internal token"},
		{"wrong", []string{"Bearer not-the-token"}, "the bearer token is not this accountant's internal token; give the filter the token the accountant was started with (TT_ACCOUNTANT_TOKEN or --internal-token-file) as accountant.token or accountant.token_env"},
		{"admin", []string{"Bearer admin-secret"}, "is not this accountant's internal token"},
		{"prefix", []string{"Bearer " + testInternalToken[:len(testInternalToken)-1]}, "is not this accountant's internal token"},
		{"basic", []string{"Basic " + testInternalToken}, "the Authorization header is not a bearer token"},
		{"two", []string{"Bearer " + testInternalToken, "Bearer " + testInternalToken}, "more than one Authorization header"},
	}
	refused := 0
	for _, c := range calls {
		for _, a := range auths {
			req := httptest.NewRequest(c.method, c.path, bytes.NewReader(c.body))
			for _, h := range a.headers {
				req.Header.Add("Authorization", h)
			}
			w := httptest.NewRecorder()
			f.s.Handler().ServeHTTP(w, req)
			refused++
			var e struct {
				Error struct{ Message string } `json:"error"`
			}
			json.Unmarshal(w.Body.Bytes(), &e)
			if w.Code != http.StatusUnauthorized || !strings.Contains(e.Error.Message, a.want) {
				t.Errorf("%s %s, %s: %d %s, want 401 with %q", c.method, c.path, a.name, w.Code, w.Body, a.want)
			}
			if got := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Errorf("%s %s, %s: WWW-Authenticate %q", c.method, c.path, a.name, got)
			}
		}
	}

	// Nothing was counted: the one authenticated poll below is the only
	// replica, and the snapshot has no spend.
	s := f.sync(t, "replica=real")
	if s.Replicas != 1 {
		t.Errorf("live replicas after unauthenticated polls under made-up names: %d, want 1 (the authenticated one)", s.Replicas)
	}
	for _, e := range s.Snapshot.Entries {
		if e.Value != 0 {
			t.Errorf("an unauthenticated ingest was counted: %+v", e)
		}
	}
	if got := f.s.droppedReported(); got != 0 {
		t.Errorf("dropped rows reported by unauthenticated calls: %d", got)
	}
	_, metrics := f.do(t, http.MethodGet, "/metrics", nil)
	total := 0.0
	for _, line := range strings.Split(string(metrics), "\n") {
		if strings.HasPrefix(line, "tt_accountant_internal_unauthorized_total{") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			total += v
		}
	}
	if total != float64(refused) {
		t.Errorf("tt_accountant_internal_unauthorized_total sums to %v, want %d", total, refused)
	}
	if n := strings.Count(f.logs.String(), "refused an internal call"); n != 1 {
		t.Errorf("%d log lines for %d refused calls within one interval, want 1:\n%s", n, refused, f.logs)
	}
}

// TestDroppedRowsSumSaturates: replicas reporting huge dropped counts sum
// to the largest int64, never to a wrapped negative number.
func TestDroppedRowsSumSaturates(t *testing.T) {
	f := newFixture(t, testConfig)
	big := strconv.FormatInt(math.MaxInt64-1, 10)
	f.sync(t, "replica=a&dropped="+big)
	f.sync(t, "replica=b&dropped="+big)
	f.sync(t, "replica=c&dropped=5")
	if got := f.s.droppedReported(); got != math.MaxInt64 {
		t.Errorf("dropped rows summed to %d, want %d", got, int64(math.MaxInt64))
	}
}

// TestInternalTokenAccepted: the token is all an internal call needs, in
// any case of the scheme.
func TestInternalTokenAccepted(t *testing.T) {
	f := newFixture(t, testConfig)
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		req := httptest.NewRequest(http.MethodGet, syncwire.SyncPath, nil)
		req.Header.Set("Authorization", scheme+" "+testInternalToken)
		w := httptest.NewRecorder()
		f.s.Handler().ServeHTTP(w, req)
		var s syncwire.Sync
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &s) != nil || s.Plan.Version == "" {
			t.Errorf("%s: %d %s", scheme, w.Code, w.Body)
		}
	}
}
