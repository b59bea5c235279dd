package wasmtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// slowClient opens a raw connection, sends a request's headers promising
// 1,000 bytes of body and the first 40 of them, and returns the
// connection; the rest never comes.
func slowClient(t *testing.T, addr, id string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /x HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: %s\r\nX-Mode: note-body\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n%s", id, strings.Repeat("a", 40))
	return conn
}

// waitNote waits until the conformance filter noted want for request id:
// in its live notes (mode note-body) while the stream lives, in its notes
// once it ended.
func waitNote(t *testing.T, h *Host, id, want string) {
	t.Helper()
	for {
		v, _, _ := h.SharedData("live:" + id)
		if w, _, ok := h.SharedData("notes:" + id); ok {
			v = w
		}
		if strings.Contains(string(v), want) {
			return
		}
		if t.Context().Err() != nil {
			t.Fatalf("request %s never noted %q: %q", id, want, v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStreamIdleTimeout: a request whose body stops arriving ends when the
// stream idle timeout passes, answered 408 through the filter's response
// callbacks, and the filter sees the stream end; activity restarts the
// timer, and a stream whose response has started is reset instead.
func TestStreamIdleTimeout(t *testing.T) {
	clock := NewManualClock(t0)
	h := newHost(t, Config{Clock: clock, StreamIdleTimeout: time.Minute})
	front := httptest.NewServer(h)
	defer front.Close()
	conn := slowClient(t, front.Listener.Addr().String(), "idle1")
	waitNote(t, h, "idle1", "body:40")
	clock.Advance(59 * time.Second)
	fmt.Fprint(conn, strings.Repeat("b", 10)) // activity: the timer starts again
	waitNote(t, h, "idle1", "body:40;body:10")
	clock.Advance(59 * time.Second)
	conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("answered before the idle timeout passed")
	}
	clock.Advance(2 * time.Second)
	conn.SetReadDeadline(time.Time{})
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || string(body) != "stream timeout" {
		t.Errorf("%d %q, want 408 stream timeout", resp.StatusCode, body)
	}
	waitNote(t, h, "idle1", "resp-headers:408")
	waitNote(t, h, "idle1", "log-details=stream_idle_timeout")
}

// TestRequestTimeout: request_timeout answers 408 to a request whose body
// has not all arrived that long after its headers, however busy its
// client is; it is off by default.
func TestRequestTimeout(t *testing.T) {
	clock := NewManualClock(t0)
	h := newHost(t, Config{Clock: clock, StreamIdleTimeout: -1, RequestTimeout: 30 * time.Second})
	front := httptest.NewServer(h)
	defer front.Close()
	conn := slowClient(t, front.Listener.Addr().String(), "req1")
	waitNote(t, h, "req1", "body:40")
	for i := 0; i < 5; i++ {
		clock.Advance(5 * time.Second)
		fmt.Fprint(conn, "b") // trickling does not help
		waitNote(t, h, "req1", "body:40"+strings.Repeat(";body:1", i+1))
	}
	clock.Advance(6 * time.Second)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || string(body) != "request timeout" {
		t.Errorf("%d %q, want 408 request timeout", resp.StatusCode, body)
	}
	// Off (and the idle timer off): an hour later the stream still waits.
	quiet := newHost(t, Config{Clock: clock, StreamIdleTimeout: -1})
	front2 := httptest.NewServer(quiet)
	defer front2.Close()
	conn = slowClient(t, front2.Listener.Addr().String(), "req2")
	waitNote(t, quiet, "req2", "body:40")
	clock.Advance(time.Hour)
	conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("a stream with both timers off was answered")
	}
	conn.Close() // before the server's Close waits for it
}
