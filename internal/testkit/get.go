package testkit

import (
	"net/http"
	"testing"
)

// Get sends GET url (see Send) and returns the answer's status and body.
func Get(tb testing.TB, url string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, body := Send(tb, req)
	return resp.StatusCode, string(body)
}
