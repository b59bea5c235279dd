package testkit

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestGet returns the status and the body; a server that is gone fails
// the test.
func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte("short and stout " + r.URL.Path))
	}))
	code, body := Get(t, srv.URL+"/pot")
	if code != http.StatusTeapot || body != "short and stout /pot" {
		t.Errorf("%d %q", code, body)
	}
	srv.Close()
	var r recorder
	r.run(func() { Get(&r, srv.URL) })
	if !r.fatal {
		t.Errorf("a server that is gone did not fail the test: %+v", r)
	}
}
