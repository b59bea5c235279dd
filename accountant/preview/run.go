package preview

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// Options are the inputs of a preview run.
type Options struct {
	// ConfigPath is the proposed config (YAML or JSON).
	ConfigPath string
	// LogPath names the ledger: decisions.jsonl (with its rotated
	// siblings), a data directory, or any one ledger file.
	LogPath string
	// At picks the calendar periods EXACT recomputes.
	At time.Time
	// Pricing prices rows recorded without a cost. Nil: built-in catalog.
	Pricing *pricing.Catalog
	// Runtime is the runtime plane to arm with (nodes, overrides).
	Runtime govern.Runtime
	// Progress, when set, is told the bytes read so far out of the total.
	Progress func(done, total int64)
	// Unreadable, when set, is told each line that is not a ledger row (it
	// is skipped, and counted in the report): its file, its line number,
	// whether it is a last line without a newline (a write cut short by a
	// crash), and why it does not parse.
	Unreadable func(file string, line int, torn bool, err error)
	// JSON writes the report as one JSON Document instead of text.
	JSON bool
	// Live, when set, reads the running accountant's counters once the
	// ledger is replayed, for the closing stanza. Nil: the report closes
	// with a line saying how to compare with the live counters.
	Live func() Live
}

// ConfigError is a proposed config that does not load or compile; Problems
// lists every problem with its config path.
type ConfigError struct {
	Path     string
	Problems []string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s: %d problem(s)", e.Path, len(e.Problems))
}

// Run compiles the config, replays the ledger and writes the report to w.
func Run(w io.Writer, o Options) error {
	plan, err := compile(o.ConfigPath)
	if err != nil {
		return err
	}
	// The runtime plane's problems (a colliding node, a dropped override)
	// are the accountant's warnings too: reported, the rest armed.
	armed, probs := plan.Arm(o.Runtime)
	var notes []string
	for _, p := range probs {
		notes = append(notes, "runtime plane: "+p.String())
	}
	files, err := ledgerlog.FilesFor(o.LogPath)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s holds no ledger (no %s, no decisions-*.jsonl); --log takes decisions.jsonl, the accountant's data directory, or a ledger file", o.LogPath, ledgerlog.ActiveName)
	}
	r := New(armed, o.At, o.Pricing)
	total := ledgerlog.Size(files)
	var done, next int64
	for _, f := range files {
		err := ledgerlog.ScanLines(f, func(n int, line []byte, torn bool) error {
			done += int64(len(line)) + 1
			if o.Progress != nil && done >= next {
				o.Progress(done, total)
				next = done + 1<<20
			}
			row, err := ledgerlog.ParseRow(line)
			if err != nil {
				r.Unreadable()
				if o.Unreadable != nil {
					o.Unreadable(f, n, torn, err)
				}
				return nil
			}
			r.Add(&row)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if o.Progress != nil {
		o.Progress(total, total)
	}
	if st := r.stats; st.Rows == 0 && st.Unreadable > 0 {
		return fmt.Errorf("none of the %d lines of %s is a ledger row; --log takes decisions.jsonl, the accountant's data directory, or a ledger file", st.Unreadable, o.LogPath)
	}
	src := Source{Config: o.ConfigPath, Plan: plan.Hash, Files: files, Notes: notes}
	if o.Live != nil {
		lv := o.Live()
		src.Live = &lv
	}
	if o.JSON {
		return r.WriteJSON(w, src)
	}
	return r.Write(w, src)
}

func compile(path string) (*govern.Plan, error) {
	f, err := configfile.Load(path)
	if err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			ce := &ConfigError{Path: path}
			for _, p := range govern.FromConfig(ps) {
				ce.Problems = append(ce.Problems, p.String())
			}
			return nil, ce
		}
		return nil, err
	}
	p, err := govern.Compile(f.Governance)
	if err != nil {
		var ps govern.Problems
		if errors.As(err, &ps) {
			ce := &ConfigError{Path: path}
			for _, p := range ps {
				ce.Problems = append(ce.Problems, p.String())
			}
			return nil, ce
		}
		return nil, err
	}
	return p, nil
}
