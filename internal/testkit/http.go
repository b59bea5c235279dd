package testkit

import (
	"io"
	"net/http"
	"testing"
)

// Send sends req with http.DefaultClient, failing the test if it could not
// be sent, and returns the response with as much of its body as could be
// read (the body is closed).
func Send(tb testing.TB, req *http.Request) (*http.Response, []byte) {
	tb.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body
}
