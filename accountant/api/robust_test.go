package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestWrongMethodIs405: a path the API serves, called with a method it does
// not take, is a 405 whose Allow and message name the methods it takes; a
// path it does not serve stays a 404.
func TestWrongMethodIs405(t *testing.T) {
	f := newFixture(t, seed002)
	for _, c := range []struct{ method, path, allow string }{
		{"PATCH", Prefix + "nodes", "GET, POST, DELETE"},
		{"PUT", Prefix + "keys", "GET, POST"},
		{"DELETE", Prefix + "keys/vk_aaaaaaaaaaaa", "GET"},
		{"GET", Prefix + "keys/vk_aaaaaaaaaaaa/revoke", "POST"},
		{"GET", Prefix + "reload", "POST"},
		{"POST", Prefix + "audit", "GET"},
	} {
		req, _ := http.NewRequest(c.method, c.path, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		w := &headerRecorder{h: http.Header{}}
		f.h.ServeHTTP(w, req)
		if w.code != http.StatusMethodNotAllowed || w.h.Get("Allow") != c.allow ||
			!strings.Contains(w.body.String(), "this route takes "+c.allow) {
			t.Errorf("%s %s: %d Allow %q %s", c.method, c.path, w.code, w.h.Get("Allow"), w.body.String())
		}
	}
	f.wantError("GET", Prefix+"nope", adminToken, nil, http.StatusNotFound, "not_found",
		"no route GET /tt/api/v1/nope; the management API serves, under /tt/api/v1/: "+routeList)
}

// TestBodyProblems: an oversized body is a 413, an empty one a 400 saying
// it is empty (not a bare "EOF").
func TestBodyProblems(t *testing.T) {
	f := newFixture(t, seed002)
	big := `{"id":"` + strings.Repeat("a", maxBody) + `"}`
	f.wantError("POST", Prefix+"nodes", adminToken, big, http.StatusRequestEntityTooLarge, "too_large",
		"the request body is over 1048576 bytes; management writes are small JSON objects")
	f.wantError("POST", Prefix+"nodes", adminToken, " \n", http.StatusBadRequest, "invalid_request",
		"the request body is empty; POST /tt/api/v1/nodes takes a JSON object")
}

type headerRecorder struct {
	h    http.Header
	code int
	body strings.Builder
}

func (r *headerRecorder) Header() http.Header { return r.h }
func (r *headerRecorder) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
}
func (r *headerRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.Write(b)
}
