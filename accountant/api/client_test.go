package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/vkey"
)

// TestClientRefusesAnswersThatAreNotTheAPIs: a 200 whose body is not what
// the management API sends (another server at --accountant, a proxy that
// rewrote it) is an error naming the address, never an empty key printed
// as minted or a revocation without a time.
func TestClientRefusesAnswersThatAreNotTheAPIs(t *testing.T) {
	for _, body := range []string{`{}`, `<html>hello</html>`, `{"keys":5}`, `[]`, `null`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		}))
		c := &Client{BaseURL: srv.URL, Token: "t"}
		ctx := context.Background()
		check := func(what string, err error) {
			t.Helper()
			if err == nil {
				t.Errorf("%s answered %s: no error", what, body)
				return
			}
			if !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), "not a management API answer") {
				t.Errorf("%s answered %s: %v", what, body, err)
			}
		}
		_, err := c.MintKey(ctx, "org:acme", vkey.Scopes{})
		check("mint", err)
		_, err = c.RevokeKey(ctx, "vk_aaaaaaaaaaaa")
		check("revoke", err)
		if body != "null" { // a null list reads as no keys
			_, err = c.ListKeys(ctx, "")
			check("list", err)
		}
		srv.Close()
	}
}
