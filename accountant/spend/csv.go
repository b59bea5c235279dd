package spend

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"time"
)

// CSVColumns are the value columns of a CSV report, after bucket_start
// and the grouped dims.
var CSVColumns = []string{
	"requests", "admitted", "refused", "shadow_refused", "soft_breach",
	"input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens",
	"priced_usd", "priced_requests", "estimated_usd", "estimated_requests",
	"unpriced_requests", "unpriced_tokens",
}

// OtherValue stands for the group that sums every group past top= in a
// CSV or table.
const OtherValue = "(other)"

// WriteCSV writes the report as CSV (RFC 4180): a header, then one line
// per group and non-empty bucket (per non-empty bucket without group_by),
// in the report's order. Dollars are exact decimals.
func WriteCSV(w io.Writer, rep *Report) error {
	cw := csv.NewWriter(w)
	head := append([]string{"bucket_start"}, rep.GroupBy...)
	head = append(head, CSVColumns...)
	if err := cw.Write(head); err != nil {
		return err
	}
	line := func(start time.Time, key []string, v *Values) error {
		rec := make([]string, 0, len(head))
		rec = append(rec, start.UTC().Format(time.RFC3339))
		for _, k := range key {
			rec = append(rec, cellText(k))
		}
		rec = append(rec, valueStrings(v)...)
		return cw.Write(rec)
	}
	if len(rep.GroupBy) == 0 {
		for i := range rep.Series {
			if err := line(rep.Series[i].Start, nil, &rep.Series[i].Values); err != nil {
				return err
			}
		}
	}
	for _, g := range rep.Groups {
		key := GroupKey(rep, &g)
		for i := range g.Series {
			if err := line(g.Series[i].Start, key, &g.Series[i].Values); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// GroupKey is a group's key in the order of the report's group_by, with
// OtherValue for the group past top=.
func GroupKey(rep *Report, g *Group) []string {
	key := make([]string, len(rep.GroupBy))
	for i, d := range rep.GroupBy {
		if g.Other {
			key[i] = OtherValue
		} else {
			key[i] = g.Key[d]
		}
	}
	return key
}

// valueStrings renders v in the order of CSVColumns.
func valueStrings(v *Values) []string {
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	return []string{
		i(v.Requests), i(v.Admitted), i(v.Refused), i(v.ShadowRefused), i(v.SoftBreach),
		i(v.InputTokens), i(v.OutputTokens), i(v.CachedInputTokens), i(v.ReasoningTokens),
		v.PricedUSD.String(), i(v.PricedRequests), v.EstimatedUSD.String(), i(v.EstimatedRequests),
		i(v.UnpricedRequests), i(v.UnpricedTokens),
	}
}

// cellText defuses a value a spreadsheet would run as a formula (a model
// name is whatever a client sent): one starting with =, +, -, @, a tab or
// a carriage return is written after a single quote, as OWASP advises.
func cellText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
