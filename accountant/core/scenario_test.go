package core

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scenario scripts in testdata")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			h := &harness{}
			runScript(t, f, h.do)
		})
	}
}

// harness drives one Core through a script. It keeps every accepted row,
// as the durable ledger would, so restart can replay them.
type harness struct {
	c       *Core
	plan    *govern.Plan
	runtime govern.Runtime
	ledger  []ledger.Row
	names   map[string]string // request id → script name
	tag     uint64
	// ahead and lag bound a live row's skew; the scripts replay history
	// as live, so they are unbounded unless a script says "bounds".
	ahead, lag time.Duration
}

func (h *harness) core() *Core {
	if h.c == nil {
		if h.ahead == 0 {
			h.ahead, h.lag = -1, -1
		}
		h.c = New(Options{VersionPrefix: "v", DedupMaxIDs: 1 << 20, MaxRowAhead: h.ahead, MaxRowLag: h.lag})
	}
	return h.c
}

func (h *harness) do(t *testing.T, cmd string, args map[string]string, input []string) string {
	switch cmd {
	case "arm":
		return h.arm(t, args, input)
	case "ingest":
		return h.ingest(t, args, input)
	case "tick":
		alerts, err := h.core().Tick(parseTime(t, mustArg(t, args, "at")))
		if err != nil {
			return "error: " + err.Error()
		}
		return fmtAlerts(alerts, "ok")
	case "snapshot":
		return h.snapshot(t)
	case "bounds":
		// bounds ahead=5m lag=15m: the skew a live row may have (before
		// the first command that makes the core).
		var err error
		if h.ahead, err = time.ParseDuration(mustArg(t, args, "ahead")); err == nil {
			h.lag, err = time.ParseDuration(mustArg(t, args, "lag"))
		}
		if err != nil || h.c != nil {
			t.Fatalf("bounds: %v (before any other command)", err)
		}
		return "ok"
	case "expire":
		// The server's part: record the closes the core says are due, as
		// an ingest of their own.
		at := parseTime(t, mustArg(t, args, "at"))
		rows := h.core().Expired(at)
		if len(rows) == 0 {
			return "nothing to close"
		}
		h.tag++
		res := h.core().Ingest(at, rows, h.tag)
		var names []string
		for i, o := range res.Outcomes {
			if o == Accepted {
				h.ledger = append(h.ledger, rows[i])
				names = append(names, fmt.Sprintf("%s at in=%d out=%d", h.rename(rows[i].RequestID), rows[i].Usage.Input, rows[i].Usage.Output))
			}
		}
		return "closed " + strings.Join(names, ", ") + "\n" + fmtAlerts(res.Alerts, "")
	case "restart":
		at := parseTime(t, mustArg(t, args, "at"))
		h.c = nil
		c := h.core()
		if h.plan != nil {
			armed, _ := h.plan.Arm(h.runtime)
			c.Arm(at, armed)
		}
		from := c.ReplayFrom(at)
		var rows []ledger.Row
		for _, r := range h.ledger {
			if !r.End.Before(from) {
				rows = append(rows, r)
			}
		}
		res := c.Restore(at, rows)
		return fmt.Sprintf("replayed %d rows from %s (accepted %d, skipped %d)", len(rows), from.Format(time.RFC3339), res.Accepted, res.Rejected)
	case "stats":
		s := h.core().Stats()
		out := fmt.Sprintf("accepted %d, duplicates %d, rejected %d, refused %d, unpriced %d, folded %d, alerts %d, dedup-ids %d, dedup-horizon %s",
			s.Accepted, s.Duplicates, s.Rejected, s.Refused, s.Unpriced, s.Folded, s.Alerts, s.DedupIDs, s.DedupHorizon.Format(time.RFC3339))
		if s.Starts+s.Closes > 0 || h.core().Open() > 0 {
			out += fmt.Sprintf(", starts %d, closes %d, open %d", s.Starts, s.Closes, h.core().Open())
		}
		if s.UpstreamRefused > 0 || s.Overflowed > 0 {
			out += fmt.Sprintf(", upstream-refused %d, overflowed %d", s.UpstreamRefused, s.Overflowed)
		}
		return out
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

// arm compiles the YAML config in input and arms it with the runtime given
// by args: nodes=a,b overrides=limit@node=amount,...
func (h *harness) arm(t *testing.T, args map[string]string, input []string) string {
	var out []string
	if len(input) > 0 {
		g, err := parseGovernanceYAML(strings.Join(input, "\n"))
		if err != nil {
			return "config error: " + err.Error()
		}
		p, err := govern.Compile(g)
		if err != nil {
			return "compile error: " + err.Error()
		}
		h.plan = p
	}
	h.runtime = govern.Runtime{}
	if v := args["nodes"]; v != "" {
		h.runtime.Nodes = strings.Split(v, ",")
	}
	if v := args["overrides"]; v != "" {
		for _, o := range strings.Split(v, ",") {
			lim, rest, _ := strings.Cut(o, "@")
			node, amt, _ := strings.Cut(rest, "=")
			n, err := strconv.ParseInt(amt, 10, 64)
			if err != nil {
				t.Fatalf("override %q: %v", o, err)
			}
			h.runtime.Overrides = append(h.runtime.Overrides, govern.Override{LimitID: lim, Node: node, Amount: n})
		}
	}
	armed, probs := h.plan.Arm(h.runtime)
	for _, p := range probs {
		out = append(out, "problem: "+p.String())
	}
	alerts, err := h.core().Arm(parseTime(t, mustArg(t, args, "at")), armed)
	if err != nil {
		return "error: " + err.Error()
	}
	out = append(out, fmt.Sprintf("armed %d limits", len(h.plan.Limits)))
	return strings.Join(out, "\n") + "\n" + fmtAlerts(alerts, "")
}

// ingest reads one row per input line:
//
//	NAME end=TIME [start=TIME] [node=N] [kid=K] [model=M] [served=M]
//	     [provider=P] [endpoint=E] [in=N] [out=N] [cached=N] [reasoning=N]
//	     [decision=D] [cost=NANOS|unpriced] [replica=ID] [estimated=in|out|both]
//	     [kind=start|summary|close] [count=N] [ttl=DURATION]
//
// NAME is turned into a valid request id (or used as is when it starts with
// tt_ or is "bad:...").
func (h *harness) ingest(t *testing.T, args map[string]string, input []string) string {
	at := parseTime(t, mustArg(t, args, "at"))
	rows := make([]ledger.Row, 0, len(input))
	for _, line := range input {
		rows = append(rows, h.parseRow(t, line))
	}
	h.tag++
	res := h.core().Ingest(at, rows, h.tag)
	for i, o := range res.Outcomes {
		if o == Accepted {
			h.ledger = append(h.ledger, rows[i])
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "accepted %d, duplicates %d, rejected %d, unpriced %d", res.Accepted, res.Duplicates, res.Rejected, res.Unpriced)
	for _, i := range res.Replaced {
		p := rows[i].Replaced
		fmt.Fprintf(&b, ", row %d replaces the estimate in=%d out=%d", i+1, p.Usage.Input, p.Usage.Output)
	}
	if res.WaitTag != 0 {
		fmt.Fprintf(&b, ", wait for tag %d", res.WaitTag)
	}
	if res.Redated != 0 {
		fmt.Fprintf(&b, ", redated %d (largest skew %s)", res.Redated, res.Skew)
	}
	b.WriteString("\n")
	for _, r := range res.Reasons {
		fmt.Fprintf(&b, "rejected: row %d: %s\n", r.Index+1, h.rename(r.Message))
	}
	b.WriteString(fmtAlerts(res.Alerts, ""))
	return b.String()
}

func (h *harness) rename(s string) string {
	for id, name := range h.names {
		s = strings.ReplaceAll(s, id, name)
	}
	return s
}

func (h *harness) parseRow(t *testing.T, line string) ledger.Row {
	f := strings.Fields(line)
	r := ledger.Row{Decision: ledger.Admitted, Provider: "openai", Endpoint: "/v1/chat/completions", Model: "gpt-4o-mini"}
	name := f[0]
	switch {
	case strings.HasPrefix(name, "tt_"), strings.HasPrefix(name, "bad:"):
		r.RequestID = strings.TrimPrefix(name, "bad:")
	default:
		sum := sha256.Sum256([]byte(name))
		r.RequestID = "tt_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
		if h.names == nil {
			h.names = map[string]string{}
		}
		h.names[r.RequestID] = name
	}
	num := func(v string) int64 {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("row %q: %v", line, err)
		}
		return n
	}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "end":
			r.End = parseTime(t, v)
		case "start":
			r.Start = parseTime(t, v)
		case "node":
			r.Node = v
		case "kid":
			r.KID = v
		case "replica":
			r.Replica = v
		case "model":
			r.Model = v
		case "served":
			r.Served = v
		case "provider":
			r.Provider = v
		case "endpoint":
			r.Endpoint = v
		case "in":
			r.Usage.Input = num(v)
		case "out":
			r.Usage.Output = num(v)
		case "cached":
			r.Usage.CachedInput = num(v)
		case "reasoning":
			r.Usage.Reasoning = num(v)
		case "decision":
			r.Decision = ledger.Decision(v)
		case "free":
			r.Free = v == "true"
		case "customer":
			r.Customer = v
		case "tags":
			r.Tags = strings.Split(v, ",")
		case "status":
			r.Status = int(num(v))
		case "estimated":
			r.Estimated = ledger.Estimated{Input: v == "in" || v == "both", Output: v == "out" || v == "both"}
		case "kind":
			r.Kind = ledger.Kind(v)
		case "count":
			r.Count = num(v)
		case "ttl":
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("row %q: %v", line, err)
			}
			r.LeaseTTLMS = d.Milliseconds()
		case "cost":
			if v == "unpriced" {
				r.Cost = &ledger.Cost{Unpriced: true}
			} else {
				r.Cost = &ledger.Cost{Nanos: num(v)}
			}
		default:
			t.Fatalf("row %q: unknown field %q", line, k)
		}
	}
	if r.Start.IsZero() && !r.End.IsZero() {
		r.Start = r.End.Add(-time.Second)
	}
	return r
}

func (h *harness) snapshot(t *testing.T) string {
	s, err := h.core().Snapshot()
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "version %s generated_at %s\n", s.Version, s.GeneratedAt.UTC().Format(time.RFC3339))
	for _, e := range s.Entries {
		fmt.Fprintf(&b, "%s period_start=%s value=%d\n", e.ID, e.PeriodStart.Format("2006-01-02"), e.Value)
	}
	if len(s.Entries) == 0 {
		b.WriteString("(no entries)\n")
	}
	return b.String()
}

func fmtAlerts(alerts []Alert, none string) string {
	var b strings.Builder
	sort.SliceStable(alerts, func(i, j int) bool { return alerts[i].ID < alerts[j].ID })
	for _, a := range alerts {
		fmt.Fprintf(&b, "alert: %s @ %s threshold %g period_start %s value %d / %d\n",
			a.LimitID, a.Node, a.Threshold, a.PeriodStart.Format("2006-01-02"), a.Value, a.Amount)
	}
	if b.Len() == 0 {
		return none
	}
	return b.String()
}

func parseTime(t *testing.T, s string) time.Time {
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return v.UTC()
}

// parseGovernanceYAML reads a governance block written in YAML (the
// document's top key is governance) into the schema.
func parseGovernanceYAML(doc string) (*config.Governance, error) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		return nil, err
	}
	f, err := config.DecodeFile(yamlTree(n.Content[0]))
	if err != nil {
		return nil, err
	}
	return f.Governance, nil
}

func yamlTree(n *yaml.Node) any {
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = yamlTree(n.Content[i+1])
		}
		return m
	case yaml.SequenceNode:
		s := []any{}
		for _, c := range n.Content {
			s = append(s, yamlTree(c))
		}
		return s
	case yaml.AliasNode:
		return yamlTree(n.Alias)
	}
	switch n.Tag {
	case "!!int", "!!float":
		return json.Number(n.Value)
	case "!!bool":
		return n.Value == "true"
	case "!!null":
		return nil
	}
	return n.Value
}
