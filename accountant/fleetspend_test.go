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
// wildcard address without --advertise announces no address, and one
// announces another's address; the owner's report lists both as not
// answering, says why and what to do, and is partial, never silently
// short. The mirror's own report asks the owner
// (the --control address) and itself.
func TestFleetReportNamesAMirrorWithoutAnAddress(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, testConfig)
	owner := startNode(t, cfg, filepath.Join(dir, "owner"), "127.0.0.1:0", "")
	hidden := startNode(t, cfg, filepath.Join(dir, "hidden"), "0.0.0.0:0", owner.url())
	named := startNode(t, cfg, filepath.Join(dir, "named"), "127.0.0.1:0", owner.url())
	// And one that announces the named mirror's address as its own.
	_ = startNodeAdvertising(t, cfg, filepath.Join(dir, "twin"), owner.url(), named.url())
	ctx := context.Background()
	eventually(t, "the owner's report listing both mirrors", func() (bool, string) {
		rep, err := owner.admin().Spend(ctx, url.Values{})
		if err != nil {
			return false, err.Error()
		}
		var lines []string
		var nameless, other, twinned bool
		for _, r := range rep.Source.Replicas {
			lines = append(lines, fmt.Sprintf("%s answered=%v %s", r.Accountant, r.Answered, r.Error))
			// The twin and the named mirror announced one address: which
			// is listed under it and which under its name depends on the
			// order; the one that is not there is named as such.
			switch {
			case strings.HasSuffix(r.Accountant, "/"+hidden.addr):
				nameless = !r.Answered && strings.Contains(r.Error, "announced no address") && strings.Contains(r.Error, "--advertise")
			case !r.Answered && strings.Contains(r.Error, "it announced "+named.url()+", where accountant ") && strings.Contains(r.Error, "/"+named.addr+`" answers, not it`):
				twinned = true
			case r.Answered && (r.Accountant == named.url() || strings.HasSuffix(r.Accountant, "/"+named.addr)):
				other = true
			}
		}
		return rep.Fleet && rep.Partial && rep.Source.Missing == 2 && rep.Source.Ledgers == 2 && nameless && other && twinned, strings.Join(lines, "; ")
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

// startNodeAdvertising is startNode on loopback with Options.Advertise.
func startNodeAdvertising(t *testing.T, config, data, control, advertise string) *node {
	t.Helper()
	return startNodeWith(t, "127.0.0.1:0", Options{ConfigPath: config, DataDir: data, Control: control, Advertise: advertise})
}
