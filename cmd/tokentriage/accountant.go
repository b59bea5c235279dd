package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/tokentriage/tokentriage/accountant"
	"github.com/tokentriage/tokentriage/accountant/api"
)

var accountantCmd = &command{
	name:    "accountant",
	usage:   "-c FILE --listen ADDR --data DIR",
	summary: "run the accountant: ingest, pricing, durable ledger, sync, management API, metrics",
	help: `
Runs the accountant sidecar. It compiles the config (refusing to start on
any problem), replays decisions.jsonl under --data for the current day, ISO
week and month so counters survive restarts, and serves:

  POST /tt/internal/v1/ingest   ledger rows from the filters (acknowledged once on disk)
  GET  /tt/internal/v1/sync     plan, keys, runtime plane and spend snapshot
  POST /tt/internal/v1/plane    the runtime plane, to the accountants that mirror it
  /tt/api/v1/...                the management API (admin bearer token)
  GET  /healthz, GET /metrics   health and Prometheus metrics

The admin token is read from TT_ADMIN_TOKEN or --admin-token-file; the
accountant refuses to start without one unless --insecure-no-admin is given.
The internal token, which every call to /tt/internal/ must carry (the
filters send it as the plugin configuration's accountant.token or
accountant.token_env), is read from TT_ACCOUNTANT_TOKEN or
--internal-token-file; the accountant refuses to start without one.

A fleet has one runtime plane (keys, nodes, overrides, delegated admins,
audit log). The accountant started without --control owns it; one started
with --control URL (the owner's base URL) mirrors it: it pulls the plane
with its internal token (or the admin token), serves its last copy while
the owner does not answer (tt_accountant_control_reachable, a log line,
/healthz), and forwards management writes to the owner (a 503 naming it
while it is away). A data directory that mirrored a plane starts without
--control only with --promote, which makes it the owner of its copy.

SIGHUP reloads the config (a config that does not compile is rejected and the
plan in force stays); SIGINT or SIGTERM stop it with the ledger flushed.`,
	setup: func(fs *pflag.FlagSet) func(*env) int {
		var o sidecarFlags
		fs.StringVarP(&o.config, "config", "c", "", "configuration file (YAML or JSON)")
		fs.StringVar(&o.listen, "listen", "127.0.0.1:8791", "address to listen on")
		fs.StringVar(&o.data, "data", "", "data directory: decisions.jsonl and governance.db")
		fs.StringVar(&o.pricing, "pricing", "", "pricing file (YAML or JSON) extending or overriding the built-in catalog")
		fs.StringVar(&o.webhook, "alert-webhook", "", "URL that receives a POST per threshold alert (and the spend report)")
		fs.StringVar(&o.alertFormat, "alert-format", "json", "the shape of the webhook's posts: json, slack (an incoming webhook's blocks) or teams (an Adaptive Card)")
		fs.StringVar(&o.spendReport, "spend-report", "", "daily: post each UTC day's spend to the alert webhook after midnight (the runtime plane's owner only)")
		fs.StringVar(&o.tokenFile, "admin-token-file", "", "file holding the admin bearer token (default: $TT_ADMIN_TOKEN)")
		fs.StringVar(&o.internalFile, "internal-token-file", "", "file holding the internal token the filters send (default: $"+accountant.InternalTokenEnv+")")
		fs.BoolVar(&o.insecure, "insecure-no-admin", false, "start without an admin token: the management API refuses every admin request")
		fs.StringVar(&o.control, "control", "", "mirror the runtime plane (keys, nodes, overrides, admins, audit) of the accountant at this URL, which owns it; management writes sent here are forwarded there")
		fs.StringVar(&o.advertise, "advertise", "", "this accountant's base URL as the fleet's other accountants reach it, announced to the owner so a spend report from any of them covers every ledger (default: http:// and --listen when it names a host)")
		fs.BoolVar(&o.promote, "promote", false, "own the runtime plane this data directory mirrored so far (without --control)")
		fs.BoolVar(&o.acceptRollback, "accept-plane-rollback", false, "start although governance.db is behind its checkpoint (its governance.db-wal lost or damaged), accepting the writes lost")
		fs.StringVar(&o.redis, "redis", "", "the fleet's shared Redis, HOST:PORT (overrides governance.shared_state.redis.addr)")
		fs.Float64Var(&o.writeRate, "api-write-rate", api.DefaultWriteRate, "management API writes a second per admin, after a burst of --api-write-burst; past it 429 with Retry-After (a negative rate turns the limit off)")
		fs.IntVar(&o.writeBurst, "api-write-burst", api.DefaultWriteBurst, "management API writes an admin may make at once")
		return func(e *env) int { return runAccountant(e, o) }
	},
}

type sidecarFlags struct {
	config, listen, data, pricing, webhook, tokenFile, internalFile, redis, control, advertise string
	alertFormat, spendReport                                                                   string
	promote, acceptRollback                                                                    bool
	insecure                                                                                   bool
	writeRate                                                                                  float64
	writeBurst                                                                                 int
}

func runAccountant(e *env, o sidecarFlags) int {
	switch {
	case o.config == "":
		return e.failf(2, "-c FILE is required")
	case o.data == "":
		return e.failf(2, "--data DIR is required (decisions.jsonl and governance.db live there)")
	case len(e.args) > 0:
		return e.failf(2, "unexpected argument %q", e.args[0])
	case o.writeRate == 0 || o.writeBurst <= 0:
		return e.failf(2, "--api-write-rate must not be 0 (negative turns the limit off) and --api-write-burst must be at least 1, got %v and %d", o.writeRate, o.writeBurst)
	}
	if code := alertFlags(e, o.webhook, o.alertFormat, o.spendReport); code != 0 {
		return code
	}
	token, err := readToken("admin", "TT_ADMIN_TOKEN", o.tokenFile)
	if err != nil {
		return e.failf(2, "%v", err)
	}
	if token == "" && !o.insecure {
		return e.failf(2, "no admin token: set TT_ADMIN_TOKEN or pass --admin-token-file FILE (or --insecure-no-admin to run with admin access to the management API disabled)")
	}
	if token != "" && o.insecure {
		return e.failf(2, "--insecure-no-admin was given together with an admin token; drop one of them")
	}
	internal, err := readToken("internal", accountant.InternalTokenEnv, o.internalFile)
	if err != nil {
		return e.failf(2, "%v", err)
	}
	if internal == "" {
		return e.failf(2, "no internal token: set %s or pass --internal-token-file FILE, and give the filters the same token (the plugin configuration's accountant.token, or accountant.token_env naming a variable that holds it)", accountant.InternalTokenEnv)
	}
	if internal == token {
		return e.failf(2, "the internal token is the admin token; use two different tokens (the filters hold the internal one, which must not open the management API)")
	}
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	s, err := accountant.New(accountant.Options{
		ConfigPath: o.config, DataDir: o.data, Listen: o.listen, AdminToken: token, InternalToken: internal,
		PricingFile: o.pricing, AlertWebhook: o.webhook, AlertFormat: o.alertFormat, SpendReport: o.spendReport, Logger: log, Redis: o.redis,
		Control: o.control, Promote: o.promote, Advertise: o.advertise, AcceptPlaneRollback: o.acceptRollback,
		APIWriteRate: o.writeRate, APIWriteBurst: o.writeBurst,
	})
	if code, ok := e.bootFailure(err); ok {
		return code
	}
	if err != nil {
		return e.failf(1, "%v", err)
	}
	if o.insecure {
		log.Warn("started with --insecure-no-admin: the management API refuses every admin request")
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: reloading the config")
				s.Reload() // a rejected config is logged with every problem
			}
		}
	}()
	if err := s.Run(ctx); err != nil {
		return e.failf(1, "%v", err)
	}
	log.Info("accountant stopped; ledger flushed")
	return 0
}

// alertFlags checks --alert-format and --spend-report.
func alertFlags(e *env, webhook, format, report string) int {
	if err := accountant.CheckAlertFormat(format); err != nil {
		return e.failf(2, "--alert-format %s: %v", format, err)
	}
	switch {
	case report != "" && report != accountant.SpendReportDaily:
		return e.failf(2, "--spend-report %s: the report is daily (or leave the flag out)", report)
	case report != "" && webhook == "":
		return e.failf(2, "--spend-report daily posts to the alert webhook: give --alert-webhook URL too")
	case format != accountant.AlertJSON && webhook == "":
		return e.failf(2, "--alert-format %s shapes the alert webhook's posts: give --alert-webhook URL too", format)
	}
	return 0
}
