package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mattn/go-isatty"
	"github.com/spf13/pflag"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/accountant/spend"
)

var spendCmd = &command{
	name:    "spend",
	usage:   "[--group-by DIMS] [--log LEDGER]",
	summary: "who spent what, over time: a table, CSV or JSON",
	help: `
Reports spend, tokens and requests from the ledger, bucketed by hour, day,
ISO week (from Monday) or month in UTC, grouped by any of org, team, user,
node, key, model, model_served, provider, endpoint, limit (the limit that
refused), refusal (its error type), decision, cost (priced, estimated,
unpriced, none), customer (X-Tt-Customer, or the body's user field) and
tag (the request's tags as sent, sorted and joined by ",", so the groups
add up to the total; --tag batch keeps every row carrying batch). A row
owned higher than the level grouped by keeps its own node, so a
subtree's groups add up to it.

Dollars are exact and kept in three figures never summed into one: PRICED
(usage the provider reported, at the catalog's price), ESTIMATED (usage the
gateway estimated because the provider reported none) and UNPRICED (models
with no price: counted in requests and tokens, never as $0).

By default the report comes from the running accountant (GET
/tt/api/v1/spend at --accountant, with the admin token or a delegated
admin token, which sees its subtree only). With --log it is computed here
from ledgers instead: --log takes decisions.jsonl (with its rotated
siblings), a data directory, a directory of data directories (one per
accountant of a fleet), or a ledger file, and may be repeated; a row
several ledgers hold (a retried batch that reached two accountants) is
counted once, by its request id.

An accountant of a fleet (one started with --control, or the owner its
mirrors pull from) reports over every replica's ledger: it asks each
accountant the fleet knows for its share and adds them up. The report
says which answered; one that did not is left out and named, and the
report is marked partial (on stderr too, for --format csv and json).
--local reports the asked accountant's own ledger only.

--from and --to take a date (2026-08-01, midnight UTC) or an RFC 3339 time
on the hour; --to is exclusive. The default is the current month so far.
The filters (--key, --model, ...) take comma-separated values.

Exit status: 0 done, 1 the accountant refused or could not be reached,
2 a usage error or an unreadable ledger.`,
	setup: func(fs *pflag.FlagSet) func(*env) int {
		c := accountantFlags(fs)
		logs := fs.StringArray("log", nil, "compute from this ledger instead of asking the accountant (repeat for several)")
		pricingFile := fs.String("pricing", "", "with --log: pricing file for rows recorded without a cost")
		groupBy := fs.String("group-by", "", "comma-separated dims: org, team, user, node, key, model, model_served, provider, endpoint, limit, refusal, decision, cost, customer, tag")
		bucket := fs.String("bucket", "day", "hour, day, week or month")
		from := fs.String("from", "", "first instant counted (default: the first of the current month)")
		to := fs.String("to", "", "instant the report ends before (default: the end of the current hour)")
		node := fs.String("node", "", "report on this node's subtree only")
		top := fs.Int("top", 0, "keep the N groups that spent most; the rest are summed as (other)")
		format := fs.String("format", "table", "table, csv or json")
		local := fs.Bool("local", false, "the accountant's own ledger only, not the fleet's")
		filters := map[string]*string{}
		for _, d := range []string{"key", "model", "model_served", "provider", "endpoint", "limit", "refusal", "decision", "cost", "customer", "tag"} {
			filters[d] = fs.String(strings.ReplaceAll(d, "_", "-"), "", "keep rows whose "+d+" is one of these (comma-separated)")
		}
		return func(e *env) int {
			if len(e.args) > 0 {
				return e.failf(2, "unexpected argument %q", e.args[0])
			}
			switch *format {
			case "table", "csv", "json":
			default:
				return e.failf(2, "--format %q is not one of table, csv, json", *format)
			}
			v := url.Values{}
			set := func(k, s string) {
				if s != "" {
					v.Set(k, s)
				}
			}
			set("group_by", *groupBy)
			set("bucket", *bucket)
			set("from", *from)
			set("to", *to)
			set("node", *node)
			if *local {
				if len(*logs) > 0 {
					return e.failf(2, "--local asks a running accountant for its own ledger; with --log the report is over the ledgers named")
				}
				v.Set("fleet", "false")
			}
			if fs.Changed("top") {
				v.Set("top", strconv.Itoa(*top))
			}
			for d, p := range filters {
				set(d, *p)
			}
			q, err := spend.ParseQuery(v, time.Now())
			if err != nil {
				var qe *spend.QueryError
				errors.As(err, &qe)
				for _, p := range qe.Problems {
					fmt.Fprintf(e.stderr, "tokentriage spend: %s\n", flagWording(p))
				}
				return 2
			}
			var rep *spend.Report
			if len(*logs) > 0 {
				if fs.Changed("accountant") || fs.Changed("admin-token-file") {
					return e.failf(2, "--log computes the report here; --accountant and --admin-token-file are for asking a running accountant instead")
				}
				var code int
				if rep, code = spendFromLedgers(e, *logs, *pricingFile, q); rep == nil {
					return code
				}
			} else {
				if *pricingFile != "" {
					return e.failf(2, "--pricing is read only with --log; the accountant prices its rows itself")
				}
				cl, code := c.client(e)
				if cl == nil {
					return code
				}
				rep, err = cl.Spend(e.ctx, q.Values())
				if err != nil {
					return c.fail(e, err)
				}
			}
			if rep.Partial && *format != "table" {
				fmt.Fprintf(e.stderr, "tokentriage spend: partial report: %s\n", missingLine(rep))
			}
			switch *format {
			case "json":
				b, _ := json.MarshalIndent(rep, "", "  ")
				e.stdout.Write(append(b, '\n'))
			case "csv":
				if err := spend.WriteCSV(e.stdout, rep); err != nil {
					return e.failf(1, "%v", err)
				}
			default:
				writeSpendTable(e.stdout, rep)
			}
			return 0
		}
	},
}

// flagWording turns a query problem's parameter names into the flags
// that set them (group_by → --group-by).
func flagWording(p string) string {
	for _, k := range []string{"group_by", "model_served", "bucket", "from", "to", "node", "top", "key", "model", "provider", "endpoint", "limit", "refusal", "decision", "cost", "customer", "tag"} {
		if strings.HasPrefix(p, k+" ") || strings.HasPrefix(p, k+":") {
			return "--" + strings.ReplaceAll(k, "_", "-") + p[len(k):]
		}
	}
	return p
}

// spendFromLedgers builds the rollup of the ledgers named and runs q over
// it, or returns nil and the exit status after saying why not.
func spendFromLedgers(e *env, logs []string, pricingFile string, q spend.Query) (*spend.Report, int) {
	o := spend.BuildOptions{Rollup: spend.Options{HourlyDays: -1}}
	for _, l := range logs {
		ledgers, err := ledgerlog.LedgersIn(l)
		if err != nil {
			return nil, e.failf(2, "--log %s: %v", l, err)
		}
		if len(ledgers) == 0 || len(ledgers[0].Files) == 0 {
			return nil, e.failf(2, "--log %s holds no ledger (no %s, no decisions-*.jsonl, no data directory or .jsonl file inside); it takes decisions.jsonl, an accountant's data directory, a directory of them, or a ledger file", l, ledgerlog.ActiveName)
		}
		for _, lg := range ledgers {
			o.Ledgers = append(o.Ledgers, lg.Files)
		}
	}
	if pricingFile != "" {
		c, err := pricing.LoadFile(pricingFile)
		if err != nil {
			return nil, e.failf(2, "%v", err)
		}
		o.Pricing = c
	}
	if f, ok := e.stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		o.Progress = progressBar(f, "reading ledger", time.Now)
	}
	unreadable := 0
	o.Unreadable = func(file string, line int, torn bool, err error) {
		unreadable++
		if unreadable <= maxUnreadable {
			fmt.Fprintf(e.stderr, "tokentriage spend: skipped %s line %d: not a ledger row: %v\n", file, line, err)
		}
	}
	r, st, err := spend.Build(o)
	if unreadable > maxUnreadable {
		fmt.Fprintf(e.stderr, "tokentriage spend: skipped %d more unreadable lines (%d in all)\n", unreadable-maxUnreadable, unreadable)
	}
	if err != nil {
		return nil, e.failf(2, "%v", err)
	}
	if st.Rows == 0 && st.Unreadable > 0 {
		return nil, e.failf(2, "none of the %d lines read is a ledger row; --log takes decisions.jsonl, an accountant's data directory, or a ledger file", st.Unreadable)
	}
	rep, err := r.Run(q, "", time.Now())
	if err != nil {
		return nil, e.failf(2, "%v", err)
	}
	rep.Source.Ledgers, rep.Source.Duplicates = st.Ledgers, st.Duplicates
	return rep, 0
}

// writeSpendTable prints the report for a terminal: a heading, one line
// per group and non-empty bucket, each group's total, and the total.
func writeSpendTable(w io.Writer, rep *spend.Report) {
	head := fmt.Sprintf("spend by %s, %s to %s", rep.Bucket, rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339))
	if len(rep.GroupBy) > 0 {
		head += ", grouped by " + strings.Join(rep.GroupBy, ", ")
	}
	if rep.Node != "" {
		head += ", node " + rep.Node
	}
	fmt.Fprintln(w, head)
	src := fmt.Sprintf("as of %s; %s rows summed", rep.GeneratedAt.Format(time.RFC3339), thousands(rep.Source.Rows))
	if rep.Source.Ledgers > 1 {
		src += fmt.Sprintf(" from %d ledgers (%s rows held by more than one, counted once)", rep.Source.Ledgers, thousands(rep.Source.Duplicates))
	}
	fmt.Fprintln(w, src)
	if rep.Fleet {
		fmt.Fprintf(w, "fleet: %d of %d accountants answered\n", rep.Source.Ledgers, len(rep.Source.Replicas))
		if rep.Partial {
			fmt.Fprintf(w, "PARTIAL: %s\n", missingLine(rep))
		}
		for _, o := range rep.Source.Overlaps {
			fmt.Fprintf(w, "WARNING: rows of gateway replica %s are in the ledgers of %s: a request may be counted twice (spend --log over those ledgers counts each once)\n", o.Replica, strings.Join(o.Accountants, ", "))
		}
	}
	fmt.Fprintln(w)

	var tb strings.Builder
	tw := tabwriter.NewWriter(&tb, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{strings.ToUpper(rep.Bucket)}
	for _, d := range rep.GroupBy {
		cols = append(cols, strings.ToUpper(d))
	}
	cols = append(cols, "REQUESTS", "REFUSED", "INPUT TOKENS", "OUTPUT TOKENS", "PRICED USD", "ESTIMATED USD", "UNPRICED")
	// Text columns left-aligned: tabwriter aligns every cell right, so
	// pad them here.
	width := make([]int, 1+len(rep.GroupBy))
	type line struct {
		label []string
		v     *spend.Values
	}
	var lines []line
	add := func(label []string, v *spend.Values) {
		for i, s := range label {
			label[i] = printable(s)
			width[i] = max(width[i], len(label[i]))
		}
		lines = append(lines, line{label, v})
	}
	width[0] = len(cols[0])
	for i, d := range rep.GroupBy {
		width[i+1] = len(d)
	}
	if len(rep.GroupBy) == 0 {
		for i := range rep.Series {
			add([]string{bucketLabel(rep.Bucket, rep.Series[i].Start)}, &rep.Series[i].Values)
		}
	}
	for gi := range rep.Groups {
		g := &rep.Groups[gi]
		key := spend.GroupKey(rep, g)
		for i, k := range key {
			if k == "" && !g.Other {
				key[i] = emptyLabel(rep.GroupBy[i])
			}
			if name := rep.KeyNames[k]; name != "" && rep.GroupBy[i] == "key" {
				key[i] = k + " (" + name + ")"
			}
		}
		for i := range g.Series {
			add(append([]string{bucketLabel(rep.Bucket, g.Series[i].Start)}, key...), &g.Series[i].Values)
		}
		if len(g.Series) > 1 {
			add(append([]string{"total"}, key...), &g.Total)
		}
	}
	all := make([]string, 1+len(rep.GroupBy))
	all[0] = "TOTAL"
	add(all, &rep.Total)

	row := func(cells []string) {
		for i, c := range cells {
			if i < len(width) {
				c += strings.Repeat(" ", width[i]-len(c))
			}
			fmt.Fprint(tw, c+"\t")
		}
		fmt.Fprintln(tw)
	}
	hdr := append([]string{}, cols...)
	row(hdr)
	for _, l := range lines {
		v := l.v
		unpriced := "-"
		if v.UnpricedRequests > 0 {
			unpriced = fmt.Sprintf("%s req, %s tok", thousands(v.UnpricedRequests), thousands(v.UnpricedTokens))
		}
		row(append(append([]string{}, l.label...),
			thousands(v.Requests), thousands(v.Refused), thousands(v.InputTokens), thousands(v.OutputTokens),
			v.PricedUSD.String(), v.EstimatedUSD.String(), unpriced))
	}
	tw.Flush()
	for _, l := range strings.SplitAfter(tb.String(), "\n") {
		io.WriteString(w, strings.TrimPrefix(l, "  ")) // tabwriter pads the first cell too
	}
	if len(lines) == 1 && rep.Total.Requests == 0 {
		fmt.Fprintln(w, "\nno rows in this range; widen --from/--to, or check --node and the filters")
	}
	if rep.Total.UnpricedRequests > 0 {
		fmt.Fprintf(w, "\n%s request(s) of models with no price (%s tokens) have no dollar figure: add the models to a --pricing file of the accountant\n",
			thousands(rep.Total.UnpricedRequests), thousands(rep.Total.UnpricedTokens))
	}
}

// emptyLabel is how an empty group value reads: traffic without a key
// has no node or key; a refused row may have no served model or limit.
func emptyLabel(dim string) string {
	switch dim {
	case "org", "team", "user", "node", "key":
		return "(no key)"
	}
	return "(none)"
}

// bucketLabel is how a bucket's start reads in the table.
func bucketLabel(bucket string, t time.Time) string {
	t = t.UTC()
	switch bucket {
	case "hour":
		return t.Format("2006-01-02 15:00")
	case "week":
		_, wk := t.ISOWeek()
		return fmt.Sprintf("%s W%02d", t.Format("2006-01-02"), wk)
	case "month":
		return t.Format("2006-01")
	}
	return t.Format("2006-01-02")
}

// thousands writes n with comma separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// missingLine names the accountants a fleet report left out, and why.
func missingLine(rep *spend.Report) string {
	var s []string
	for _, a := range rep.Source.Replicas {
		if a.Answered {
			continue
		}
		m := a.Accountant + " did not answer (" + a.Error
		if a.LastSeen != nil {
			m += "; last heard from " + a.LastSeen.Format(time.RFC3339)
		}
		s = append(s, m+")")
	}
	return strings.Join(s, "; ") + "; what they recorded is not in these figures"
}

// printable is s as a terminal shows it safely: every rune that is not
// printable (control characters such as ESC, BEL, CR, tab and newline,
// DEL, C1 controls, and format characters such as a right-to-left
// override) written as a Go escape, \x1b or \u202e. A model name is the
// caller's own text: written raw, its escape sequences would reach the
// terminal of whoever reads the report (retitling it, recoloring it,
// moving the cursor back over a line to hide or fake a figure), and a
// tab or newline would shift the table's columns or add a row.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == utf8.RuneError || !unicode.IsPrint(r):
			switch {
			case r < 0x80:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
