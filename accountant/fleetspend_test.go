package accountant

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// TestFleetReportNamesAMirrorWithoutAnAddress: a mirror listening on a
// wildcard address without --advertise announces no address; the owner's
// report lists it as not answering, says why and what to do, and is
// partial, never silently short. The mirror's own report asks the owner
// (the --control address) and itself.
func TestFleetReportNamesAMirrorWithoutAnAddress(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, testConfig)
	owner := startNode(t, cfg, filepath.Join(dir, "owner"), "127.0.0.1:0", "")
	hidden := startNode(t, cfg, filepath.Join(dir, "hidden"), "0.0.0.0:0", owner.url())
	named := startNode(t, cfg, filepath.Join(dir, "named"), "127.0.0.1:0", owner.url())
	ctx := context.Background()
	eventually(t, "the owner's report listing both mirrors", func() (bool, string) {
		rep, err := owner.admin().Spend(ctx, url.Values{})
		if err != nil {
			return false, err.Error()
		}
		var lines []string
		var nameless, other bool
		for _, r := range rep.Source.Replicas {
			lines = append(lines, fmt.Sprintf("%s answered=%v %s", r.Accountant, r.Answered, r.Error))
			switch {
			case strings.HasSuffix(r.Accountant, "/"+hidden.addr):
				nameless = !r.Answered && strings.Contains(r.Error, "announced no address") && strings.Contains(r.Error, "--advertise")
			case r.Accountant == named.url():
				other = r.Answered
			}
		}
		return rep.Fleet && rep.Partial && rep.Source.Missing == 1 && rep.Source.Ledgers == 2 && nameless && other, strings.Join(lines, "; ")
	})
	eventually(t, "the named mirror's report asking the owner and itself", func() (bool, string) {
		rep, err := named.admin().Spend(ctx, url.Values{})
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, r := range rep.Source.Replicas {
			got = append(got, fmt.Sprintf("%s=%v", r.Accountant, r.Answered))
		}
		s := strings.Join(got, " ")
		return strings.Contains(s, owner.url()+"=true") && strings.Contains(s, named.url()+"=true") && rep.Partial, s
	})
	rep, err := named.admin().Spend(ctx, url.Values{"fleet": {"false"}})
	if err != nil || rep.Fleet || rep.Source.Replicas != nil {
		t.Fatalf("fleet=false: %v, fleet %v, replicas %v; want this ledger only", err, rep.Fleet, rep.Source.Replicas)
	}
}
