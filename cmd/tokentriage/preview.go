package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/pflag"

	"github.com/tokentriage/tokentriage/accountant/preview"
	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/accountant/runtime"
)

var previewCmd = &command{
	name:    "govern preview",
	usage:   "-c FILE --log LEDGER",
	summary: "replay the recorded ledger against a proposed config",
	help: `
Replays a ledger against the config and prints one line per limit instance
under three labels:

  EXACT        budget_usd, quota_tokens, quota_requests: the accountant's fold,
               recomputed from the rows of the calendar periods containing --at
  APPROXIMATE  rpm and tpm: arrivals replayed through the limit's rate algorithm
               (peak window use, arrivals it would refuse)
  ESTIMATED    concurrency: flights rebuilt from the rows' start and end times
               (peak in flight, flights it would refuse)

--log takes decisions.jsonl (its rotated decisions-*.jsonl siblings are read
too), a data directory, or one ledger file. A fleet keeps one ledger per
replica: repeat --log, or name a directory of them (each subdirectory that
is a data directory, each .jsonl file), and they are replayed as one fleet,
a row found in more than one ledger (by request id) counted once. --runtime arms the config with
the runtime nodes and overrides of an accountant's governance.db, as the
accountant itself does. When stderr is a terminal, a ledger that takes
more than half a second to read shows a progress bar there.

The report closes with the LIVE stanza. With --accountant URL it reads the
running accountant's LedgerSettled counters (GET /tt/api/v1/governance/counters,
with the admin token of --admin-token-file, else TT_ADMIN_TOKEN) once the
ledger is replayed, and sets each EXACT figure beside the live counter of the
same instance and period, after the lag of those counters: the snapshot's age,
rows acknowledged and not folded, rows the filters report dropped. Without it,
the stanza is one line saying how to ask. --format json prints the same
report as one JSON document (exact, approximate, estimated and live). Exit status: 0 done, 1 the config
does not compile or the live counters could not be read (the report is still
printed), 2 a usage or input error.`,
	setup: func(fs *pflag.FlagSet) func(*env) int {
		cfg := fs.StringP("config", "c", "", "proposed configuration file (YAML or JSON)")
		log := fs.StringArray("log", nil, "ledger: decisions.jsonl, a data directory, a ledger file, or a directory of them; repeat it to replay a fleet's ledgers as one")
		at := fs.String("at", "", "instant whose calendar periods EXACT recomputes (RFC 3339; default now)")
		pricingFile := fs.String("pricing", "", "pricing file for rows recorded without a cost")
		rtdb := fs.String("runtime", "", "governance.db whose runtime nodes and overrides to arm with (read, never written)")
		acct := fs.String("accountant", "", "running accountant to compare the EXACT figures with (e.g. http://127.0.0.1:8791; default: none)")
		tokenFile := fs.String("admin-token-file", "", "with --accountant: file holding the admin token (default: the TT_ADMIN_TOKEN environment variable)")
		format := fs.String("format", "text", "text, or json: one JSON document with the same figures")
		return func(e *env) int {
			return runPreview(e, previewArgs{cfg: *cfg, log: *log, at: *at, pricing: *pricingFile, runtime: *rtdb, accountant: *acct, tokenFile: *tokenFile, format: *format})
		}
	},
}

// previewArgs are the flags of govern preview.
type previewArgs struct {
	cfg, at, pricing, runtime string
	log                       []string
	accountant, tokenFile     string
	format                    string
}

func runPreview(e *env, a previewArgs) int {
	cfg, log, at, pricingFile, rtdb := a.cfg, a.log, a.at, a.pricing, a.runtime
	switch {
	case cfg == "":
		return e.failf(2, "-c FILE is required")
	case len(log) == 0:
		return e.failf(2, "--log decisions.jsonl is required")
	case len(e.args) > 0:
		return e.failf(2, "unexpected argument %q", e.args[0])
	case a.format != "text" && a.format != "json":
		return e.failf(2, "--format %q is not one of text, json", a.format)
	}
	when := time.Now().UTC()
	if at != "" {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return e.failf(2, "--at %q is not an RFC 3339 time (like 2026-08-10T12:00:00Z)", at)
		}
		when = t.UTC()
	}
	o := preview.Options{ConfigPath: cfg, LogPath: log[0], LogPaths: log[1:], At: when, JSON: a.format == "json"}
	switch {
	case a.accountant != "":
		c, code := adminClient(e, a.accountant, a.tokenFile)
		if c == nil {
			return code
		}
		o.Live = func() preview.Live {
			lc, err := c.Counters(context.Background())
			if err != nil {
				return preview.Live{URL: a.accountant, Err: err}
			}
			return preview.Live{URL: a.accountant, Counters: &lc}
		}
	case a.tokenFile != "":
		return e.failf(2, "--admin-token-file is read only with --accountant URL")
	}
	if pricingFile != "" {
		c, err := pricing.LoadFile(pricingFile)
		if err != nil {
			return e.failf(2, "%v", err)
		}
		o.Pricing = c
	}
	if rtdb != "" {
		// runtime.Open creates a missing database; a preview must not.
		if _, err := os.Stat(rtdb); err != nil {
			return e.failf(2, "--runtime: %v", err)
		}
		db, err := runtime.Open(rtdb)
		if err != nil {
			return e.failf(2, "--runtime: %v", err)
		}
		_, rt, err := db.Runtime()
		db.Close()
		if err != nil {
			return e.failf(2, "--runtime: %v", err)
		}
		o.Runtime = rt
	}
	if f, ok := e.stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		o.Progress = progressBar(f, "replaying ledger", time.Now)
	}
	// Every line skipped is named on stderr (the first maxUnreadable of
	// them), so a corrupt ledger never reads as a quiet one.
	unreadable := 0
	o.Unreadable = func(file string, line int, torn bool, err error) {
		unreadable++
		if unreadable > maxUnreadable {
			return
		}
		why := "not a ledger row"
		if torn {
			why = "the last line, cut short (no newline: a write a crash interrupted; the accountant truncates it when it next starts)"
		}
		fmt.Fprintf(e.stderr, "tokentriage %s: skipped %s line %d: %s: %v\n", e.name, file, line, why, err)
	}
	err := preview.Run(e.stdout, o)
	if unreadable > maxUnreadable {
		fmt.Fprintf(e.stderr, "tokentriage %s: skipped %d more unreadable lines (%d in all)\n", e.name, unreadable-maxUnreadable, unreadable)
	}
	var ce *preview.ConfigError
	var le *preview.LiveError
	switch {
	case errors.As(err, &le):
		return e.failf(1, "%v", le)
	case errors.As(err, &ce):
		out := e.stdout
		if o.JSON {
			out = e.stderr // stdout is for the JSON document only
		}
		for _, p := range ce.Problems {
			fmt.Fprintf(out, "%s: %s\n", ce.Path, p)
		}
		return e.failf(1, "%s does not compile; nothing was replayed", ce.Path)
	case err != nil:
		return e.failf(2, "%v", err)
	}
	return 0
}

// maxUnreadable is how many skipped lines a preview names one by one.
const maxUnreadable = 20
