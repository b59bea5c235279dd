package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/tokentriage/tokentriage/accountant"
	"github.com/tokentriage/tokentriage/internal/devserver"
	"github.com/tokentriage/tokentriage/wasmtest"
)

// PIDFile is the file under the data directory that holds the pid of the
// running tokentriage dev, for make reload.
const PIDFile = "dev.pid"

// demoOwner is the node the demo key is minted for: seed 004's dev1, the
// user examples/tokentriage.yaml sizes its demo limit for.
const demoOwner = "org:acme/team:ml/user:dev1"

// pickDemoOwner is the node dev mints its demo key for: the one --demo-owner
// names; else demoOwner when the tree has it; else the tree's first user,
// or its first team, or its first org (nodes in lexical order), so that
// `dev -c` of any config with tenants starts with a key to try. With no
// node at all it is demoOwner, and the mint says what is missing.
func pickDemoOwner(flag string, nodes []string) string {
	if flag != "" {
		return flag
	}
	for _, n := range nodes {
		if n == demoOwner {
			return n
		}
	}
	for _, level := range []string{"/user:", "/team:", "org:"} {
		for _, n := range nodes {
			if strings.Contains(n, level) {
				return n
			}
		}
	}
	return demoOwner
}

var devCmd = &command{
	name:    "dev",
	usage:   "-c FILE",
	summary: "run the whole system on 127.0.0.1: the filter in the embedded proxy, the accountant and a stub upstream",
	help: `
Runs the embedded default in one process: the same filter.wasm that Envoy
loads, served by the built-in proxy-wasm host (one VM per worker), the
accountant beside it, and an upstream. The filter's plugin configuration
names only the accountant, so FILE is the single source of the plan:
SIGHUP or POST /tt/api/v1/reload reloads it, and every worker VM picks it
up at its next sync.

The upstream is the built-in stub (deterministic usage, no provider is
called), or with --upstream URL a real provider: the proxy then drops
every client credential header (Authorization, Proxy-Authorization,
x-api-key, api-key, x-goog-api-key, Cookie, and any header whose name
holds auth, token, api-key, cookie, secret, password, credential, session,
jwt or signature) and adds the provider key from
OPENAI_API_KEY (OpenAI paths) or ANTHROPIC_API_KEY (/v1/messages), so
whatever credential a client sends never reaches it.

The admin token is TT_ADMIN_TOKEN when set, else one is generated and
printed. On start it prints the gateway URL, a demo key minted for
--demo-owner, and three curl lines to try. SIGINT or SIGTERM stop it with
the ledger flushed; a second signal exits at once.

Several dev processes on one machine, each with its own --listen,
--accountant-listen and --data, are a fleet: one started without
--control owns the runtime plane (keys, nodes, overrides), the others
mirror it with --control http://<its --accountant-listen>, and --redis
HOST:PORT shares one Redis. Give them one TT_ADMIN_TOKEN and one
TT_ACCOUNTANT_TOKEN (the mirrors pull the plane with it).`,
	setup: func(fs *pflag.FlagSet) func(*env) int {
		var o devFlags
		fs.StringVarP(&o.config, "config", "c", "", "configuration file (YAML or JSON); the accountant's, and through it the filter's plan")
		fs.StringVar(&o.listen, "listen", devserver.DefaultListen, "the gateway's address")
		fs.StringVar(&o.acctListen, "accountant-listen", devserver.DefaultAccountantListen, "the accountant's address")
		fs.StringVar(&o.data, "data", devserver.DefaultDataDir, "data directory: decisions.jsonl and governance.db")
		fs.StringVar(&o.upstream, "upstream", devserver.UpstreamStub, `"stub" for the built-in stub, or a provider base URL without /v1 such as https://api.openai.com`)
		fs.IntVar(&o.workers, "workers", runtime.NumCPU(), "worker VMs of the proxy (Envoy's --concurrency)")
		fs.StringVar(&o.wasm, "wasm", devserver.DefaultWasm, "the built filter")
		fs.StringVar(&o.wasmCache, "wasm-cache", wasmtest.DefaultCacheDir(), `directory keeping the filter's compiled code between starts ("off" for none; $TT_WASM_CACHE sets the default)`)
		fs.StringVar(&o.pricing, "pricing", "", "pricing file (YAML or JSON) extending or overriding the built-in catalog")
		fs.StringVar(&o.webhook, "alert-webhook", "", "URL that receives a POST per threshold alert (the accountant's and the gateway's) and the spend report")
		fs.StringVar(&o.alertFormat, "alert-format", "json", "the shape of the webhook's posts: json, slack (an incoming webhook's blocks) or teams (an Adaptive Card)")
		fs.StringVar(&o.spendReport, "spend-report", "", "daily: post each UTC day's spend to the alert webhook after midnight")
		fs.BoolVar(&o.requestLog, "request-log", true, "log one line per request: method, path, status, ms, key name, the limit that refused it, tokens, cost (--request-log=false: none)")
		fs.StringVar(&o.demoOwner, "demo-owner", "", "node the demo key is minted for (default "+demoOwner+" when the config has it, else the config's first user, team or org)")
		fs.IntVar(&o.maxHeaders, "max-request-headers-count", devserver.DefaultMaxRequestHeadersCount, "most header fields a request may carry; more are answered 431 before the filter runs (Envoy's max_request_headers_count)")
		fs.DurationVar(&o.idleTimeout, "stream-idle-timeout", wasmtest.DefaultStreamIdleTimeout, "end a request with no bytes from the client or the upstream for this long: 408 before the response starts, a reset after (Envoy's stream_idle_timeout); 0 turns it off")
		fs.DurationVar(&o.requestTimeout, "request-timeout", 0, "answer 408 to a request whose body has not all arrived this long after its headers (Envoy's request_timeout); 0, the default, turns it off")
		fs.IntVar(&o.maxHeadersKB, "max-request-headers-kb", devserver.DefaultMaxRequestHeadersKB, "most KiB of request headers (names, values, method and path); more are answered 431 (Envoy's max_request_headers_kb, at most 8192)")
		fs.DurationVar(&o.leaseTTL, "lease-ttl", 0, "the filter's lease_ttl: how long a concurrency lease or reserve outlives a worker that stopped refreshing it, and how long after the last word of a call in flight whose proxy died the accountant closes it at its reserved estimate (0: the plugin's default, 15m)")
		fs.IntVar(&o.maxConns, "max-connections", devserver.DefaultMaxConnections(), "most client connections the gateway holds; past it a new one closes the connection idle longest, or is refused when every one is busy (Envoy's global_downstream_max_connections with its overload actions; the default is nine tenths of the file descriptor limit, at most 50,000)")
		fs.StringVar(&o.control, "control", "", "mirror the runtime plane (keys, nodes, overrides, admins, audit) of the accountant at this URL, which owns it; writes sent here are forwarded there")
		fs.StringVar(&o.advertise, "advertise", "", "this accountant's base URL as the fleet's other accountants reach it, announced to the owner so a spend report from any of them covers every ledger (default: http:// and --accountant-listen when it names a host)")
		fs.BoolVar(&o.promote, "promote", false, "own the runtime plane this data directory mirrored so far (without --control)")
		fs.BoolVar(&o.acceptRollback, "accept-plane-rollback", false, "start although governance.db is behind its checkpoint (its governance.db-wal lost or damaged), accepting the writes lost")
		fs.StringVar(&o.redis, "redis", "", "the fleet's shared Redis, HOST:PORT (overrides governance.shared_state.redis.addr)")
		return func(e *env) int { return runDev(e, o) }
	},
}

type devFlags struct {
	config, listen, acctListen, data, upstream, wasm, wasmCache, pricing, demoOwner, webhook, redis, control, advertise string
	alertFormat, spendReport                                                                                            string
	promote, acceptRollback, requestLog                                                                                 bool
	workers, maxHeaders, maxHeadersKB, maxConns                                                                         int
	idleTimeout, requestTimeout, leaseTTL                                                                               time.Duration
}

// maxDevWorkers bounds --workers: a mistyped count would otherwise start
// VMs until the machine runs out of memory.
const maxDevWorkers = 1024

// sameListenAddr reports whether two listen addresses would take the same
// port of the same interface (a wildcard or empty host takes every one).
func sameListenAddr(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return a == b
	}
	if pa != pb || pa == "0" || pa == "" {
		return false
	}
	wild := func(h string) bool { ip := net.ParseIP(h); return h == "" || ip != nil && ip.IsUnspecified() }
	return ha == hb || wild(ha) || wild(hb)
}

func runDev(e *env, o devFlags) int {
	switch {
	case o.config == "":
		return e.failf(2, "-c FILE is required (try examples/tokentriage.yaml)")
	case len(e.args) > 0:
		return e.failf(2, "unexpected argument %q", e.args[0])
	case o.workers <= 0:
		return e.failf(2, "--workers must be at least 1, got %d", o.workers)
	case o.workers > maxDevWorkers:
		return e.failf(2, "--workers must be at most %d, got %d: each worker VM holds its own memory (megabytes each); one per CPU is Envoy's default", maxDevWorkers, o.workers)
	case sameListenAddr(o.listen, o.acctListen):
		return e.failf(2, "--listen and --accountant-listen are both %s; the gateway and the accountant each need an address of their own", o.acctListen)
	case o.idleTimeout < 0 || o.requestTimeout < 0:
		return e.failf(2, "--stream-idle-timeout and --request-timeout take a duration of 0 (off) or more, got %v and %v", o.idleTimeout, o.requestTimeout)
	case o.maxHeaders <= 0:
		return e.failf(2, "--max-request-headers-count must be at least 1, got %d", o.maxHeaders)
	case o.leaseTTL < 0:
		return e.failf(2, "--lease-ttl takes a duration of 0 (the default, 15m) or more, got %v", o.leaseTTL)
	case o.maxConns <= 0:
		return e.failf(2, "--max-connections must be at least 1, got %d", o.maxConns)
	case o.maxHeadersKB <= 0 || o.maxHeadersKB > devserver.MaxRequestHeadersKB:
		return e.failf(2, "--max-request-headers-kb must be between 1 and %d, got %d", devserver.MaxRequestHeadersKB, o.maxHeadersKB)
	}
	if code := alertFlags(e, o.webhook, o.alertFormat, o.spendReport); code != 0 {
		return code
	}
	if o.upstream != devserver.UpstreamStub {
		if _, err := devserver.CheckUpstream(o.upstream); err != nil {
			return e.failf(2, "--%v", err)
		}
	}
	idle := o.idleTimeout
	if idle == 0 {
		idle = -1 // off: devserver's 0 is the default
	}
	module, err := devserver.LoadModule(o.wasm)
	if err != nil {
		return e.failf(1, "%v", err)
	}
	token, generated := os.Getenv("TT_ADMIN_TOKEN"), false
	if token == "" {
		token, generated = devserver.NewToken(), true
	}
	// The filter and the accountant share the internal token: the
	// environment's, or a fresh one (no other process needs it).
	internalToken := os.Getenv(accountant.InternalTokenEnv)
	if o.control != "" && internalToken == "" && generated {
		return e.failf(2, "--control: set %s (or TT_ADMIN_TOKEN) to the owner's: this mirror pulls the runtime plane from %s with it", accountant.InternalTokenEnv, o.control)
	}
	if internalToken != "" && internalToken == token {
		return e.failf(2, "%s is TT_ADMIN_TOKEN; use two different tokens (the filters hold the internal one, which must not open the management API)", accountant.InternalTokenEnv)
	}

	// A second SIGINT or SIGTERM exits without waiting for the flush.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-stopped:
				return
			case <-sigs:
				if n > 0 {
					fmt.Fprintln(e.stderr, "tokentriage dev: second signal: exiting without flushing the ledger")
					os.Exit(130)
				}
			}
		}
	}()

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	var requestLog *slog.Logger
	if o.requestLog {
		requestLog = log
	}
	s, err := devserver.Start(e.ctx, devserver.Options{
		ConfigPath:       o.config,
		DataDir:          o.data,
		Listen:           o.listen,
		AccountantListen: o.acctListen,
		Upstream:         o.upstream,
		OpenAIKey:        os.Getenv("OPENAI_API_KEY"),
		AnthropicKey:     os.Getenv("ANTHROPIC_API_KEY"),
		Workers:          o.workers,
		Module:           module,
		WasmCache:        o.wasmCache,
		AdminToken:       token,
		InternalToken:    internalToken,
		PricingFile:      o.pricing,
		AlertWebhook:     o.webhook,
		AlertFormat:      o.alertFormat,
		SpendReport:      o.spendReport,
		Redis:            o.redis,
		Control:          o.control,
		Advertise:        o.advertise,
		Promote:          o.promote,
		AcceptRollback:   o.acceptRollback,
		Logger:           log,
		RequestLog:       requestLog,
		FilterLog:        e.stderr,

		MaxRequestHeadersCount: o.maxHeaders,
		MaxRequestHeadersKB:    o.maxHeadersKB,
		StreamIdleTimeout:      idle,
		RequestTimeout:         o.requestTimeout,
		MaxConnections:         o.maxConns,
		LeaseTTL:               o.leaseTTL,
	})
	if err != nil {
		if e.ctx.Err() != nil {
			return e.failf(1, "interrupted while starting: %v", err)
		}
		if code, ok := e.bootFailure(err); ok {
			return code
		}
		return e.failf(1, "%v", err)
	}

	// SIGHUP reloads the config, sent to this process: under make run, a
	// signal to make is not passed on, so the pid is where make reload
	// (and anyone else) finds it.
	pidFile := filepath.Join(o.data, PIDFile)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		log.Warn("could not write the pid file; send SIGHUP to the pid the banner prints", "err", err)
	} else {
		defer os.Remove(pidFile)
	}
	b := banner{
		pid:     os.Getpid(),
		gateway: s.URL(), accountant: s.AccountantURL(), upstream: s.Upstream(),
		wasm: o.wasm, workers: s.Workers(), data: o.data, config: o.config,
		token: token, generated: generated, defaultAcct: o.acctListen == devserver.DefaultAccountantListen,
		control: o.control,
	}
	key, reused, err := demoKey(e.ctx, s, o.data, pickDemoOwner(o.demoOwner, s.Accountant().Armed().Nodes()), log)
	switch {
	case e.ctx.Err() != nil: // interrupted while minting: just stop
	case err != nil:
		fmt.Fprintf(e.stderr, "tokentriage dev: no demo key: %v (pass --demo-owner NODE naming a node of the config's tenants)\n", err)
		b.print(e.stdout)
	default:
		b.key, b.kid, b.owner, b.reused = key.Key, key.KID, key.Owner, reused
		b.limit = demoLimit(s.Accountant().Armed(), key.Owner, key.KID)
		b.print(e.stdout)
	}

	for e.ctx.Err() == nil {
		select {
		case <-hup:
			log.Info("SIGHUP: reloading the config", "config", o.config)
			s.Reload() // logs the new plan, or every problem of a rejected config
		case <-e.ctx.Done():
		}
	}
	fmt.Fprintln(e.stderr, "tokentriage dev: stopping: finishing requests in flight and flushing the ledger (a second signal exits at once)")
	if err := s.Shutdown(context.Background()); err != nil {
		return e.failf(1, "%v", err)
	}
	fmt.Fprintln(e.stderr, "tokentriage dev: stopped; ledger flushed")
	return 0
}
