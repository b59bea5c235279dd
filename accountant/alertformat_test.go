package accountant

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// The receivers below check a post against the shape its service
// documents, strictly (an unknown member is refused, as a typo would be
// by the service or silently dropped), and answer as the service does.

// slackMessage is a Slack incoming webhook message with Block Kit blocks
// (https://api.slack.com/messaging/webhooks, the Block Kit reference).
type slackMessage struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

type slackBlock struct {
	Type     string      `json:"type"`
	Text     *slackText  `json:"text"`
	Fields   []slackText `json:"fields"`
	Elements []slackText `json:"elements"`
}

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// checkSlack returns what is wrong with body as a Slack message.
func checkSlack(body []byte) (slackMessage, error) {
	var m slackMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("not a Slack message: %v", err)
	}
	n := func(s string) int { return utf8.RuneCountInString(s) }
	textOK := func(t slackText, max int) error {
		if t.Type != "mrkdwn" && t.Type != "plain_text" || t.Text == "" || n(t.Text) > max {
			return fmt.Errorf("text object %+v: want type mrkdwn or plain_text and 1 to %d characters", t, max)
		}
		return nil
	}
	if m.Text == "" {
		return m, fmt.Errorf("no text: the notification's fallback is required with blocks")
	}
	if len(m.Blocks) == 0 || len(m.Blocks) > 50 {
		return m, fmt.Errorf("%d blocks; a message takes 1 to 50", len(m.Blocks))
	}
	for i, b := range m.Blocks {
		var err error
		switch b.Type {
		case "header":
			if b.Text == nil || b.Text.Type != "plain_text" || len(b.Fields)+len(b.Elements) > 0 {
				err = fmt.Errorf("a header takes one plain_text text")
			} else {
				err = textOK(*b.Text, 150)
			}
		case "section":
			if b.Text == nil && len(b.Fields) == 0 || len(b.Fields) > 10 || len(b.Elements) > 0 {
				err = fmt.Errorf("a section takes text or 1 to 10 fields")
			}
			if b.Text != nil && err == nil {
				err = textOK(*b.Text, 3000)
			}
			for _, f := range b.Fields {
				if err == nil {
					err = textOK(f, 2000)
				}
			}
		case "context":
			if len(b.Elements) == 0 || len(b.Elements) > 10 || b.Text != nil || len(b.Fields) > 0 {
				err = fmt.Errorf("a context takes 1 to 10 elements")
			}
			for _, e := range b.Elements {
				if err == nil {
					err = textOK(e, 3000)
				}
			}
		case "divider":
		default:
			err = fmt.Errorf("type %q is not a layout block", b.Type)
		}
		if err != nil {
			return m, fmt.Errorf("blocks[%d]: %v", i, err)
		}
	}
	return m, nil
}

// teamsMessage is a Teams message carrying Adaptive Cards, as Teams'
// incoming webhooks and Workflows' webhook trigger take it.
type teamsMessage struct {
	Type        string `json:"type"`
	Attachments []struct {
		ContentType string          `json:"contentType"`
		ContentURL  *string         `json:"contentUrl"`
		Content     json.RawMessage `json:"content"`
	} `json:"attachments"`
}

type adaptiveCard struct {
	Schema  string        `json:"$schema"`
	Type    string        `json:"type"`
	Version string        `json:"version"`
	Body    []cardElement `json:"body"`
	Actions []struct {
		Type  string `json:"type"`
		Title string `json:"title"`
		URL   string `json:"url"`
	} `json:"actions"`
}

type cardElement struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Size     string `json:"size"`
	Weight   string `json:"weight"`
	Wrap     bool   `json:"wrap"`
	Spacing  string `json:"spacing"`
	IsSubtle bool   `json:"isSubtle"`
	Facts    []struct {
		Title string `json:"title"`
		Value string `json:"value"`
	} `json:"facts"`
}

// checkTeams returns what is wrong with body as a Teams message with one
// Adaptive Card, and the card.
func checkTeams(body []byte) (adaptiveCard, error) {
	var m teamsMessage
	var c adaptiveCard
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return c, fmt.Errorf("not a Teams message: %v", err)
	}
	if m.Type != "message" || len(m.Attachments) != 1 {
		return c, fmt.Errorf("type %q with %d attachments; want a message with one card", m.Type, len(m.Attachments))
	}
	a := m.Attachments[0]
	if a.ContentType != "application/vnd.microsoft.card.adaptive" {
		return c, fmt.Errorf("contentType %q is not an Adaptive Card's", a.ContentType)
	}
	dec = json.NewDecoder(bytes.NewReader(a.Content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("content is not an Adaptive Card: %v", err)
	}
	if c.Schema != "http://adaptivecards.io/schemas/adaptive-card.json" || c.Type != "AdaptiveCard" || !slices.Contains([]string{"1.0", "1.1", "1.2", "1.3", "1.4", "1.5"}, c.Version) {
		return c, fmt.Errorf("card %q %q version %q", c.Schema, c.Type, c.Version)
	}
	if len(c.Body) == 0 {
		return c, fmt.Errorf("an empty card")
	}
	for i, e := range c.Body {
		switch e.Type {
		case "TextBlock":
			if e.Text == "" || len(e.Facts) > 0 || !slices.Contains([]string{"", "Small", "Default", "Medium", "Large", "ExtraLarge"}, e.Size) ||
				!slices.Contains([]string{"", "Lighter", "Default", "Bolder"}, e.Weight) || !slices.Contains([]string{"", "None", "Small", "Default", "Medium", "Large", "ExtraLarge", "Padding"}, e.Spacing) {
				return c, fmt.Errorf("body[%d]: TextBlock %+v", i, e)
			}
		case "FactSet":
			if len(e.Facts) == 0 || e.Text != "" {
				return c, fmt.Errorf("body[%d]: a FactSet takes facts only", i)
			}
			for _, f := range e.Facts {
				if f.Title == "" || f.Value == "" {
					return c, fmt.Errorf("body[%d]: fact %+v", i, f)
				}
			}
		default:
			return c, fmt.Errorf("body[%d]: element type %q", i, e.Type)
		}
	}
	for _, act := range c.Actions {
		if u, err := url.Parse(act.URL); act.Type != "Action.OpenUrl" || act.Title == "" || err != nil || u.Scheme == "" {
			return c, fmt.Errorf("action %+v", act)
		}
	}
	return c, nil
}

// receiver is a local webhook that checks each post with check and keeps
// the bodies it took; it answers as the service does (Slack 200 "ok",
// Teams 202), or 400 with the problem.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	bad    []string
	got    chan []byte
	fail   bool // answer 500, as a service down
}

func newReceiver(t *testing.T, format string) *receiver {
	r := &receiver{got: make(chan []byte, 16)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		fail := r.fail
		r.mu.Unlock()
		if fail {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		var err error
		switch {
		case req.Header.Get("Content-Type") != "application/json":
			err = fmt.Errorf("Content-Type %q", req.Header.Get("Content-Type"))
		case format == AlertSlack:
			_, err = checkSlack(b)
		case format == AlertTeams:
			_, err = checkTeams(b)
		default:
			if !json.Valid(b) {
				err = fmt.Errorf("not JSON")
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.bad = append(r.bad, err.Error()+": "+string(b))
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.bodies = append(r.bodies, b)
		r.got <- b
		if format == AlertTeams {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) next(t *testing.T, what string) []byte {
	t.Helper()
	select {
	case b := <-r.got:
		return b
	case <-t.Context().Done():
	}
	t.Fatalf("%s: nothing posted", what)
	return nil
}

func (r *receiver) problems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string{}, r.bad...)
}

// TestAlertFormats: a threshold alert posted in each format reaches a
// receiver checking the service's documented shape, and says which limit
// at which node crossed what.
func TestAlertFormats(t *testing.T) {
	for _, format := range AlertFormats {
		t.Run(format, func(t *testing.T) {
			rcv := newReceiver(t, format)
			dir := t.TempDir()
			cfg := writeConfig(t, dir, testConfig)
			s, err := New(Options{ConfigPath: cfg, DataDir: dir, Listen: "127.0.0.1:8791", AlertWebhook: rcv.srv.URL, AlertFormat: format,
				InternalToken: testInternalToken, Now: func() time.Time { return t0 }, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if _, _, err := s.IngestLines(context.Background(), batch(row(reqID(1), t0, "org:acme/team:ml", "gpt-4o-mini", 8, 19))); err != nil {
				t.Fatal(err)
			}
			b := rcv.next(t, "the alert")
			text := string(b)
			for _, want := range []string{"org_monthly_budget", "org:acme", "50%", "$0.0000126", "$0.000001"} {
				if format != AlertJSON && !strings.Contains(text, want) {
					t.Errorf("the %s alert does not say %q: %s", format, want, b)
				}
			}
			switch format {
			case AlertSlack:
				m, _ := checkSlack(b)
				if !strings.HasPrefix(m.Text, "Budget org_monthly_budget at org:acme crossed 50%") || !strings.Contains(text, "http://127.0.0.1:8791/tt/ui/") {
					t.Errorf("slack message %s", b)
				}
			case AlertTeams:
				c, _ := checkTeams(b)
				if c.Body[0].Text != "Budget org_monthly_budget at org:acme crossed 50%" || len(c.Actions) != 1 || c.Actions[0].URL != "http://127.0.0.1:8791/tt/ui/" {
					t.Errorf("teams card %s", b)
				}
			case AlertJSON:
				var ev AlertEvent
				if err := json.Unmarshal(b, &ev); err != nil || ev.Event != "threshold_crossed" || ev.LimitID != "org_monthly_budget" {
					t.Errorf("json alert %s", b)
				}
			}
			if p := rcv.problems(); len(p) > 0 {
				t.Errorf("the receiver refused:\n%s", strings.Join(p, "\n"))
			}
		})
	}
}

// TestDailySpendReport: with --spend-report daily the owner posts, after
// each UTC midnight, the day's spend: totals, top keys by name, users
// and models, and the fullest budgets, in each format's shape. A day is
// sent once (a restart does not send it again); a webhook that fails
// gets it again later.
func TestDailySpendReport(t *testing.T) {
	for _, format := range AlertFormats {
		t.Run(format, func(t *testing.T) {
			rcv := newReceiver(t, format)
			f := &fixture{dir: t.TempDir(), clock: &clock{t: t0}, logs: &bytes.Buffer{}}
			f.config = writeConfig(t, f.dir, testConfig)
			start := func() {
				s, err := New(Options{ConfigPath: f.config, DataDir: filepath.Join(f.dir, "data"), Listen: "127.0.0.1:8791", AdminToken: "admin-secret",
					AlertWebhook: rcv.srv.URL, AlertFormat: format, SpendReport: SpendReportDaily, InternalToken: testInternalToken,
					Now: f.clock.Now, Logger: slog.New(slog.NewTextHandler(f.logs, nil))})
				if err != nil {
					t.Fatal(err)
				}
				f.s = s
				<-s.spendState.readyCh
			}
			start()
			t.Cleanup(func() { f.s.Close() })
			code, body := f.admin(t, http.MethodPost, "/tt/api/v1/keys", `{"owner":"org:acme/team:ml/user:dev1","name":"nightly <batch>"}`)
			var k struct{ KID string }
			json.Unmarshal([]byte(body), &k)
			if code != 201 {
				t.Fatalf("mint: %d %s", code, body)
			}
			r := row(reqID(1), t0, "org:acme/team:ml/user:dev1", "gpt-4o-mini", 1000, 500)
			r.KID = k.KID
			f.ingest(t, batch(r, row(reqID(2), t0, "org:acme/team:search", "claude-unknown-x", 10, 10)))
			// The day's one alert goes first (the tiny org budget is over).
			if b := rcv.next(t, "the alert"); !strings.Contains(string(b), "crossed") {
				t.Fatalf("not the alert: %s", b)
			}
			f.s.tick()                                      // the same day: no report
			f.clock.Set(t0.Add(11*time.Hour + time.Minute)) // 2026-08-10 23:01
			f.s.tick()
			waitIdle(f.s)
			f.clock.Set(time.Date(2026, 8, 11, 0, 0, 5, 0, time.UTC))
			f.s.tick()
			b := rcv.next(t, "the report")
			switch format {
			case AlertJSON:
				var rep SpendReport
				if err := json.Unmarshal(b, &rep); err != nil {
					t.Fatal(err)
				}
				if rep.Event != "spend_report" || !rep.From.Equal(time.Date(2026, 8, 10, 0, 0, 0, 0, time.UTC)) || rep.Total.Requests != 2 ||
					len(rep.TopKeys) != 2 || rep.TopKeys[0].Name != "nightly <batch>" || rep.TopKeys[0].Key != k.KID || rep.Total.UnpricedRequests != 1 ||
					len(rep.TopModels) != 2 || len(rep.Limits) == 0 || rep.Dashboard != "http://127.0.0.1:8791/tt/ui/" {
					t.Errorf("report %s", b)
				}
			case AlertSlack:
				m, _ := checkSlack(b)
				var all []string
				for _, bl := range m.Blocks {
					if bl.Text != nil {
						all = append(all, bl.Text.Text)
					}
				}
				text := strings.Join(all, "\n")
				if !strings.HasPrefix(m.Text, "Spend on Mon 10 Aug 2026 (UTC)") || !strings.Contains(text, "nightly &lt;batch&gt; ("+k.KID+")") ||
					!strings.Contains(text, "1 request went to models with no price") || !strings.Contains(text, "Top models") {
					t.Errorf("slack report %s", b)
				}
			case AlertTeams:
				c, _ := checkTeams(b)
				var all []string
				for _, e := range c.Body {
					all = append(all, e.Text)
				}
				text := strings.Join(all, "\n")
				if c.Body[0].Text != "Spend on Mon 10 Aug 2026 (UTC)" || !strings.Contains(text, "nightly <batch> ("+k.KID+"): $0.00045, 1 request") || !strings.Contains(text, "Budgets and quotas nearest their caps") ||
					!strings.Contains(text, "team_monthly_tokens at org:acme/team:ml: 1,500 tokens of 50,000,000 tokens this month (0%)") {
					t.Errorf("teams report %s", b)
				}
			}
			waitIdle(f.s)
			// Sent once: a later tick and a restart send nothing more.
			f.clock.Set(time.Date(2026, 8, 11, 6, 0, 0, 0, time.UTC))
			f.s.tick()
			f.s.Close()
			start()
			f.s.tick()
			waitIdle(f.s)
			select {
			case b := <-rcv.got:
				t.Fatalf("posted again: %s\n%s", b, f.logs)
			default:
			}
			// The next day, with the webhook down: sent again later.
			rcv.mu.Lock()
			rcv.fail = true
			rcv.mu.Unlock()
			f.clock.Set(time.Date(2026, 8, 12, 0, 1, 0, 0, time.UTC))
			f.s.tick()
			waitIdle(f.s)
			if !strings.Contains(f.logs.String(), "daily spend report: answered 500 Internal Server Error; sending it again in 5m0s") {
				t.Fatalf("a failed report is not said:\n%s", f.logs)
			}
			rcv.mu.Lock()
			rcv.fail = false
			rcv.mu.Unlock()
			f.clock.Set(time.Date(2026, 8, 12, 0, 3, 0, 0, time.UTC))
			f.s.tick() // too soon
			waitIdle(f.s)
			f.clock.Set(time.Date(2026, 8, 12, 0, 7, 0, 0, time.UTC))
			f.s.tick()
			if b := rcv.next(t, "the report sent again"); !strings.Contains(string(b), "11 Aug 2026") && !strings.Contains(string(b), "2026-08-11") {
				t.Errorf("the second day's report: %s", b)
			}
			if p := rcv.problems(); len(p) > 0 {
				t.Errorf("the receiver refused:\n%s", strings.Join(p, "\n"))
			}
		})
	}
}

// waitIdle waits until no report is being sent.
func waitIdle(s *Server) {
	for s.report.running.Load() {
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSpendReportNeedsAWebhook(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, testConfig)
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{SpendReport: SpendReportDaily}, "accountant: a spend report goes to the alert webhook; give --alert-webhook URL too"},
		{Options{SpendReport: "hourly", AlertWebhook: "http://x"}, `accountant: spend report "hourly" is not daily (or none)`},
		{Options{AlertFormat: "discord", AlertWebhook: "http://x"}, `accountant: alert format "discord" is not one of json, slack, teams`},
	} {
		c.o.ConfigPath, c.o.DataDir, c.o.InternalToken = cfg, dir, testInternalToken
		if _, err := New(c.o); err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v; want %s", c.o, err, c.want)
		}
	}
}
