package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/internal/testkit"
	"github.com/tokentriage/tokentriage/internal/testwasm"
)

// devRun is a `tokentriage dev` the test runs in this process.
type devRun struct {
	stdout, stderr testkit.Buffer
	done           chan int
	cancel         context.CancelFunc
}

// startDev runs `tokentriage dev` with args on free loopback ports until
// stop or the end of the test, and waits for its banner.
func startDev(ctx context.Context, t *testing.T, args ...string) *devRun {
	t.Helper()
	runCtx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d := &devRun{done: make(chan int, 1), cancel: cancel}
	args = append([]string{"dev", "--listen", "127.0.0.1:0", "--accountant-listen", "127.0.0.1:0"}, args...)
	go func() { d.done <- run(runCtx, args, &d.stdout, &d.stderr) }()
	d.waitFor(ctx, t, "Ctrl-C stops it")
	return d
}

// stop ends dev as SIGINT does and returns its exit code.
func (d *devRun) stop(ctx context.Context, t *testing.T) int {
	t.Helper()
	d.cancel()
	select {
	case code := <-d.done:
		return code
	case <-ctx.Done():
		t.Fatalf("dev did not stop: %s", d.stderr.String())
		return 0
	}
}

// filterFile writes the built filter into dir and returns its path.
func filterFile(t *testing.T, dir string) string {
	t.Helper()
	wasm := filepath.Join(dir, "filter.wasm")
	if err := os.WriteFile(wasm, testwasm.Filter(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return wasm
}

// TestDevCurlLinesDoWhatTheySay starts `tokentriage dev` with the example
// config, runs the three curl lines it prints (parsed from its output, as
// a shell would read them), and checks each does what its comment says:
// a served 200, a loop whose last answer is a 429 naming the limit the
// comment names, and /tt/v1/me for the printed key. Then it stops the
// command as SIGINT does and checks every request reached the ledger.
func TestDevCurlLinesDoWhatTheySay(t *testing.T) {
	t.Setenv("TT_ADMIN_TOKEN", "")
	ctx := testkit.Context(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	dev := startDev(ctx, t, "-c", "../../examples/tokentriage.yaml", "--data", data, "--wasm", filterFile(t, dir), "--workers", "2")
	stdout, stderr := &dev.stdout, &dev.stderr
	out := stdout.String()

	if !regexp.MustCompile(`(?m)^  export TT_ADMIN_TOKEN=[0-9a-f]{64}$`).MatchString(out) {
		t.Errorf("no generated admin token printed:\n%s", out)
	}
	kid := regexp.MustCompile(`Demo key (vk_[0-9A-Za-z]{12}) for org:acme/team:ml/user:dev1`).FindStringSubmatch(out)
	if kid == nil {
		t.Fatalf("no demo key line:\n%s", out)
	}
	// The ports moved: every command that asks the accountant is told where.
	acctURL := regexp.MustCompile(`(?m)^  accountant  (http://\S+)`).FindStringSubmatch(out)
	if acctURL == nil || !strings.Contains(out, "`tokentriage keys`, `tokentriage spend` and `tokentriage govern preview` reach it with --accountant "+acctURL[1]) {
		t.Errorf("the banner does not name --accountant for keys, spend and govern preview:\n%s", out)
	}
	// SIGHUP reaches dev, not make: the banner says where, and make
	// reload reads the pid from the data directory.
	pid := strconv.Itoa(os.Getpid())
	if !strings.Contains(out, "Reload the config: kill -HUP "+pid+" (this process; make reload sends it") {
		t.Errorf("the banner does not say how to reload:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(data, PIDFile)); err != nil || strings.TrimSpace(string(b)) != pid {
		t.Errorf("%s holds %q (%v); want %s", PIDFile, b, err, pid)
	}
	key := regexp.MustCompile(`(?m)^  export TT_KEY=(tt-vk_\S+)$`).FindStringSubmatch(out)
	if key == nil || strings.Count(out+stderr.String(), key[1]) != 1 {
		t.Errorf("the demo key is printed %d times, want once (its export line; the commands read $TT_KEY):\n%s", strings.Count(out+stderr.String(), key[1]), out)
	}
	blocks := shellBlocks(t, out)
	if len(blocks) != 3 {
		t.Fatalf("want 3 commented commands, got %d:\n%s", len(blocks), out)
	}

	// 1. A served request.
	served := blocks[0]
	if len(served.runs) != 1 {
		t.Fatalf("block 1 runs %d requests, want 1", len(served.runs))
	}
	resp := served.runs[0].do(ctx, t)
	if resp.status != 200 || !strings.Contains(resp.body, `"object":"chat.completion"`) || resp.header.Get("Ratelimit-Policy") == "" {
		t.Errorf("%s\nanswered %d %v\n%s", served.comment, resp.status, resp.header, resp.body)
	}
	if !strings.HasPrefix(resp.output, "HTTP/1.1 200 OK\r\n") {
		t.Errorf("curl -i prints the status line first; got %.40q", resp.output)
	}

	// 2. A loop that meets a limit: the comment names it and how many it
	// admits; the request above took one of them.
	loop := blocks[1]
	m := regexp.MustCompile(`meet a limit: (\w+) admits (\d+) requests per 1m0s .* the (\d+)\w\w of these is a 429 naming (\w+)`).FindStringSubmatch(loop.comment)
	if m == nil || m[1] != "user_rpm" || m[2] != "3" || m[3] != "4" || m[4] != "user_rpm" {
		t.Fatalf("block 2's comment: %q", loop.comment)
	}
	if len(loop.runs) != 4 {
		t.Fatalf("block 2 runs %d requests, want 4", len(loop.runs))
	}
	var codes []string
	var last answer
	for _, r := range loop.runs {
		last = r.do(ctx, t)
		codes = append(codes, strings.TrimSpace(last.output))
	}
	if got := strings.Join(codes, " "); got != "200 200 429 429" {
		t.Errorf("the loop printed %q, want 200 200 429 429 (3 a minute, one taken by request 1)", got)
	}
	var refusal struct {
		Error struct {
			Type      string `json:"type"`
			RefusedBy struct {
				LimitID string `json:"limit_id"`
			} `json:"refused_by"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(last.body), &refusal); err != nil || refusal.Error.Type != "rate_limited" || refusal.Error.RefusedBy.LimitID != "user_rpm" {
		t.Errorf("the 4th answer: %d %s (%v)", last.status, last.body, err)
	}

	// 3. /tt/v1/me for the demo key.
	me := blocks[2]
	if len(me.runs) != 1 {
		t.Fatalf("block 3 runs %d requests, want 1", len(me.runs))
	}
	resp = me.runs[0].do(ctx, t)
	var doc struct {
		KID    string `json:"kid"`
		Node   string `json:"node"`
		Limits []struct {
			LimitID  string `json:"limit_id"`
			Observed int64  `json:"observed"`
		} `json:"limits"`
	}
	if err := json.Unmarshal([]byte(resp.body), &doc); err != nil || resp.status != 200 || doc.KID != kid[1] || doc.Node != "org:acme/team:ml/user:dev1" {
		t.Fatalf("/tt/v1/me: %d %s (%v)", resp.status, resp.body, err)
	}
	for _, l := range doc.Limits {
		if l.LimitID == "user_rpm" && l.Observed != 3 {
			t.Errorf("/tt/v1/me shows user_rpm observed %d, want 3", l.Observed)
		}
	}

	// The dashboard is where the banner says, and the spend report behind
	// it counts the requests above once their rows reach the accountant.
	dash := regexp.MustCompile(`(?m)^  dashboard   (http://\S+/tt/ui/)   `).FindStringSubmatch(out)
	if dash == nil {
		t.Fatalf("no dashboard line:\n%s", out)
	}
	page, err := http.Get(dash[1])
	if err != nil || page.StatusCode != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %v %v", dash[1], err, page)
	}
	page.Body.Close()
	token := regexp.MustCompile(`(?m)^  export TT_ADMIN_TOKEN=([0-9a-f]{64})$`).FindStringSubmatch(out)[1]
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(dash[1], "/tt/ui/")+"/tt/api/v1/spend?decision=admitted", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Total struct{ Requests int } `json:"total"`
		}
		json.NewDecoder(r.Body).Decode(&rep)
		r.Body.Close()
		if rep.Total.Requests >= 3 { // block 1's request and block 2's two served ones
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the spend report never counted the served requests (%d)", rep.Total.Requests)
		case <-time.After(50 * time.Millisecond):
		}
	}

	// Stop as SIGINT would: the ledger holds every request.
	if code := dev.stop(ctx, t); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "tokentriage dev: stopped; ledger flushed") {
		t.Errorf("stderr: %s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(data, PIDFile)); !os.IsNotExist(err) {
		t.Errorf("%s is left behind after the stop: %v", PIDFile, err)
	}
	ledger, err := os.ReadFile(filepath.Join(data, "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(ledger), `"endpoint":"/v1/chat/completions"`); n != 5 {
		t.Errorf("the ledger holds %d chat completion rows, want 5 (1 served, 4 in the loop)", n)
	}
}

// waitFor waits until dev's stdout contains want, failing if dev exits or
// ctx ends first.
func (d *devRun) waitFor(ctx context.Context, t *testing.T, want string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(d.stdout.String(), want) {
		select {
		case code := <-d.done:
			t.Fatalf("dev exited %d before printing %q:\n%s\n%s", code, want, d.stdout.String(), d.stderr.String())
		case <-ctx.Done():
			t.Fatalf("dev did not print %q:\n%s\n%s", want, d.stdout.String(), d.stderr.String())
		case <-tick.C:
		}
	}
}

// shellBlock is a "# comment" line and the command after it.
type shellBlock struct {
	comment string
	runs    []curl
}

// shellBlocks reads the commented commands of the banner: each "# " line
// followed by a curl command or a `for i in …; do curl …; done` loop, with
// backslash-newline continuations, as sh reads them, and the variables an
// "  export NAME=value" line before them sets.
func shellBlocks(t *testing.T, out string) []shellBlock {
	t.Helper()
	out = strings.ReplaceAll(out, "\\\n", "")
	var blocks []shellBlock
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	comment := ""
	env := map[string]string{}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "  export "):
			name, value, _ := strings.Cut(strings.TrimPrefix(line, "  export "), "=")
			env[name] = value
		case strings.HasPrefix(line, "# "):
			comment = line
		case strings.HasPrefix(line, "curl ") || strings.HasPrefix(line, "for "):
			if comment == "" {
				t.Fatalf("command without a comment: %s", line)
			}
			blocks = append(blocks, shellBlock{comment: comment, runs: parseCommand(t, shellWords(t, line, env))})
			comment = ""
		}
	}
	return blocks
}

// shellWords splits a line into words as sh does for the quoting the
// banner uses: single quotes, double quotes (with $NAME of env expanded),
// backslash escapes, and ';' as a word of its own.
func shellWords(t *testing.T, line string, env map[string]string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				t.Fatalf("unterminated ' in %s", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && strings.IndexByte(`"\$`+"`", line[i+1]) >= 0 {
					i++
				}
				if line[i] == '$' {
					j := i + 1
					for j < len(line) && (line[j] == '_' || line[j] >= 'A' && line[j] <= 'Z') {
						j++
					}
					v, ok := env[line[i+1:j]]
					if !ok {
						t.Fatalf("$%s in a printed command, set by no export line before it: %s", line[i+1:j], line)
					}
					cur.WriteString(v)
					i = j - 1
					continue
				}
				if line[i] == '`' {
					t.Fatalf("command substitution in a printed command: %s", line)
				}
				cur.WriteByte(line[i])
			}
			inWord = true
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == ' ' || c == '\t' || c == ';':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			if c == ';' {
				words = append(words, ";")
			}
		case c == '$' || c == '`' || c == '|' || c == '&' || c == '>' || c == '<':
			t.Fatalf("the printed command uses %q, which this test does not run: %s", c, line)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// parseCommand turns a curl command, or a for loop around one, into the
// requests it makes.
func parseCommand(t *testing.T, w []string) []curl {
	t.Helper()
	if w[0] == "curl" {
		return []curl{parseCurl(t, w[1:])}
	}
	// for VAR in ITEMS ; do CMD ; done
	if len(w) < 8 || w[0] != "for" || w[2] != "in" || w[len(w)-1] != "done" || w[len(w)-2] != ";" {
		t.Fatalf("not a loop this test reads: %q", w)
	}
	semi := 3
	for semi < len(w) && w[semi] != ";" {
		semi++
	}
	if semi+2 >= len(w) || w[semi+1] != "do" || w[semi+2] != "curl" {
		t.Fatalf("not a loop around curl: %q", w)
	}
	c := parseCurl(t, w[semi+3:len(w)-2])
	runs := make([]curl, semi-3)
	for i := range runs {
		runs[i] = c
	}
	return runs
}

// curl is one curl invocation with the flags the banner uses.
type curl struct {
	url, data, writeOut, outFile string
	headers                      [][2]string
	include                      bool
}

func parseCurl(t *testing.T, args []string) curl {
	t.Helper()
	var c curl
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 >= len(args) {
				t.Fatalf("curl %s needs a value", a)
			}
			i++
			return args[i]
		}
		switch a {
		case "-s":
		case "-i", "-si", "-is":
			c.include = true
		case "-o":
			c.outFile = next()
		case "-w":
			c.writeOut = next()
		case "-H":
			name, value, ok := strings.Cut(next(), ":")
			if !ok {
				t.Fatalf("curl -H %q: no colon", args[i])
			}
			c.headers = append(c.headers, [2]string{name, strings.TrimSpace(value)})
		case "-d":
			c.data = next()
		default:
			if strings.HasPrefix(a, "-") || c.url != "" {
				t.Fatalf("curl argument %q is not one this test reads", a)
			}
			c.url = a
		}
	}
	if c.url == "" {
		t.Fatalf("curl without a URL: %q", args)
	}
	return c
}

// answer is what one curl run got, and what curl would have printed.
type answer struct {
	status int
	header http.Header
	body   string
	output string
}

// do makes the request as curl would (a body means POST) and renders
// curl's output: -i puts the status line and headers first, -o /dev/null
// drops the body, -w '%{http_code}\n' prints the status.
func (c curl) do(ctx context.Context, t *testing.T) answer {
	t.Helper()
	method := http.MethodGet
	var body io.Reader
	if c.data != "" {
		method, body = http.MethodPost, strings.NewReader(c.data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.data != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // curl -d's default
	}
	for _, h := range c.headers {
		req.Header.Set(h[0], h[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, c.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, c.url, err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
	var out strings.Builder
	if c.include {
		out.WriteString("HTTP/1.1 " + resp.Status + "\r\n")
		resp.Header.Write(&out)
		out.WriteString("\r\n")
	}
	switch c.outFile {
	case "":
		out.Write(b)
	case "/dev/null":
	default:
		t.Fatalf("curl -o %s: the printed commands write nowhere but /dev/null", c.outFile)
	}
	switch c.writeOut {
	case "":
	case `%{http_code}\n`:
		out.WriteString(resp.Status[:3] + "\n")
	default:
		t.Fatalf("curl -w %q is not one this test renders", c.writeOut)
	}
	a.output = out.String()
	return a
}

// TestDevReloadsOnSIGHUP edits the config under a running `tokentriage
// dev` and sends SIGHUP: the filter enforces the new plan from its next
// sync, with no restart.
func TestDevReloadsOnSIGHUP(t *testing.T) {
	t.Setenv("TT_ADMIN_TOKEN", "sighup-test-token")
	ctx := testkit.Context(t)
	dir := t.TempDir()
	example, err := os.ReadFile("../../examples/tokentriage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "tokentriage.yaml")
	if err := os.WriteFile(config, example, 0o644); err != nil {
		t.Fatal(err)
	}
	dev := startDev(ctx, t, "-c", config, "--data", filepath.Join(dir, "data"), "--wasm", filterFile(t, dir), "--workers", "2")
	stderr := &dev.stderr
	out := dev.stdout.String()
	if strings.Contains(out, "sighup-test-token") || !strings.Contains(out, "Admin token: TT_ADMIN_TOKEN, as set.") {
		t.Errorf("an admin token from the environment is not printed:\n%s", out)
	}
	key := regexp.MustCompile(`(?m)^  export TT_KEY=(\S+)$`).FindStringSubmatch(out)
	gateway := regexp.MustCompile(`(?m)^  gateway     (http://\S+)`).FindStringSubmatch(out)
	if key == nil || gateway == nil {
		t.Fatalf("no key or gateway printed:\n%s", out)
	}
	rpm := func() int64 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gateway[1]+"/tt/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+key[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct {
			Limits []struct {
				LimitID string `json:"limit_id"`
				Amount  int64  `json:"amount"`
			} `json:"limits"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		for _, l := range doc.Limits {
			if l.LimitID == "user_rpm" {
				return l.Amount
			}
		}
		return -1
	}
	if got := rpm(); got != 3 {
		t.Fatalf("user_rpm %d before the reload, want 3", got)
	}
	edited := strings.Replace(string(example), "      amount: 3\n      period: 1m", "      amount: 7\n      period: 1m", 1)
	if edited == string(example) {
		t.Fatal("the example's user_rpm amount is not where this test edits it")
	}
	if err := os.WriteFile(config, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for got := rpm(); got != 7; got = rpm() {
		select {
		case <-ctx.Done():
			t.Fatalf("user_rpm still %d after SIGHUP:\n%s", got, stderr.String())
		case <-tick.C:
		}
	}
	if code := dev.stop(ctx, t); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "SIGHUP: reloading the config") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

// TestDevWithoutDemoKey names a demo owner the config does not know: dev
// says why there is no key and serves all the same.
func TestDevWithoutDemoKey(t *testing.T) {
	t.Setenv("TT_ADMIN_TOKEN", "")
	ctx := testkit.Context(t)
	dir := t.TempDir()
	dev := startDev(ctx, t, "-c", "../../examples/tokentriage.yaml", "--data", filepath.Join(dir, "data"), "--wasm", filterFile(t, dir),
		"--workers", "1", "--demo-owner", "org:globex")
	stdout, stderr := &dev.stdout, &dev.stderr
	if !strings.Contains(stdout.String(), "No demo key was minted (see the error above); mint one with tokentriage keys mint --owner NODE.") ||
		strings.Contains(stdout.String(), "curl ") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "tokentriage dev: no demo key: devserver: minting a key for org:globex: ") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	if code := dev.stop(ctx, t); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// TestDevMirrorNeedsASharedToken: a dev that mirrors another's plane pulls
// it with a token the owner knows; with neither TT_ACCOUNTANT_TOKEN nor
// TT_ADMIN_TOKEN set it has none, and says so before starting anything.
func TestDevMirrorNeedsASharedToken(t *testing.T) {
	t.Setenv("TT_ADMIN_TOKEN", "")
	t.Setenv("TT_ACCOUNTANT_TOKEN", "")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"dev", "-c", "../../examples/tokentriage.yaml", "--wasm", "testdata/not_a_module.txt",
		"--data", t.TempDir(), "--control", "http://127.0.0.1:8791"}, &stdout, &stderr)
	want := "tokentriage dev: --control: set TT_ACCOUNTANT_TOKEN (or TT_ADMIN_TOKEN) to the owner's: this mirror pulls the runtime plane from http://127.0.0.1:8791 with it\n"
	if code != 2 || stderr.String() != want {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestDevRefusesBadAddressesAndWorkerCounts: flags that would start a
// gateway sharing the accountant's port, or enough worker VMs to take the
// machine's memory, are usage errors named before anything starts.
func TestDevRefusesBadAddressesAndWorkerCounts(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "100000"}, "tokentriage dev: --workers must be at most 1024, got 100000: each worker VM holds its own memory (megabytes each); one per CPU is Envoy's default\n"},
		{[]string{"--listen", "127.0.0.1:18999", "--accountant-listen", "127.0.0.1:18999"},
			"tokentriage dev: --listen and --accountant-listen are both 127.0.0.1:18999; the gateway and the accountant each need an address of their own\n"},
		{[]string{"--listen", ":18999", "--accountant-listen", "127.0.0.1:18999"},
			"tokentriage dev: --listen and --accountant-listen are both 127.0.0.1:18999; the gateway and the accountant each need an address of their own\n"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"dev", "-c", "../../examples/tokentriage.yaml", "--wasm", "testdata/not_a_module.txt", "--data", t.TempDir()}, c.args...)
		code := run(context.Background(), args, &stdout, &stderr)
		if code != 2 || stderr.String() != c.want {
			t.Errorf("%v: exit %d, stderr %q; want 2, %q", c.args, code, stderr.String(), c.want)
		}
	}
	for _, c := range [][2]string{{"127.0.0.1:1", "127.0.0.1:2"}, {"127.0.0.1:0", "127.0.0.1:0"}, {"127.0.0.1:5", "127.0.0.2:5"}} {
		if sameListenAddr(c[0], c[1]) {
			t.Errorf("sameListenAddr(%s, %s) = true", c[0], c[1])
		}
	}
}

// TestDevKeepsItsDemoKeyAndLogsRequests: a second start on the same --data
// reuses the demo key of the first (kept 0600 in the data directory), so
// no second live key is minted; a file others could read gets its key
// revoked and a new one minted. Each request is one log line with its
// method, path, status, time, the key's name and kid, the limit that
// refused it, tokens and cost.
func TestDevKeepsItsDemoKeyAndLogsRequests(t *testing.T) {
	t.Setenv("TT_ADMIN_TOKEN", "dev-test-admin")
	ctx := testkit.Context(t)
	dir := t.TempDir()
	wasm := filterFile(t, dir)
	data := filepath.Join(dir, "data")
	type started struct {
		stop         func() int
		out, errs    *testkit.Buffer
		kid, key, gw string
		acct         string
	}
	start := func() started {
		dev := startDev(ctx, t, "-c", "../../examples/tokentriage.yaml", "--data", data, "--wasm", wasm, "--workers", "1")
		out := dev.stdout.String()
		s := started{out: &dev.stdout, errs: &dev.stderr, stop: func() int { return dev.stop(ctx, t) }}
		if m := regexp.MustCompile(`Demo key (vk_[0-9A-Za-z]{12}) for`).FindStringSubmatch(out); m != nil {
			s.kid = m[1]
		}
		if m := regexp.MustCompile(`(?m)^  export TT_KEY=(tt-vk_\S+)$`).FindStringSubmatch(out); m != nil {
			s.key = m[1]
		}
		s.gw = regexp.MustCompile(`(?m)^  gateway     (http://\S+)`).FindStringSubmatch(out)[1]
		s.acct = regexp.MustCompile(`(?m)^  accountant  (http://\S+)`).FindStringSubmatch(out)[1]
		return s
	}
	first := start()
	if first.kid == "" || !strings.Contains(first.out.String(), "kept in "+data+"/"+DemoKeyFile) {
		t.Fatalf("first start:\n%s", first.out)
	}
	st, err := os.Stat(filepath.Join(data, DemoKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v; want 0600", DemoKeyFile, st.Mode(), err)
	}
	// A served request and a refused one, each a line.
	post := func(gw, key string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"Say hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, _ := testkit.Send(t, req)
		return resp.StatusCode
	}
	if code := post(first.gw, first.key); code != 200 {
		t.Fatalf("served: %d", code)
	}
	for post(first.gw, first.key) != 429 { // user_rpm: 3 a minute
	}
	served := regexp.MustCompile(`msg=request method=POST path=/v1/chat/completions status=200 ms=\d+ key=` + first.kid + ` tokens=2\+16 cost=\$0\.0000\d+`)
	refused := regexp.MustCompile(`msg=request method=POST path=/v1/chat/completions status=429 ms=\d+ key=` + first.kid + ` refused_by=user_rpm tokens=0\+0 cost=none`)
	for !served.MatchString(first.errs.String()) || !refused.MatchString(first.errs.String()) {
		select {
		case <-ctx.Done():
			t.Fatalf("no request lines:\n%s", first.errs)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if code := first.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	second := start()
	if second.kid != first.kid || second.key != first.key || !strings.Contains(second.out.String(), "the one of earlier starts on "+data) {
		t.Fatalf("second start did not reuse %s:\n%s", first.kid, second.out)
	}
	second.stop()

	// Readable by others: revoked, and another minted.
	os.Chmod(filepath.Join(data, DemoKeyFile), 0o644)
	third := start()
	defer third.stop()
	if third.kid == "" || third.kid == first.kid || !strings.Contains(third.errs.String(), "demo key: revoked "+first.kid) {
		t.Fatalf("third start:\n%s\n%s", third.out, third.errs)
	}
	if code := post(third.gw, first.key); code != 401 {
		t.Errorf("the exposed key answered %d; want 401", code)
	}
}

// TestPickDemoOwner: dev's demo key goes to --demo-owner when given, else
// to seed 004's dev1 when the config has it, else to the config's first
// user, team or org, so `dev -c examples/saas.yaml` starts with a key.
func TestPickDemoOwner(t *testing.T) {
	saas := []string{"org:saas", "org:saas/team:app", "org:saas/team:app/user:backend", "org:saas/team:batch", "org:saas/team:batch/user:jobs"}
	for _, c := range []struct {
		flag  string
		nodes []string
		want  string
	}{
		{"", []string{"org:acme", "org:acme/team:ml", "org:acme/team:ml/user:a", demoOwner}, demoOwner},
		{"", saas, "org:saas/team:app/user:backend"},
		{"", []string{"org:solo", "org:solo/team:t"}, "org:solo/team:t"},
		{"", []string{"org:solo"}, "org:solo"},
		{"", nil, demoOwner},
		{"org:saas/team:batch", saas, "org:saas/team:batch"},
	} {
		if got := pickDemoOwner(c.flag, c.nodes); got != c.want {
			t.Errorf("pickDemoOwner(%q, %v) = %q; want %q", c.flag, c.nodes, got, c.want)
		}
	}
}
