package spend

import (
	"bytes"
	"encoding/csv"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/report.txt with the reports computed (review the diff: the expectations are counted by hand)")

// defaultCols are the value columns report.txt shows unless a block says
// cols=.
var defaultCols = []string{"requests", "refused", "input_tokens", "output_tokens", "priced_usd", "estimated_usd", "unpriced_requests", "unpriced_tokens"}

// testNow is the instant the scripts' defaults would be taken from.
var testNow = time.Date(2026, 9, 10, 12, 0, 0, 0, time.UTC)

func buildTestLedger(t testing.TB) *Rollup {
	t.Helper()
	r, st, err := Build(BuildOptions{Ledgers: [][]string{{filepath.Join("testdata", "ledger.jsonl")}}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 10 || st.Unreadable != 0 {
		t.Fatalf("read %+v; want 10 rows, none unreadable", st)
	}
	return r
}

// TestReportScript runs testdata/report.txt: every grouping and bucket
// over a hand-counted ledger, period boundaries and UNPRICED rows
// included.
func TestReportScript(t *testing.T) {
	r := buildTestLedger(t)
	path := filepath.Join("testdata", "report.txt")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	blocks := 0
	lines := strings.Split(string(src), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		cmd, ok := strings.CutPrefix(line, "query ")
		if !ok {
			out.WriteString(line + "\n")
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: a query is followed by ----", path, i+1)
		}
		var want []string
		j := i + 2
		for ; j < len(lines) && lines[j] != ""; j++ {
			want = append(want, lines[j])
		}
		got := runScript(t, r, cmd)
		blocks++
		if strings.Join(want, "\n") != got && !*rewrite {
			t.Errorf("%s:%d: query %s\ngot:\n%s\nwant:\n%s", path, i+1, cmd, got, strings.Join(want, "\n"))
		}
		out.WriteString(line + "\n----\n" + got + "\n")
		i = j - 1
	}
	if blocks < 20 {
		t.Fatalf("only %d blocks ran", blocks)
	}
	if *rewrite {
		os.WriteFile(path, []byte(strings.TrimSuffix(out.String(), "\n")), 0o644)
	}
}

func runScript(t *testing.T, r *Rollup, cmd string) string {
	v, err := url.ParseQuery(cmd)
	if err != nil {
		t.Fatalf("query %s: %v", cmd, err)
	}
	scope, cols := v.Get("scope"), defaultCols
	if c := v.Get("cols"); c != "" {
		cols = strings.Split(c, ",")
	}
	v.Del("scope")
	v.Del("cols")
	q, err := ParseQuery(v, testNow)
	if err != nil {
		return "error: " + err.Error()
	}
	rep, err := r.Run(q, scope, testNow)
	if err != nil {
		return "error: " + err.Error()
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, rep); err != nil {
		t.Fatal(err)
	}
	return project(t, b.String(), len(rep.GroupBy), cols)
}

// project keeps bucket_start, the group columns and cols of a CSV report.
func project(t *testing.T, s string, groups int, cols []string) string {
	recs, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	idx := make([]int, 0, len(cols))
	for _, c := range cols {
		k := -1
		for i, h := range recs[0] {
			if h == c {
				k = i
			}
		}
		if k < 0 {
			t.Fatalf("no column %s in %v", c, recs[0])
		}
		idx = append(idx, k)
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	for _, rec := range recs {
		row := append([]string{}, rec[:1+groups]...)
		for _, k := range idx {
			row = append(row, rec[k])
		}
		w.Write(row)
	}
	w.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

func TestReportJSONTotals(t *testing.T) {
	r := buildTestLedger(t)
	q, err := ParseQuery(url.Values{"from": {"2026-08-01"}, "to": {"2026-10-01"}, "group_by": {"team"}, "node": {"org:acme"}}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(q, "", testNow)
	if err != nil {
		t.Fatal(err)
	}
	// Each group's total is the sum of its series, and the report's total
	// the sum of the groups'.
	var sum Values
	for _, g := range rep.Groups {
		var s Values
		for _, p := range g.Series {
			s.Add(&p.Values)
		}
		if s != g.Total {
			t.Errorf("group %v: series add up to %+v, total says %+v", g.Key, s, g.Total)
		}
		sum.Add(&g.Total)
	}
	if sum != rep.Total {
		t.Errorf("groups add up to %+v, total says %+v", sum, rep.Total)
	}
	if got := fmt.Sprint(rep.Total.PricedUSD, " ", rep.Total.EstimatedUSD, " ", rep.Total.UnpricedRequests); got != "0.0001515 0.0000045 1" {
		t.Errorf("acme's total = %s", got)
	}
	if len(rep.Buckets) != 61 {
		t.Errorf("%d day buckets from 08-01 to 10-01; want 61", len(rep.Buckets))
	}
}

func TestCSVDefusesFormulas(t *testing.T) {
	rep := &Report{GroupBy: []string{"model"}, Groups: []Group{{Key: map[string]string{"model": "=HYPERLINK(\"http://x\")"}, Series: []Point{{Start: testNow}}}}}
	var b bytes.Buffer
	if err := WriteCSV(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"'=HYPERLINK(""http://x"")"`) {
		t.Fatalf("CSV:\n%s", b.String())
	}
}

// TestCSVDefusesFormulasForEitherSeparator: a value that a spreadsheet
// splitting on ';' or a tab would read as two cells, the second a formula
// (gpt;=1+1 was written unquoted), is one quoted cell, and no cell any
// reader makes of it (commas, semicolons or tabs, quotes honoured or not)
// starts a formula; the values round-trip otherwise.
func TestCSVDefusesFormulasForEitherSeparator(t *testing.T) {
	models := []string{"gpt;=1+1", "a,+cmd|' /C calc'!A0", "x\t@SUM(A1)", "\uff1d1+1", "-2+3", "plain;text", "gpt-4o"}
	rep := &Report{GroupBy: []string{"model"}}
	for _, m := range models {
		rep.Groups = append(rep.Groups, Group{Key: map[string]string{"model": m}, Series: []Point{{Start: testNow, Values: Values{Requests: 1}}}})
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\n\"2026-09-10T12:00:00Z\",\"gpt;'=1+1\",1,") {
		t.Errorf("CSV:\n%s", b.String())
	}
	formula := func(cell string) bool {
		cell = strings.TrimPrefix(cell, `"`)
		return cell != "" && (strings.ContainsRune("=+-@", rune(cell[0])) || strings.HasPrefix(cell, "\uff1d"))
	}
	for _, sep := range []rune{',', ';', '\t'} {
		r := csv.NewReader(strings.NewReader(b.String()))
		r.Comma, r.FieldsPerRecord, r.LazyQuotes = sep, -1, true
		recs, err := r.ReadAll()
		if err != nil {
			t.Fatalf("separator %q: %v", sep, err)
		}
		for _, rec := range recs {
			for _, c := range rec {
				if formula(c) {
					t.Errorf("separator %q: the cell %q reads as a formula", sep, c)
				}
			}
		}
		for _, line := range strings.Split(b.String(), "\n") {
			for _, c := range strings.Split(line, string(sep)) {
				if formula(c) {
					t.Errorf("separator %q, quotes ignored: the cell %q reads as a formula", sep, c)
				}
			}
		}
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range models {
		if got := strings.ReplaceAll(recs[i+1][1], "'", ""); got != strings.ReplaceAll(m, "'", "") {
			t.Errorf("model %q reads back as %q", m, recs[i+1][1])
		}
	}
}

// TestFreeCallsAreNoRequests: a free call's row (the model list, a token
// count) is left out of every request count; a passthrough call that is
// not free counts as a request.
func TestFreeCallsAreNoRequests(t *testing.T) {
	r := New(Options{})
	end := testNow.Add(-time.Hour)
	r.Add([]ledger.Row{
		{RequestID: "tt_aaaaaaaaaaaaaaaaaaaaaaaaaa", End: end, Node: "org:acme", Endpoint: "/v1/models", Decision: ledger.Passthrough, Status: 200, Free: true},
		{RequestID: "tt_aaaaaaaaaaaaaaaaaaaaaaaaab", End: end, Node: "org:acme", Endpoint: "/v1/messages/count_tokens", Decision: ledger.Passthrough, Status: 200, Free: true},
		{RequestID: "tt_aaaaaaaaaaaaaaaaaaaaaaaaac", End: end, Node: "org:acme", Endpoint: "/v1/files", Decision: ledger.Passthrough, Status: 200},
	})
	q, err := ParseQuery(url.Values{"group_by": {"endpoint"}}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(q, "", testNow)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Requests != 1 || len(rep.Groups) != 1 || rep.Groups[0].Key["endpoint"] != "/v1/files" {
		t.Fatalf("requests %d, groups %+v; want the one passthrough call", rep.Total.Requests, rep.Groups)
	}
}
