// Package redistest starts a real redis-server for a test: Debian's
// redis-server binary (`apt-get install redis-server`; .ci/run installs it),
// on a free port the kernel hands out, with a data directory of its own
// under the test's temporary directory. No mock stands in for it.
//
// A test can kill the server (SIGKILL, a crash: nothing is saved), stop it
// (SHUTDOWN SAVE: the data set is written to its dump file), and start it
// again on the same address, empty or with the data it saved:
//
//	r := redistest.Start(t)
//	... r.Addr ...
//	r.Kill()
//	r.Restart(t, redistest.Empty)
//
// The server goes away with the test (t.Cleanup), and with the test binary
// if that dies first (the parent-death signal, on Linux).
//
// StartWith starts one with TLS (certificates made for the test), an ACL
// user, or more arguments; StartCluster starts a Redis Cluster of masters
// made with redis-cli --cluster create; StartSentinel a master, its
// replica and a Sentinel watching them, for a failover.
package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Binary is the server started; REDIS_SERVER overrides it.
const Binary = "redis-server"

// Data says what a restarted server starts with.
type Data int

const (
	// Empty starts the server with no data: the dump file is removed
	// first, as after a Redis that lost its data.
	Empty Data = iota
	// Saved starts the server with what its last Stop saved.
	Saved
)

// Options shape a server StartWith starts.
type Options struct {
	// TLS serves TLS only, with a certificate for 127.0.0.1 signed by a
	// CA made for the test (Server.CAFile).
	TLS bool
	// User and Password make an ACL user with every permission, and turn
	// the default user off.
	User, Password string
	// Args are more arguments for redis-server.
	Args []string
}

// Server is one redis-server process.
type Server struct {
	// Addr is host:port, 127.0.0.1 and the port the server listens on. It
	// stays the same across restarts.
	Addr string
	// Dir is the server's data directory.
	Dir string
	// CAFile is the CA that signed a TLS server's certificate (PEM).
	CAFile string
	port   int
	opts   Options
	tls    *tls.Config // for Do, when the server speaks TLS

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start starts a redis-server on a free port with a data directory under
// t.TempDir(), waits until it answers PING, and stops it when the test
// ends. It fails the test, saying how to install it, when the binary is
// missing.
func Start(t testing.TB) *Server { t.Helper(); return StartWith(t, Options{}) }

// StartWith is Start with opts.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := binary()
	if _, err := exec.LookPath(bin); err != nil {
		t.Fatalf("redistest: %s is not installed (apt-get install redis-server; .ci/run does): %v", bin, err)
	}
	s := &Server{Dir: filepath.Join(t.TempDir(), "redis"), opts: opts}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	if opts.TLS {
		if err := s.makeCerts(); err != nil {
			t.Fatalf("redistest: making TLS certificates: %v", err)
		}
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if s.port, err = freePort(); err != nil {
			continue
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if err = s.start(); err == nil {
			break
		}
		// Another process took the port between its release and the
		// server's bind: ask for another.
	}
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

func binary() string {
	if b := os.Getenv("REDIS_SERVER"); b != "" {
		return b
	}
	return Binary
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs the server on s.port in s.Dir and waits until it answers.
func (s *Server) start() error {
	port := []string{"--port", strconv.Itoa(s.port)}
	if s.opts.TLS {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", filepath.Join(s.Dir, "server.pem"), "--tls-key-file", filepath.Join(s.Dir, "server.key"),
			"--tls-ca-cert-file", s.CAFile, "--tls-auth-clients", "no"}
	}
	args := append(port,
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--dbfilename", "dump.rdb",
		"--save", "", // no background saves; Stop saves explicitly
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "redis.log",
		"--protected-mode", "yes",
	)
	if s.opts.User != "" {
		args = append(args, "--user", s.opts.User, "on", ">"+s.opts.Password, "~*", "&*", "+@all", "--user", "default", "off")
	}
	args = append(args, s.opts.Args...)
	cmd := exec.Command(binary(), args...)
	cmd.Dir = s.Dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", binary(), err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("%s on %s exited while starting:\n%s", binary(), s.Addr, s.logTail())
		default:
		}
		if pid, err := s.pid(); err == nil {
			if pid == cmd.Process.Pid {
				return nil
			}
			// Another test's server holds the port: this one failed to
			// bind it and is exiting. Answering its PING would have two
			// tests share one Redis.
			s.Kill()
			return fmt.Errorf("%s on %s: the port is another server's (process %d)", binary(), s.Addr, pid)
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("%s on %s did not answer PING within 30s:\n%s", binary(), s.Addr, s.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logTail is the end of the server's log, for a failure message.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// Running reports whether the server process is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Kill ends the server with SIGKILL, as a crash would (nothing is saved),
// and waits until it has exited. It does nothing when the server is not
// running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// Stop shuts the server down gracefully, saving its data set to the dump
// file first (SHUTDOWN SAVE), and waits until it has exited.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if _, err := s.Do("SHUTDOWN", "SAVE"); err != nil && !isEOF(err) {
		t.Fatalf("redistest: SHUTDOWN SAVE on %s: %v", s.Addr, err)
	}
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Restart starts the server again on the same address, after killing it if
// it is still running: Empty removes its dump file first (Redis lost its
// data), Saved starts from what the last Stop saved.
func (s *Server) Restart(t testing.TB, d Data) {
	t.Helper()
	s.Kill()
	if d == Empty {
		if err := os.Remove(filepath.Join(s.Dir, "dump.rdb")); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("redistest: %v", err)
		}
	}
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if err = s.start(); err == nil {
			return
		}
		// The port may still be in TIME_WAIT or briefly held; the
		// address must stay the same, so wait for it.
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("redistest: restarting on %s: %v", s.Addr, err)
}

// pid is the process id of the server answering on s.Addr.
func (s *Server) pid() (int, error) {
	info, err := s.Do("INFO", "server")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("INFO server names no process_id")
}

// Ping sends PING and expects PONG.
func (s *Server) Ping() error {
	r, err := s.Do("PING")
	if err != nil {
		return err
	}
	if r != "PONG" {
		return fmt.Errorf("PING answered %q", r)
	}
	return nil
}

// Do sends one command on a connection of its own and returns the reply
// rendered as text: a simple or bulk string as it is, an integer in
// decimal, an array as its elements joined by newlines, a nil as "(nil)".
// An error reply is returned as an error. It is for tests to look at the
// server (DBSIZE, KEYS, FLUSHALL, CONFIG SET), not a client.
func (s *Server) Do(args ...string) (string, error) {
	return do(s.Addr, s.tls, s.opts.User, s.opts.Password, args...)
}

// do sends one command to addr on a connection of its own (over TLS with
// conf, after AUTH user password when user is set).
func do(addr string, conf *tls.Config, user, password string, args ...string) (string, error) {
	var c net.Conn
	var err error
	d := &net.Dialer{Timeout: 5 * time.Second}
	if conf != nil {
		c, err = tls.DialWithDialer(d, "tcp", addr, conf)
	} else {
		c, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	send := func(args ...string) error {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		_, err := c.Write([]byte(b.String()))
		return err
	}
	if user != "" {
		if err := send("AUTH", user, password); err != nil {
			return "", err
		}
		if _, err := readReply(r); err != nil {
			return "", err
		}
	}
	if err := send(args...); err != nil {
		return "", err
	}
	return readReply(r)
}

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		if n < 0 {
			return "(nil)", nil
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		parts := make([]string, 0, max(n, 0))
		for i := 0; i < n; i++ {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func isEOF(err error) bool {
	return err != nil && (errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection reset"))
}
