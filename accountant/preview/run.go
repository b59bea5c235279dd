package preview

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
	"github.com/tokentriage/tokentriage/accountant/pricing"
	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
)

// Options are the inputs of a preview run.
type Options struct {
	// ConfigPath is the proposed config (YAML or JSON).
	ConfigPath string
	// LogPath names the ledger: decisions.jsonl (with its rotated
	// siblings), a data directory, or any one ledger file; or a directory
	// of ledgers, one per replica (ledgerlog.LedgersIn).
	LogPath string
	// LogPaths name more ledgers. Every ledger named is replayed as one
	// fleet: a row found in more than one (by request id) counts once.
	LogPaths []string
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
	ledgers, files, err := ledgersOf(o)
	if err != nil {
		return err
	}
	fleet := len(ledgers) > 1
	seen := map[[17]byte]struct{}{} // rows replayed (ledger.Row.Key), when several ledgers are
	var repeated int64
	r := New(armed, o.At, o.Pricing)
	progress := ledgerlog.Progress{Report: o.Progress, Total: ledgerlog.Size(files)}
	for _, f := range files {
		unreadable := func(n int, torn bool, err error) {
			r.Unreadable()
			if o.Unreadable != nil {
				o.Unreadable(f, n, torn, err)
			}
		}
		err := ledgerlog.ScanRows(f, &progress, unreadable, func(n int, row ledger.Row) error {
			if fleet {
				if id, ok := row.Key(); ok {
					if _, dup := seen[id]; dup {
						repeated++
						return nil
					}
					seen[id] = struct{}{}
				}
			}
			r.Add(&row)
			return nil
		})
		if err != nil {
			return err
		}
	}
	progress.Finish()
	if st := r.stats; st.Rows == 0 && st.Unreadable > 0 {
		return fmt.Errorf("none of the %d lines of %s is a ledger row; --log takes decisions.jsonl, the accountant's data directory, or a ledger file", st.Unreadable, strings.Join(logPaths(o), ", "))
	}
	if fleet {
		names := make([]string, len(ledgers))
		for i, l := range ledgers {
			names[i] = l.Name
		}
		notes = append(notes, fmt.Sprintf("fleet: %d ledgers replayed as one (%s); %d rows found in more than one ledger counted once",
			len(ledgers), strings.Join(names, ", "), repeated))
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

// logPaths are the ledgers the options name, LogPath first.
func logPaths(o Options) []string {
	if o.LogPath == "" {
		return o.LogPaths
	}
	return append([]string{o.LogPath}, o.LogPaths...)
}

// ledgersOf resolves every ledger the options name, and their files in
// replay order; a file named twice (a data directory and its
// decisions.jsonl) is read once.
func ledgersOf(o Options) ([]ledgerlog.Ledger, []string, error) {
	paths := logPaths(o)
	if len(paths) == 0 {
		return nil, nil, errors.New("no ledger named; --log takes decisions.jsonl, the accountant's data directory, a ledger file, or a directory of them (one per replica)")
	}
	var ledgers []ledgerlog.Ledger
	var files []string
	read := map[string]bool{}
	for _, p := range paths {
		ls, err := ledgerlog.LedgersIn(p)
		if err != nil {
			return nil, nil, err
		}
		if len(ls) == 0 {
			return nil, nil, fmt.Errorf("%s holds no ledger (no %s, no decisions-*.jsonl, no data directory or .jsonl file of one in it); --log takes decisions.jsonl, the accountant's data directory, a ledger file, or a directory of them (one per replica)", p, ledgerlog.ActiveName)
		}
		for _, l := range ls {
			var fresh []string
			for _, f := range l.Files {
				abs, err := filepath.Abs(f)
				if err != nil {
					abs = f
				}
				if !read[abs] {
					read[abs] = true
					fresh = append(fresh, f)
				}
			}
			if len(fresh) > 0 {
				ledgers = append(ledgers, ledgerlog.Ledger{Name: l.Name, Files: fresh})
				files = append(files, fresh...)
			}
		}
	}
	return ledgers, files, nil
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
