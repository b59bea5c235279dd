package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/pluginconf"
)

var validateCmd = &command{
	name:    "validate",
	usage:   "[-c] FILE [--plugin FILE]",
	summary: "decode and compile a configuration with every boot-time guard; print each problem",
	help: `
Reads the configuration FILE (given alone or with -c; YAML, or JSON when
the file ends in .json), decodes
it strictly and runs the whole governance compile: every check the gateway
runs at boot is run here, so a file that passes will arm.

Each problem is printed on its own line with its config path, as
"path: message"; a limit's compile errors keep the words boot stops with
after their path:

  governance.limits[1].burst: governance: compile limits: govern: limit "team_tpm": tpm limit ...

With --plugin, the filter's plugin configuration (the JSON Envoy's
configuration value or Istio's pluginConfig carries) is checked the way
the filter checks it when it starts, embedded governance block included;
-c may then be left out.

With --pricing, the price file dev and accountant take with --pricing is
checked too, by the loader they use; its problems are printed one per line
after the file name.

What loads and runs but does not do what it seems to say (a burst on a
limit that reads none, an override ceiling below the limit's own amount)
is printed as "path: warning: message" and leaves the exit status 0.

Exit status: 0 valid, 1 problems found, 2 unreadable file or usage error.
On success one line summarises the plan:

  ok: 5 nodes, 4 limits, 5 instances`,
	setup: func(fs *pflag.FlagSet) func(*env) int {
		file := fs.StringP("config", "c", "", "configuration file to check (YAML or JSON)")
		plan := fs.BoolP("plan", "p", false, "also print the compiled plan: defaults applied, tree, instances, counter identities")
		prices := fs.String("pricing", "", "also check this pricing file (YAML or JSON), as dev and accountant read it")
		plugin := fs.String("plugin", "", "also check this plugin configuration of the filter (JSON), as the filter reads it at start")
		return func(e *env) int {
			if *file == "" && len(e.args) > 0 {
				*file, e.args = e.args[0], e.args[1:]
			}
			code := 0
			if *file != "" || *plugin == "" {
				if code = validate(e, *file, *plan); code == 2 {
					return code
				}
			}
			if *plugin != "" {
				if c := validatePlugin(e, *plugin); c == 2 {
					return c
				} else {
					code = max(code, c)
				}
			}
			if *prices != "" {
				code = max(code, validatePricing(e, *prices))
			}
			return code
		}
	},
}

func validate(e *env, file string, printPlan bool) int {
	if file == "" {
		return e.failf(2, "a config FILE is required: tokentriage validate FILE (or -c FILE)")
	}
	if len(e.args) > 0 {
		return e.failf(2, "unexpected argument %q: validate checks one config file at a time", e.args[0])
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return e.failf(2, "cannot read config: %v", err)
	}
	cfg, err := configfile.Parse(file, b)
	if err != nil {
		var se *config.SyntaxError
		var ps config.Problems
		switch {
		case errors.As(err, &se):
			fmt.Fprintf(e.stdout, "%s: %s\n", file, se)
			return e.failf(1, "%s does not parse", file)
		case errors.As(err, &ps):
			code := report(e, file, govern.FromConfig(ps))
			for _, p := range ps {
				for _, f := range pluginFields {
					if p.Path == "" && strings.HasPrefix(p.Message, "unknown field "+strconv.Quote(f)) {
						fmt.Fprintf(e.stderr, "%s looks like the filter's plugin configuration (it has %q); check it with tokentriage validate --plugin %s\n", file, f, file)
						return code
					}
				}
			}
			return code
		}
		return e.failf(1, "%s: %v", file, err)
	}
	plan, err := govern.Compile(cfg.Governance)
	if err != nil {
		var ps govern.Problems
		if errors.As(err, &ps) {
			return report(e, file, ps)
		}
		return e.failf(1, "%s: %v", file, err)
	}
	if _, probs := plan.Arm(govern.Runtime{}); len(probs) > 0 {
		return report(e, file, probs)
	}
	for _, w := range plan.Warnings() {
		fmt.Fprintf(e.stdout, "%s: warning: %s\n", w.Path, w.Message)
	}
	if printPlan {
		fmt.Fprint(e.stdout, plan.Describe())
	}
	fmt.Fprintf(e.stdout, "ok: %s, %s, %s", plural(len(plan.Nodes()), "node"), plural(len(plan.Limits), "limit"), plural(plan.InstanceCount(), "instance"))
	switch {
	case plan.Source == nil:
		fmt.Fprint(e.stdout, " (no governance block: governance is off)")
	case !plan.Enabled:
		fmt.Fprint(e.stdout, " (governance.enabled is false: nothing is enforced until it is true)")
	}
	fmt.Fprintln(e.stdout)
	return 0
}

// pluginFields are the top-level fields of the filter's plugin
// configuration that a config file does not have: a -c file holding them
// is a plugin configuration.
var pluginFields = []string{"accountant", "sync_interval", "flush_interval", "max_body_bytes", "keys", "providers", "lease_ttl", "hold_headers"}

// validatePlugin checks the filter's plugin configuration with the
// decoder the filter runs at start: 0 when it would start, else every
// problem and exit status 1 (2 when the file cannot be read).
func validatePlugin(e *env, file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return e.failf(2, "cannot read the plugin configuration: %v", err)
	}
	c, err := pluginconf.Decode(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")))
	if err != nil {
		var se *config.SyntaxError
		var ps govern.Problems
		switch {
		case errors.As(err, &se):
			fmt.Fprintf(e.stdout, "%s: %s\n", file, se)
			return e.failf(1, "%s does not parse (a plugin configuration is one JSON object, as Envoy's configuration value carries it)", file)
		case errors.As(err, &ps):
			return report(e, file, ps)
		}
		return e.failf(1, "%s: %v", file, err)
	}
	what := "accountant mode: the plan, keys and spend come from cluster " + strconv.Quote(c.Accountant.Cluster)
	if c.Plan != nil {
		what = fmt.Sprintf("embedded plan: %s, %s", plural(len(c.Plan.Limits), "limit"), plural(len(c.Keys), "static key"))
		if c.Accountant != nil {
			what += ", with the accountant at cluster " + strconv.Quote(c.Accountant.Cluster)
		}
	}
	fmt.Fprintf(e.stdout, "ok: plugin configuration %s (%s)\n", file, what)
	return 0
}

// validatePricing checks a pricing file with the accountant's loader: 0
// when it loads, else every problem printed and exit status 1 (2 when the
// file cannot be read).
func validatePricing(e *env, file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return e.failf(2, "cannot read the pricing file: %v", err)
	}
	if _, err := pricing.Parse(b); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(e.stdout, "%s: %s\n", file, line)
		}
		return e.failf(1, "%s: the pricing file does not load", file)
	}
	return 0
}

// report prints every problem, one per line with its config path, and
// returns exit status 1. A problem of a limit's compile step (Limit set)
// renders in the seeds' boot words, kept whole after its path.
func report(e *env, file string, ps govern.Problems) int {
	for _, p := range ps {
		if p.Limit != "" && p.Path != "" {
			fmt.Fprintf(e.stdout, "%s: %s\n", p.Path, p)
			continue
		}
		fmt.Fprintln(e.stdout, p.String())
	}
	return e.failf(1, "%s: %s", file, plural(len(ps), "problem"))
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
