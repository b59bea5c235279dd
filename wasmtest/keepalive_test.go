package wasmtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tokentriage/tokentriage/internal/testkit"
)

// dialCounter is a client that counts the connections it opens.
type dialCounter struct {
	dials  atomic.Int64
	client *http.Client
}

func newDialCounter(t *testing.T) *dialCounter {
	d := &dialCounter{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	d.client = &http.Client{Transport: tr}
	return d
}

// send posts body (chunked when length is -1) with the conformance mode
// and returns the status and the response body.
func (d *dialCounter) send(t *testing.T, url, mode, body string, length int64) (int, string, error) {
	t.Helper()
	var rd io.Reader = strings.NewReader(body)
	if length < 0 {
		rd = io.MultiReader(rd) // hides the length: the client sends it chunked
	}
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Mode", mode)
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), err
}

// TestRefusalWithBodyKeepsConnection sends, on one keep-alive client,
// requests with a body the filter refuses at the request headers, each
// followed by one it lets through. net/http's full-duplex mode, which the
// host uses for every request with a body, drops the connection when a
// handler returns with the body unread (its close restarts the
// connection's background read), so without the host finishing the body
// itself the request after a refusal fails with a reset now and then.
// None may fail, and the connection must be reused throughout.
func TestRefusalWithBodyKeepsConnection(t *testing.T) {
	h := newHost(t, Config{Clock: RealClock()})
	front := httptest.NewServer(h)
	defer front.Close()
	for _, c := range []struct {
		name   string
		body   string
		length int64
	}{
		{"small", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, 0},
		{"larger than one read", strings.Repeat("x", 100<<10), 0},
		{"chunked", `{"model":"gpt-4o-mini"}`, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDialCounter(t)
			const rounds = 100
			for i := 0; i < rounds; i++ {
				status, body, err := d.send(t, front.URL, "local", c.body, c.length)
				if err != nil || status != 403 || body != "NO ENTRY" {
					t.Fatalf("round %d: refused request: %d %q, %v", i, status, body, err)
				}
				status, body, err = d.send(t, front.URL, "plain", c.body, c.length)
				if err != nil || status != 200 || !strings.Contains(body, "body: "+c.body) {
					t.Fatalf("round %d: served request after a refusal: %d, %v", i, status, err)
				}
			}
			if n := d.dials.Load(); n != 1 {
				t.Errorf("%d connections for %d sequential requests: a refusal dropped the connection", n, 2*rounds)
			}
		})
	}
}

// TestUnfinishedBodyClosesConnection ends streams whose body the host
// cannot read to its end to keep the connection: refusals at the headers
// of a declared length past 256 KiB, of a chunked body longer than that,
// of a client that stops sending, and an upstream that answers at once
// while the host's read of the stalled body is in flight. Each client gets
// its response whole, then its connection closes (the next read from it
// ends), without a panic in the server.
func TestUnfinishedBodyClosesConnection(t *testing.T) {
	early := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Answer") == "early" {
			io.WriteString(w, "early") // without reading the body
			return
		}
		echo(w, r)
	})
	h := newHost(t, Config{Clock: RealClock(), Upstream: Cluster{Handler: early}})
	var errs testkit.Buffer // the server's error log
	front := httptest.NewUnstartedServer(h)
	front.Config.ErrorLog = log.New(&errs, "", 0)
	front.Start()
	defer front.Close()
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nX-Mode: local\r\n"
	chunk := fmt.Sprintf("%x\r\n%s\r\n", 32<<10, strings.Repeat("c", 32<<10))
	for _, c := range []struct {
		name   string
		sent   string // what the client writes; it never finishes its body
		status int
		body   string
	}{
		{"declared length past the limit", head + "Content-Length: 1048576\r\n\r\n" + strings.Repeat("x", 1024), 403, "NO ENTRY"},
		{"chunked past the limit", head + "Transfer-Encoding: chunked\r\n\r\n" + strings.Repeat(chunk, 9), 403, "NO ENTRY"},
		{"client stops sending", head + "Content-Length: 100\r\n\r\n" + strings.Repeat("x", 10), 403, "NO ENTRY"},
		{"read in flight", strings.Replace(head, "local", "plain\r\nX-Answer: early", 1) + "Content-Length: 100\r\n\r\n" + strings.Repeat("x", 10), 200, "early"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", front.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			go io.WriteString(conn, c.sent)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != c.status || string(body) != c.body {
				t.Fatalf("response: %d %q, %v; want %d %q", resp.StatusCode, body, err, c.status, c.body)
			}
			if n, err := br.Read(make([]byte, 1)); err == nil {
				t.Errorf("read %d more bytes: the connection was kept", n)
			}
			if s := errs.String(); s != "" {
				t.Errorf("server errors:\n%s", s)
			}
		})
	}
}
