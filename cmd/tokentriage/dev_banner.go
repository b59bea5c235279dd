package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/shared/govern"
)

// banner is what `tokentriage dev` prints once it serves: where things
// are, the admin token when it was generated, the demo key, and three curl
// lines that show a served request, a limit being met, and /tt/v1/me.
type banner struct {
	pid                           int
	gateway, accountant, upstream string
	wasm, data, config            string
	workers                       int
	token                         string
	generated                     bool
	defaultAcct                   bool   // the accountant is where `keys` looks by default
	control                       string // the owner of the runtime plane, when this mirrors it
	key, kid, owner               string
	reused                        bool // the key of an earlier start on this --data
	limit                         *rpmDemo
}

// rpmDemo is the rpm limit a quick loop of requests from the demo key meets
// first.
type rpmDemo struct {
	id, node, period string
	burst            int64
}

// maxDemoLoop bounds the loop that meets the demo limit.
const maxDemoLoop = 100

// demoRequest is the body of the demo requests.
const demoRequest = `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"Say hi"}]}`

// demoLimit finds the enforcing rpm instance that refuses first a loop of
// chat completions from the key: the smallest burst, in evaluation order
// (deepest node first) among equals. Nil when none is small enough to
// meet with a short loop.
func demoLimit(a *govern.Armed, owner, kid string) *rpmDemo {
	if a == nil || !a.Plan.Enabled {
		return nil
	}
	var best *rpmDemo
	d := govern.Dims{Endpoint: "/v1/chat/completions", Provider: "openai"}
	for _, in := range a.Resolve(govern.Chain(owner, kid), d, govern.Gate1, nil) {
		l := in.Limit
		if l.Type != govern.RPM || l.Mode != govern.ModeOn || l.Enforce != govern.EnforceHard {
			continue
		}
		burst := l.Burst
		if burst <= 0 {
			burst = in.Amount
		}
		if burst >= maxDemoLoop || (best != nil && burst >= best.burst) {
			continue
		}
		best = &rpmDemo{id: l.ID, node: in.Node, period: l.Period.String(), burst: burst}
	}
	return best
}

func (b *banner) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("tokentriage dev is serving.")
	p("")
	p("  gateway     %s   (%s in %d worker VMs)", b.gateway, b.wasm, b.workers)
	p("  accountant  %s   (config %s, data %s)", b.accountant, b.config, b.data)
	p("  upstream    %s", b.upstream)
	p("  dashboard   %s/tt/ui/   (spend over time; sign in with the admin token)", b.accountant)
	if b.control != "" {
		p("  plane       mirror of %s (keys, nodes and overrides are written there; writes sent here are forwarded)", b.control)
	}
	p("")
	if b.generated {
		p("Admin token for the management API (%s/tt/api/v1/), generated as TT_ADMIN_TOKEN was not set:", b.accountant)
		p("  export TT_ADMIN_TOKEN=%s", b.token)
	} else {
		p("Admin token: TT_ADMIN_TOKEN, as set.")
	}
	if !b.defaultAcct {
		p("The accountant is not at its default address: `tokentriage keys`, `tokentriage spend` and `tokentriage govern preview` reach it with --accountant %s", b.accountant)
	}
	p("Reload the config: kill -HUP %d (this process; make reload sends it when make run started it), or POST %s/tt/api/v1/reload with the admin token.", b.pid, b.accountant)
	if b.key == "" {
		p("")
		p("No demo key was minted (see the error above); mint one with tokentriage keys mint --owner NODE.")
		p("")
		p("Ctrl-C stops it with the ledger flushed.")
		return
	}
	// The key is printed once, in the export line; the commands read it
	// from $TT_KEY, so output kept in a log or a terminal's scrollback
	// holds it in one place only.
	auth := `"Authorization: Bearer $TT_KEY"`
	post := func(curl string) string {
		return curl + " " + b.gateway + "/v1/chat/completions \\\n  -H " + auth +
			" -H 'Content-Type: application/json' \\\n  -d " + shellQuote(demoRequest)
	}
	p("")
	if b.reused {
		p("Demo key %s for %s, the one of earlier starts on %s (kept in %s, readable by you only):", b.kid, b.owner, b.data, DemoKeyFile)
	} else {
		p("Demo key %s for %s (shown once; kept in %s/%s, readable by you only, for the next start on it):", b.kid, b.owner, b.data, DemoKeyFile)
	}
	p("  export TT_KEY=%s", b.key)
	p("")
	p("Try it:")
	p("")
	p("# 1. a served request: 200, with Ratelimit-Policy and X-Ratelimit-* headers")
	p("%s", post("curl -si"))
	p("")
	if l := b.limit; l != nil {
		n := l.burst + 1
		seq := make([]string, n)
		for i := range seq {
			seq[i] = strconv.FormatInt(int64(i+1), 10)
		}
		p("# 2. meet a limit: %s admits %d requests per %s for %s, so at the latest the %s of these is a 429 naming %s",
			l.id, l.burst, l.period, l.node, ordinal(n), l.id)
		p("for i in %s; do %s; done", strings.Join(seq, " "),
			post(`curl -s -o /dev/null -w '%{http_code}\n'`))
	} else {
		p("# 2. (no enforcing rpm limit of this config reaches the demo key with a small burst, so no short loop meets a limit)")
	}
	p("")
	p("# 3. who am I: the key's chain and every limit it resolves, with live numbers")
	p("curl -s %s/tt/v1/me -H %s", b.gateway, auth)
	p("")
	p("Ctrl-C stops it with the ledger flushed.")
}

func ordinal(n int64) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.FormatInt(n, 10) + suffix
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
