package accountant

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokentriage/tokentriage/accountant/dashboard"
	"github.com/tokentriage/tokentriage/accountant/spend"
	"github.com/tokentriage/tokentriage/shared/config"
)

// SpendReportDaily is the spend report cadence --spend-report takes.
const SpendReportDaily = "daily"

// SpendReport is the document a daily spend report posts in the json
// alert format: one UTC day's totals over the whole fleet, its top keys
// (with their names), users and models, and the budgets and quotas
// nearest their caps now.
type SpendReport struct {
	Event     string              `json:"event"` // "spend_report"
	Period    string              `json:"period"`
	From      time.Time           `json:"from"`
	To        time.Time           `json:"to"`
	Total     spend.Values        `json:"total"`
	TopKeys   []ReportGroup       `json:"top_keys"`
	TopUsers  []ReportGroup       `json:"top_users"`
	TopModels []ReportGroup       `json:"top_models"`
	Limits    []spend.LimitStatus `json:"limits"`
	// Partial names the accountants of the fleet that did not answer:
	// their replicas' rows are not in the figures.
	Partial   []string `json:"partial,omitempty"`
	Dashboard string   `json:"dashboard,omitempty"`
}

// ReportGroup is one line of a report's top list: the group's value (a
// kid, a user node, a model), a key's name, and its figures.
type ReportGroup struct {
	Key  string `json:"key"`
	Name string `json:"name,omitempty"`
	spend.Values
}

// reportTop is how many lines each top list holds.
const reportTop = 5

// reportRetry is how long a report the webhook did not take waits before
// it is sent again.
const reportRetry = 5 * time.Minute

// reportStateFile records the last day reported, so a restart neither
// sends a day twice nor skips one.
const reportStateFile = "spend-report.json"

type reportState struct {
	LastDay string `json:"last_day"` // YYYY-MM-DD, UTC
}

// reporter is the accountant's daily spend report: the day last sent and
// when to try again after a failure.
type reporter struct {
	running atomic.Bool
	wg      sync.WaitGroup // the report being sent; Close waits for it
	mu      sync.Mutex
	last    time.Time // start of the last UTC day reported
	retry   time.Time
}

// dashboardURL is the dashboard's address as the fleet reaches this
// accountant, "" when it has none.
func (s *Server) dashboardURL() string {
	if s.advertise == "" {
		return ""
	}
	return strings.TrimRight(s.advertise, "/") + dashboard.Prefix
}

// startReports reads the day last reported; an accountant reporting for
// the first time starts from yesterday, so its first report is of today,
// sent after midnight.
func (s *Server) startReports(now time.Time) error {
	if s.opts.SpendReport == "" {
		return nil
	}
	path := filepath.Join(s.opts.DataDir, reportStateFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.report.last = utcDay(now).AddDate(0, 0, -1)
		return s.saveReportState()
	case err != nil:
		return fmt.Errorf("accountant: reading %s: %w", path, err)
	}
	var st reportState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("accountant: %s is not a spend report state (%v); remove it to start reporting from today", path, err)
	}
	if s.report.last, err = time.Parse(time.DateOnly, st.LastDay); err != nil {
		return fmt.Errorf("accountant: %s: last_day %q is not a date; remove the file to start reporting from today", path, st.LastDay)
	}
	return nil
}

func (s *Server) saveReportState() error {
	path := filepath.Join(s.opts.DataDir, reportStateFile)
	s.report.mu.Lock()
	b, _ := json.Marshal(reportState{LastDay: s.report.last.Format(time.DateOnly)})
	s.report.mu.Unlock()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("accountant: writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("accountant: writing %s: %w", path, err)
	}
	return nil
}

func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// maybeReport sends, in the background, the report of the UTC day that
// ended last when it has not been sent yet: by the runtime plane's owner
// only (its report covers every accountant of the fleet), once the spend
// history is read. A report the webhook does not take is sent again
// reportRetry later; a day missed while the accountant was down is sent
// when it is back (only the last day ended).
func (s *Server) maybeReport(now time.Time) {
	if s.opts.SpendReport == "" || s.mirror != nil || !s.spendState.ready.Load() {
		return
	}
	day := utcDay(now).AddDate(0, 0, -1)
	s.report.mu.Lock()
	due := s.report.last.Before(day) && !now.Before(s.report.retry)
	s.report.mu.Unlock()
	if !due || !s.report.running.CompareAndSwap(false, true) {
		return
	}
	s.report.wg.Add(1)
	go func() {
		defer s.report.wg.Done()
		defer s.report.running.Store(false)
		if err := s.sendReport(day); err != nil {
			s.report.mu.Lock()
			s.report.retry = s.now().Add(reportRetry)
			s.report.mu.Unlock()
			s.log.Error("daily spend report: "+err.Error()+"; sending it again in "+reportRetry.String(), "day", day.Format(time.DateOnly), "url", s.opts.AlertWebhook)
			return
		}
		s.report.mu.Lock()
		s.report.last = day
		s.report.mu.Unlock()
		if err := s.saveReportState(); err != nil {
			s.log.Error("daily spend report: sent, but the day could not be recorded; it may be sent again after a restart", "err", err)
		}
		s.log.Info("daily spend report sent", "day", day.Format(time.DateOnly), "url", s.opts.AlertWebhook)
	}()
}

// buildReport reads the report of the UTC day starting at day.
func (s *Server) buildReport(day time.Time) (*SpendReport, error) {
	from, to := day, day.AddDate(0, 0, 1)
	run := func(groupBy string) (*spend.Report, error) {
		v := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}, "bucket": {"day"}}
		if groupBy != "" {
			v.Set("group_by", groupBy)
			v.Set("top", fmt.Sprint(reportTop))
		}
		q, err := spend.ParseQuery(v, s.now())
		if err != nil {
			return nil, err
		}
		return s.spendReport(q, "")
	}
	rep := &SpendReport{Event: "spend_report", Period: "day", From: from, To: to, Dashboard: s.dashboardURL(),
		TopKeys: []ReportGroup{}, TopUsers: []ReportGroup{}, TopModels: []ReportGroup{}}
	missing := map[string]bool{}
	for _, list := range []struct {
		dim string
		out *[]ReportGroup
	}{{"", nil}, {"key", &rep.TopKeys}, {"user", &rep.TopUsers}, {"model", &rep.TopModels}} {
		r, err := run(list.dim)
		if err != nil {
			return nil, fmt.Errorf("reading the day's spend: %w", err)
		}
		for _, a := range r.Source.Replicas {
			if !a.Answered {
				missing[a.Accountant] = true
			}
		}
		if list.out == nil {
			rep.Total = r.Total
			continue
		}
		var kids []string
		for _, g := range r.Groups {
			if g.Other || g.Total.Requests == 0 {
				continue
			}
			*list.out = append(*list.out, ReportGroup{Key: g.Key[list.dim], Values: g.Total})
			kids = append(kids, g.Key[list.dim])
		}
		if list.dim == "key" && len(kids) > 0 {
			names, err := s.db.KeyNames(kids)
			if err != nil {
				return nil, err
			}
			for i := range *list.out {
				(*list.out)[i].Name = names[(*list.out)[i].Key]
			}
		}
	}
	for a := range missing {
		rep.Partial = append(rep.Partial, a)
	}
	sort.Strings(rep.Partial)
	lim, err := s.spendLimits("")
	if err != nil {
		return nil, err
	}
	rep.Limits = lim.Limits[:min(reportTop, len(lim.Limits))]
	return rep, nil
}

// sendReport builds and posts the report of day.
func (s *Server) sendReport(day time.Time) error {
	rep, err := s.buildReport(day)
	if err != nil {
		return err
	}
	body, err := render(s.alerts.format, rep, reportMessage(rep))
	if err != nil {
		return err
	}
	return s.alerts.send(s.alerts.ctx, body)
}

// reportMessage is what a spend report says in a chat.
func reportMessage(r *SpendReport) message {
	t := r.Total
	usd := func(v config.USD) string { return "$" + v.String() }
	summary := fmt.Sprintf("%s priced and %s estimated over %s (%s refused), %s.",
		usd(t.PricedUSD), usd(t.EstimatedUSD), counted(t.Requests, "request"), thousands(t.Refused), counted(t.InputTokens+t.OutputTokens, "token"))
	if t.UnpricedRequests > 0 {
		summary += fmt.Sprintf(" %s went to models with no price (%s, in no dollar figure).", counted(t.UnpricedRequests, "request"), counted(t.UnpricedTokens, "token"))
	}
	if len(r.Partial) > 0 {
		summary += " Partial: " + strings.Join(r.Partial, ", ") + " did not answer; their replicas' rows are not counted."
	}
	m := message{
		Title:   "Spend on " + r.From.Format("Mon 2 Jan 2006") + " (UTC)",
		Summary: summary,
		Facts: [][2]string{{"Priced", usd(t.PricedUSD)}, {"Estimated", usd(t.EstimatedUSD)}, {"Requests", thousands(t.Requests)},
			{"Refused", thousands(t.Refused)}, {"Unpriced requests", thousands(t.UnpricedRequests)}},
	}
	line := func(g ReportGroup, name string) string {
		s := fmt.Sprintf("%s: %s", name, usd(config.USD{Nanos: g.PricedUSD.Nanos + g.EstimatedUSD.Nanos}))
		if g.UnpricedRequests > 0 {
			s += fmt.Sprintf(" + %s unpriced", counted(g.UnpricedRequests, "request"))
		}
		return s + ", " + counted(g.Requests, "request")
	}
	for _, l := range []struct {
		title string
		gs    []ReportGroup
	}{{"Top keys", r.TopKeys}, {"Top users", r.TopUsers}, {"Top models", r.TopModels}} {
		if len(l.gs) == 0 {
			continue
		}
		sec := section{Title: l.title}
		for _, g := range l.gs {
			name := g.Key
			if name == "" {
				name = "(no key)"
			}
			if g.Name != "" {
				name = g.Name + " (" + g.Key + ")"
			}
			sec.Lines = append(sec.Lines, line(g, name))
		}
		m.Sections = append(m.Sections, sec)
	}
	if len(r.Limits) > 0 {
		sec := section{Title: "Budgets and quotas nearest their caps"}
		for _, l := range r.Limits {
			unit := func(n json.Number) string {
				if l.Unit == "usd" {
					return "$" + string(n)
				}
				v, _ := n.Int64()
				return counted(v, strings.TrimSuffix(l.Unit, "s"))
			}
			when := "this " + l.Period
			if l.Period == "day" {
				when = "today"
			}
			sec.Lines = append(sec.Lines, fmt.Sprintf("%s at %s: %s of %s %s (%.0f%%)", l.LimitID, l.Node, unit(l.Used), unit(l.Amount), when, l.Fraction*100))
		}
		m.Sections = append(m.Sections, sec)
	}
	if r.Dashboard != "" {
		m.Link, m.LinkText = r.Dashboard, "Open the dashboard"
	}
	return m
}

// counted is n of what, in words: "1 request", "2,000 tokens".
func counted(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return thousands(n) + " " + what + "s"
}

// thousands writes n with comma separators.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
