package spend

import (
	"bufio"
	"io"
	"slices"
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
//
// Every text cell (the header, bucket starts, the grouped dims' values) is
// written in double quotes, and a value a spreadsheet would run as a
// formula is defused (cellText): a spreadsheet that splits lines on ';'
// (Excel and LibreOffice in most European locales) or on tabs read the
// unquoted gpt;=1+1 as two cells, the second a formula. Quoted, a cell is
// one cell whichever separator the reader picks. Numbers stay bare. See
// RATIONALE.md#why-is-every-text-cell-of-a-csv-report-quoted.
func WriteCSV(w io.Writer, rep *Report) error {
	bw := bufio.NewWriter(w)
	head := append([]string{"bucket_start"}, rep.GroupBy...)
	named := -1 // the column of group_by=key, followed by key_name
	for i, d := range rep.GroupBy {
		if d == "key" && rep.KeyNames != nil {
			named = i
			head = slices.Insert(head, 2+i, "key_name")
		}
	}
	writeText(bw, head...)
	for _, c := range CSVColumns {
		bw.WriteByte(',')
		writeText(bw, c)
	}
	bw.WriteByte('\n')
	line := func(start time.Time, key []string, v *Values) {
		writeText(bw, start.UTC().Format(time.RFC3339))
		for i, k := range key {
			bw.WriteByte(',')
			writeText(bw, cellText(k))
			if i == named {
				bw.WriteByte(',')
				writeText(bw, cellText(rep.KeyNames[k]))
			}
		}
		for _, n := range valueStrings(v) {
			bw.WriteByte(',')
			bw.WriteString(n)
		}
		bw.WriteByte('\n')
	}
	if len(rep.GroupBy) == 0 {
		for i := range rep.Series {
			line(rep.Series[i].Start, nil, &rep.Series[i].Values)
		}
	}
	for _, g := range rep.Groups {
		key := GroupKey(rep, &g)
		for i := range g.Series {
			line(g.Series[i].Start, key, &g.Series[i].Values)
		}
	}
	return bw.Flush()
}

// writeText writes each of cells in double quotes (a quote inside doubled),
// separated by commas.
func writeText(w *bufio.Writer, cells ...string) {
	for i, c := range cells {
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteByte('"')
		w.WriteString(strings.ReplaceAll(c, `"`, `""`))
		w.WriteByte('"')
	}
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
// name is whatever a client sent): one starting with =, +, -, @, a tab, a
// carriage return or a line feed, or with their full-width forms
// (＝＋－＠, which some spreadsheets read as the ASCII ones), is written
// after a single quote, as OWASP advises. The same holds after any ';',
// ',' or tab in the value: quoted, the value is one cell, but a reader
// told to ignore quotes would split it there.
func cellText(s string) string {
	if formulaStart(s) {
		s = "'" + s
	}
	if !strings.ContainsAny(s, ";,\t") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if (s[i] == ';' || s[i] == ',' || s[i] == '\t') && formulaStart(s[i+1:]) {
			b.WriteByte('\'')
		}
	}
	return b.String()
}

// formulaStart reports whether a spreadsheet reads a cell beginning with
// s as a formula.
func formulaStart(s string) bool {
	if s == "" {
		return false
	}
	if strings.ContainsRune("=+-@\t\r\n", rune(s[0])) {
		return true
	}
	for _, p := range []string{"＝", "＋", "－", "＠"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
