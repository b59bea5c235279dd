package accountant

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The shapes the alert webhook's posts take (--alert-format).
const (
	// AlertJSON posts tokentriage's own documents: an AlertEvent per
	// threshold crossing, a SpendReport per day.
	AlertJSON = "json"
	// AlertSlack posts a Slack incoming webhook message: a text fallback
	// and Block Kit blocks (a header, sections with fields, a context),
	// within Slack's limits (150 characters of header, 3,000 of section
	// text, 10 fields of 2,000, 50 blocks).
	AlertSlack = "slack"
	// AlertTeams posts a Microsoft Teams message carrying one Adaptive
	// Card (type message, an attachment of contentType
	// application/vnd.microsoft.card.adaptive), the shape Teams' incoming
	// webhooks and the Workflows app's "when a webhook request is
	// received" flows take.
	AlertTeams = "teams"
)

// AlertFormats are the formats --alert-format takes.
var AlertFormats = []string{AlertJSON, AlertSlack, AlertTeams}

// CheckAlertFormat refuses a format that is not one of AlertFormats.
func CheckAlertFormat(f string) error {
	for _, x := range AlertFormats {
		if f == x {
			return nil
		}
	}
	return fmt.Errorf("alert format %q is not one of %s", f, strings.Join(AlertFormats, ", "))
}

// message is what an alert or a report says, before a format renders it
// for a chat: a title, a one-line summary (also the notification's
// fallback text), facts as name and value, sections of lines, and an
// optional link.
type message struct {
	Title    string
	Summary  string
	Facts    [][2]string
	Sections []section
	Link     string
	LinkText string
}

type section struct {
	Title string
	Lines []string
}

// Slack's and Adaptive Cards' limits a rendering keeps within.
const (
	slackHeaderMax  = 150
	slackTextMax    = 3000
	slackFieldMax   = 2000
	slackFieldsMax  = 10
	slackBlocksMax  = 50
	slackContextMax = 10
)

// slackEscape escapes what Slack's mrkdwn reads as markup: &, < and >
// (so a node or model name never pings a channel or forms a link).
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// clip cuts s to at most n characters, ending it with … when cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// slackPayload renders m as a Slack incoming webhook message.
func slackPayload(m message) ([]byte, error) {
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type block struct {
		Type     string `json:"type"`
		Text     *text  `json:"text,omitempty"`
		Fields   []text `json:"fields,omitempty"`
		Elements []text `json:"elements,omitempty"`
	}
	blocks := []block{{Type: "header", Text: &text{Type: "plain_text", Text: clip(m.Title, slackHeaderMax)}}}
	if m.Summary != "" {
		blocks = append(blocks, block{Type: "section", Text: &text{Type: "mrkdwn", Text: clip(slackEscape(m.Summary), slackTextMax)}})
	}
	for i := 0; i < len(m.Facts); i += slackFieldsMax {
		var fields []text
		for _, f := range m.Facts[i:min(len(m.Facts), i+slackFieldsMax)] {
			fields = append(fields, text{Type: "mrkdwn", Text: clip("*"+slackEscape(f[0])+"*\n"+slackEscape(f[1]), slackFieldMax)})
		}
		blocks = append(blocks, block{Type: "section", Fields: fields})
	}
	for _, s := range m.Sections {
		// One section per run of lines that fits in a section's text.
		var b strings.Builder
		flush := func() {
			if b.Len() > 0 {
				blocks = append(blocks, block{Type: "section", Text: &text{Type: "mrkdwn", Text: b.String()}})
				b.Reset()
			}
		}
		b.WriteString("*" + slackEscape(s.Title) + "*")
		for _, l := range s.Lines {
			line := "\n• " + clip(slackEscape(l), slackTextMax-10)
			if utf8.RuneCountInString(b.String())+utf8.RuneCountInString(line) > slackTextMax {
				flush()
				line = line[1:]
			}
			b.WriteString(line)
		}
		flush()
	}
	if m.Link != "" {
		blocks = append(blocks, block{Type: "context", Elements: []text{{Type: "mrkdwn", Text: "<" + slackEscape(m.Link) + "|" + slackEscape(m.LinkText) + ">"}}})
	}
	if len(blocks) > slackBlocksMax {
		blocks = append(blocks[:slackBlocksMax-1], block{Type: "context", Elements: []text{{Type: "mrkdwn", Text: "(more in the dashboard)"}}})
	}
	return json.Marshal(struct {
		Text   string  `json:"text"`
		Blocks []block `json:"blocks"`
	}{Text: m.Title + ": " + m.Summary, Blocks: blocks})
}

// teamsPayload renders m as a Teams message holding one Adaptive Card.
func teamsPayload(m message) ([]byte, error) {
	type fact struct {
		Title string `json:"title"`
		Value string `json:"value"`
	}
	type element struct {
		Type     string `json:"type"`
		Text     string `json:"text,omitempty"`
		Size     string `json:"size,omitempty"`
		Weight   string `json:"weight,omitempty"`
		Wrap     bool   `json:"wrap,omitempty"`
		Spacing  string `json:"spacing,omitempty"`
		IsSubtle bool   `json:"isSubtle,omitempty"`
		Facts    []fact `json:"facts,omitempty"`
	}
	type action struct {
		Type  string `json:"type"`
		Title string `json:"title"`
		URL   string `json:"url"`
	}
	type card struct {
		Schema  string    `json:"$schema"`
		Type    string    `json:"type"`
		Version string    `json:"version"`
		Body    []element `json:"body"`
		Actions []action  `json:"actions,omitempty"`
	}
	type attachment struct {
		ContentType string  `json:"contentType"`
		ContentURL  *string `json:"contentUrl"`
		Content     card    `json:"content"`
	}
	body := []element{{Type: "TextBlock", Text: m.Title, Size: "Medium", Weight: "Bolder", Wrap: true}}
	if m.Summary != "" {
		body = append(body, element{Type: "TextBlock", Text: m.Summary, Wrap: true})
	}
	if len(m.Facts) > 0 {
		fs := element{Type: "FactSet"}
		for _, f := range m.Facts {
			fs.Facts = append(fs.Facts, fact{Title: f[0], Value: f[1]})
		}
		body = append(body, fs)
	}
	for _, s := range m.Sections {
		body = append(body, element{Type: "TextBlock", Text: s.Title, Weight: "Bolder", Wrap: true, Spacing: "Medium"})
		for _, l := range s.Lines {
			body = append(body, element{Type: "TextBlock", Text: "- " + l, Wrap: true, Spacing: "None"})
		}
	}
	c := card{Schema: "http://adaptivecards.io/schemas/adaptive-card.json", Type: "AdaptiveCard", Version: "1.4", Body: body}
	if m.Link != "" {
		c.Actions = []action{{Type: "Action.OpenUrl", Title: m.LinkText, URL: m.Link}}
	}
	return json.Marshal(struct {
		Type        string       `json:"type"`
		Attachments []attachment `json:"attachments"`
	}{Type: "message", Attachments: []attachment{{ContentType: "application/vnd.microsoft.card.adaptive", Content: c}}})
}

// render is the body of a post in format: doc as JSON for AlertJSON, m
// for a chat otherwise.
func render(format string, doc any, m message) ([]byte, error) {
	switch format {
	case AlertSlack:
		return slackPayload(m)
	case AlertTeams:
		return teamsPayload(m)
	}
	return json.Marshal(doc)
}

// alertMessage is what a threshold alert says in a chat.
func alertMessage(ev AlertEvent, link string) message {
	what := map[string]string{"budget_usd": "Budget", "quota_tokens": "Token quota", "quota_requests": "Request quota",
		"rpm": "Request rate", "tpm": "Token rate", "concurrency": "Concurrency"}[ev.LimitType]
	if what == "" {
		what = "Limit"
	}
	pct := fmt.Sprintf("%g%%", ev.Threshold*100)
	observed, limit := figure(ev.Unit, ev.Observed), figure(ev.Unit, ev.Limit)
	period := ev.Period
	if period == "" {
		period = "now"
	} else if ev.LimitType == "rpm" || ev.LimitType == "tpm" || ev.LimitType == "concurrency" {
		period = "in a " + period + " window"
	} else if period == "day" {
		period = "today"
	} else {
		period = "this " + period
	}
	m := message{
		Title:   fmt.Sprintf("%s %s at %s crossed %s", what, ev.LimitID, ev.Node, pct),
		Summary: fmt.Sprintf("%s of %s %s; it resets at %s.", observed, limit, period, ev.ResetsAt.UTC().Format("2006-01-02 15:04 UTC")),
		Facts: [][2]string{{"Limit", ev.LimitID + " (" + ev.LimitType + ")"}, {"Node", ev.Node}, {"Threshold", pct},
			{"Observed", observed}, {"Amount", limit}, {"Resets", ev.ResetsAt.UTC().Format("2006-01-02 15:04 UTC")}},
	}
	if link != "" {
		m.Link, m.LinkText = link, "Open the dashboard"
	}
	return m
}

// figure renders an amount of unit: dollars with $, a count with its
// unit.
func figure(unit string, v json.RawMessage) string {
	if unit == "usd" {
		return "$" + string(v)
	}
	return string(v) + " " + unit
}
