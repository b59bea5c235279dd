package wasmtest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// auth is a callout cluster: it answers "ok:<token>" (or "deny" for the
// token deny) after checking what the filter sent.
func auth(t *testing.T) Cluster {
	return Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		tok := r.Header.Get("X-Token")
		if r.Method != "POST" || r.URL.RequestURI() != "/check?x=1" || r.Host != "auth.local" || string(body) != "body-"+tok {
			t.Errorf("callout arrived as %s %s host=%s body=%q", r.Method, r.URL.RequestURI(), r.Host, body)
		}
		w.Header().Set("X-Auth-Server", "1")
		if tok == "deny" {
			io.WriteString(w, "deny")
			return
		}
		io.WriteString(w, "ok:"+tok)
	})}
}

func TestCalloutSuccess(t *testing.T) {
	h := newHost(t, Config{Clusters: map[string]Cluster{"auth": auth(t)}})
	for i, id := range []string{"c1", "c2"} {
		resp := h.Do(Request{Headers: hdr("X-Mode", "callout", "X-Token", "abc", "X-Request-Id", id), BodyChunks: chunks("payload")})
		if resp.Status != 200 || !strings.Contains(string(resp.Body), "X-Auth: 200:ok:abc") || !strings.Contains(string(resp.Body), "body: payload") {
			t.Fatalf("got %d\n%s", resp.Status, resp.Body)
		}
		callID := []string{"4", "8"}[i]
		n := notes(t, h, id)
		for _, want := range []string{"call=0,id=" + callID, "effective=0", "callback:root=true,id=" + callID + ",n=3", "add=0"} {
			if !strings.Contains(n, want) {
				t.Errorf("notes %q lack %q", n, want)
			}
		}
		// The call is delivered after the callback that made it returned.
		if strings.Index(n, "call=0") > strings.Index(n, "callback:") {
			t.Errorf("notes %q: the callout was delivered inside the calling callback", n)
		}
	}
}

func TestCalloutCanReplyLocally(t *testing.T) {
	h := newHost(t, Config{Clusters: map[string]Cluster{"auth": auth(t)}})
	resp := h.Do(Request{Headers: hdr("X-Mode", "callout", "X-Token", "deny", "X-Request-Id", "deny")})
	if resp.Status != 401 || string(resp.Body) != "denied" {
		t.Errorf("got %d %q", resp.Status, resp.Body)
	}
	if n := notes(t, h, "deny"); !strings.Contains(n, "resp-headers:401") {
		t.Errorf("notes %q: the local reply did not run the response callbacks", n)
	}
}

// A call that cannot be made is delivered as (0, 0, 0), and
// proxy_get_status says (11, "reset").
func TestCalloutFailure(t *testing.T) {
	h := newHost(t, Config{Clusters: map[string]Cluster{"down": {URL: "http://127.0.0.1:1"}}})
	resp := h.Do(Request{Headers: hdr("X-Mode", "callout", "X-Cluster", "down", "X-Request-Id", "f")})
	if !strings.Contains(string(resp.Body), "X-Auth: failed-11-reset") {
		t.Errorf("upstream saw\n%s", resp.Body)
	}
	if n := notes(t, h, "f"); !strings.Contains(n, ",n=0") {
		t.Errorf("notes %q", n)
	}
}

// A call that outlives its timeout on the host's clock is answered by a
// synthetic 504, and the exchange is cancelled.
func TestCalloutTimeout(t *testing.T) {
	started := make(chan struct{})
	cancelled := make(chan struct{})
	slow := Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		close(cancelled)
	})}
	clock := NewManualClock(t0)
	h := newHost(t, Config{Clock: clock, Clusters: map[string]Cluster{"slow": slow}})
	done := make(chan Response)
	go func() {
		done <- h.Do(Request{Headers: hdr("X-Mode", "callout", "X-Cluster", "slow", "X-Timeout", "1000", "X-Request-Id", "to")})
	}()
	<-started
	clock.Advance(999 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("answered before the timeout: %d %s", r.Status, r.Body)
	default:
	}
	clock.Advance(time.Millisecond)
	resp := <-done
	if !strings.Contains(string(resp.Body), "X-Auth: 504:upstream request timeout") {
		t.Errorf("upstream saw\n%s", resp.Body)
	}
	<-cancelled
}

// Envoy refuses a call to an unknown cluster, a negative timeout, or
// headers without :method, :path or :authority (BAD_ARGUMENT); a pseudo
// header that is present with an empty value is accepted.
func TestCalloutBadArguments(t *testing.T) {
	sink := Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	h := newHost(t, Config{Clusters: map[string]Cluster{"auth": auth(t), "sink": sink}})
	resp := h.Do(Request{Headers: hdr("X-Mode", "callout-bad")})
	if got := string(resp.Body); got != "unknown=2 noauthority=2 negative=2 nomethod=2 nopath=2 emptyauthority=0" {
		t.Errorf("got %q", got)
	}
	if err := h.WaitCallouts(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The upstream SDK's multiple_dispatches example calls out with an empty
// :authority; Envoy sends it (the cluster, not the authority, picks the
// destination), and so does the host.
func TestCalloutEmptyAuthority(t *testing.T) {
	var host string
	cl := Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host = r.Host
		io.WriteString(w, "ok:"+r.Header.Get("X-Token"))
	})}
	h := newHost(t, Config{Clusters: map[string]Cluster{"auth": cl}})
	resp := h.Do(Request{Headers: hdr("X-Mode", "callout", "X-Token", "t1", "X-Empty-Authority", "1", "X-Request-Id", "ea")})
	if resp.Status != 200 || !strings.Contains(string(resp.Body), "X-Auth: 200:ok:t1") {
		t.Fatalf("got %d\n%s\nlogs: %v", resp.Status, resp.Body, h.Logs())
	}
	if n := notes(t, h, "ea"); !strings.Contains(n, "call=0,id=4") {
		t.Errorf("notes %q: the call was refused", n)
	}
	if host != "" {
		t.Errorf("the cluster saw host %q, want the empty authority the filter sent", host)
	}
}

// Calls still pending when the root context goes away are cancelled and
// never delivered.
func TestCalloutsCancelledOnClose(t *testing.T) {
	started := make(chan struct{}, 4)
	cancelled := make(chan struct{}, 4)
	block := Cluster{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		cancelled <- struct{}{}
	})}
	clock := NewManualClock(t0)
	h := newHost(t, Config{Clock: clock, PluginConfig: []byte("tick tick-call"), Clusters: map[string]Cluster{"auth": block}})
	clock.Advance(time.Second)
	<-started
	h.Close()
	<-cancelled
	if err := h.WaitCallouts(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := h.SharedData("tick-calls"); ok {
		t.Error("a cancelled call was delivered")
	}
}
