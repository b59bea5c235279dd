package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/wire"
)

const countersHelp = `
The counter is the one of limit --limit at node --node (a tree node, or a
key's node <owner>/key:<kid> for a key-level limit) in its current period;
a limit whose match names a model, provider or endpoint keeps a counter per
value: name it with --model, --provider or --endpoint (spend/limits and the
dashboard list the counters). Only budget_usd, quota_tokens and
quota_requests counters are reset or credited.

The change is recorded in the accountant's governance.db with the runtime
plane, audited under the caller's name, kept across restarts and replays
of the ledger, mirrored to every accountant of a fleet, and counted by the
gateways from their next sync. The rows themselves stay in the ledger and
in spend reports: what was spent is still reported; what the limit counts
is lowered.` + keysAuthHelp

var countersResetCmd = &command{
	name:    "counters reset",
	usage:   "--limit ID --node NODE [--model M]",
	summary: "take a budget's or quota's counter back to zero for the rest of its period",
	help:    "\nSets what the counter counts back to zero for the rest of its current\nperiod: calls admitted from now are counted from zero.\n" + countersHelp,
	setup: func(fs *pflag.FlagSet) func(*env) int {
		c := accountantFlags(fs)
		req := counterFlags(fs)
		return func(e *env) int {
			if code := req.check(e); code != 0 {
				return code
			}
			client, code := c.client(e)
			if client == nil {
				return code
			}
			out, err := client.ResetCounter(e.ctx, req.request())
			if err != nil {
				return c.fail(e, err)
			}
			printAdjusted(e, out)
			return 0
		}
	},
}

var countersCreditCmd = &command{
	name:    "counters credit",
	usage:   "--limit ID --node NODE --amount N [--model M]",
	summary: "give back part of a budget's or quota's counter for the rest of its period",
	help: "\nTakes --amount off the counter for the rest of its current period (dollars\n" +
		"for a budget_usd limit: 5, 0.25; a count of tokens or requests for a quota),\n" +
		"at most what it holds.\n" + countersHelp,
	setup: func(fs *pflag.FlagSet) func(*env) int {
		c := accountantFlags(fs)
		req := counterFlags(fs)
		amount := fs.String("amount", "", "what to give back: dollars for budget_usd (5, 0.25), a count for a quota (required)")
		return func(e *env) int {
			if code := req.check(e); code != 0 {
				return code
			}
			if *amount == "" {
				return e.failf(2, "--amount is required: the dollars (budget_usd) or the count (quota) to give back")
			}
			client, code := c.client(e)
			if client == nil {
				return code
			}
			defs, err := client.Limits(e.ctx)
			if err != nil {
				return c.fail(e, err)
			}
			r := req.request()
			typ := ""
			for _, d := range defs {
				if d.LimitID == r.LimitID {
					typ = d.LimitType
				}
			}
			switch typ {
			case "":
				return e.failf(1, "no limit %q is armed; GET /tt/api/v1/governance/limits lists them", r.LimitID)
			case "budget_usd":
				n, err := wire.ParseUSD(strings.TrimPrefix(*amount, "$"))
				if err != nil {
					return e.failf(2, "--amount %s: limit %s is budget_usd, so the amount is dollars (5, 0.25): %v", *amount, r.LimitID, err)
				}
				r.AmountUSD = &config.USD{Nanos: n}
			default:
				n, err := strconv.ParseInt(*amount, 10, 64)
				if err != nil {
					return e.failf(2, "--amount %s: limit %s is %s, so the amount is a whole count", *amount, r.LimitID, typ)
				}
				r.Amount = &n
			}
			out, err := client.CreditCounter(e.ctx, r)
			if err != nil {
				return c.fail(e, err)
			}
			printAdjusted(e, out)
			return 0
		}
	},
}

// counterArgs are the flags that name a counter.
type counterArgs struct {
	limit, node, model, provider, endpoint *string
}

func counterFlags(fs *pflag.FlagSet) *counterArgs {
	return &counterArgs{
		limit:    fs.String("limit", "", "the limit's id (required)"),
		node:     fs.String("node", "", "the node of the limit's instance, e.g. org:acme/team:ml (required)"),
		model:    fs.String("model", "", "the model of a counter kept per model"),
		provider: fs.String("provider", "", "the provider of a counter kept per provider"),
		endpoint: fs.String("endpoint", "", "the endpoint of a counter kept per endpoint"),
	}
}

func (c *counterArgs) check(e *env) int {
	if len(e.args) > 0 {
		return e.failf(2, "unexpected argument %q", e.args[0])
	}
	if *c.limit == "" || *c.node == "" {
		return e.failf(2, "--limit ID and --node NODE are required")
	}
	return 0
}

func (c *counterArgs) request() api.CounterRequest {
	r := api.CounterRequest{LimitID: *c.limit, Node: *c.node}
	for k, v := range map[string]string{"model": *c.model, "provider": *c.provider, "endpoint": *c.endpoint} {
		if v != "" {
			if r.Dims == nil {
				r.Dims = map[string]string{}
			}
			r.Dims[k] = v
		}
	}
	return r
}

func printAdjusted(e *env, out api.CounterAdjusted) {
	unit := func(n string) string {
		if out.Unit == "usd" {
			return "$" + n
		}
		return n + " " + out.Unit
	}
	verb := map[string]string{"reset": "reset", "credit": "credited"}[out.Kind]
	fmt.Fprintf(e.stdout, "%s %s at %s (%s from %s): %s before, %s taken off, %s now\n", verb, out.LimitID, out.Node, out.Period,
		out.PeriodStart.UTC().Format(time.RFC3339), unit(string(out.Before)), unit(string(out.Taken)), unit(string(out.After)))
	fmt.Fprintf(e.stderr, "  %s\n", out.Note)
}
