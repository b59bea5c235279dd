// Package accountanttest runs an accountant in the test's own process,
// behind an httptest server, for the tests of packages that talk to one
// (the preview's live comparison, the CLI's commands, the dashboard).
package accountanttest

import (
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokentriage/tokentriage/accountant"
	"github.com/tokentriage/tokentriage/accountant/ledgerlog"
)

// Serve starts an accountant with o (its log discarded when o names no
// logger) behind an httptest server, both closed when the test ends, and
// returns the server's URL.
func Serve(tb testing.TB, o accountant.Options) string {
	tb.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := accountant.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	tb.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	return srv.URL
}

// LedgerDir is a new data directory whose active ledger holds ledger.
func LedgerDir(tb testing.TB, ledger []byte) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ledgerlog.ActiveName), ledger, 0o644); err != nil {
		tb.Fatal(err)
	}
	return dir
}
