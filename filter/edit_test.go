package filter

import (
	"errors"
	"strings"
	"testing"

	"github.com/tokentriage/tokentriage/shared/vkey"
)

// TestEditFailedAnswersAndHandsBack: a request whose header or body edits
// the host refused is answered 500 by the filter, never sent on half
// edited, and everything its gates took goes back (the concurrency lease,
// the tpm reserve).
func TestEditFailedAnswersAndHandsBack(t *testing.T) {
	key := "tt-vk_FEKZdMs2UQRi-3kLwQ0vX9bY2cD4eF6gH8iJ0kL2mN4oP"
	cfg := `{"governance":{"enabled":true,"tenants":[{"org":"acme","teams":["ml"],"users":{"ml":["dev1"]}}],"limits":[
		{"id":"u_conc","attach":{"level":"user"},"type":"concurrency","amount":1},
		{"id":"t_tpm","attach":{"level":"team"},"type":"tpm","amount":100000,"period":"1m"}]},
		"keys":[{"kid":"vk_FEKZdMs2UQRi","sha256":"` + vkey.Hash(key) + `","owner":"org:acme/team:ml/user:dev1","scopes":{}}]}`
	e := testEngines(t, 1, newMemStore(), &manualClock{t: nativeT0}, cfg)[0]
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	for step, at := range []string{"headers", "body"} {
		s := e.NewStream()
		v := e.RequestHeaders(s, &RequestHead{Method: "POST", Path: "/v1/chat/completions", Authorization: "Bearer " + key})
		if at == "body" {
			v = e.RequestBody(s, len(body), true, bytesBody(body))
		}
		if v.Action != ActContinue {
			t.Fatalf("step %d: the request was not admitted: %+v", step, v.Reply)
		}
		v = e.EditFailed(s, "removing its authorization header", errors.New("bad argument"))
		if v.Action != ActReply || v.Reply.Status != 500 || !strings.Contains(string(v.Reply.Body), `"type":"gateway_error"`) ||
			!strings.Contains(string(v.Reply.Body), "removing its authorization header failed: bad argument") {
			t.Errorf("step %d: %+v %s", step, v.Reply, v.Reply.Body)
		}
		e.Done(s)
		e.Release(s)
		if n := e.cells.holding(); n != 0 {
			t.Errorf("step %d: %d leases held after the 500", step, n)
		}
	}
	// Both leases and the reserve came back: a request that needs the whole
	// of both still fits.
	s := e.NewStream()
	v := e.RequestHeaders(s, &RequestHead{Method: "POST", Path: "/v1/chat/completions", Authorization: "Bearer " + key})
	if v.Action == ActContinue {
		big := []byte(`{"model":"gpt-4o","max_tokens":16384,"messages":[{"role":"user","content":"` + strings.Repeat("x", 4*83000) + `"}]}`)
		v = e.RequestBody(s, len(big), true, bytesBody(big))
	}
	if v.Action != ActContinue {
		t.Errorf("after two 500s the limits still hold what they took: %s", v.Reply.Body)
	}
}
