package ledgerlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Ledger is one accountant's ledger: its files, oldest first.
type Ledger struct {
	// Name is what the ledger was found as: a data directory or a file.
	Name  string
	Files []string
}

// LedgersIn resolves what a user names as one or several ledgers (a
// fleet's: every accountant keeps its own):
//
//   - a file: decisions.jsonl stands for its data directory (it and its
//     rotated siblings), any other file for itself;
//   - a data directory (it holds decisions.jsonl or rotated files): its
//     ledger;
//   - any other directory: a directory of ledgers, one per replica: each
//     subdirectory that is a data directory, and each *.jsonl file in it.
//
// A directory of ledgers that holds none is an empty answer, not an error.
func LedgersIn(path string) ([]Ledger, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("ledgerlog: %w", err)
	}
	if !st.IsDir() {
		files, err := FilesFor(path)
		if err != nil {
			return nil, err
		}
		return []Ledger{{Name: path, Files: files}}, nil
	}
	files, err := Files(path, time.Time{})
	if err != nil {
		return nil, err
	}
	if len(files) > 0 {
		return []Ledger{{Name: path, Files: files}}, nil
	}
	ents, err := os.ReadDir(path) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("ledgerlog: listing %s: %w", path, err)
	}
	var out []Ledger
	for _, e := range ents {
		p := filepath.Join(path, e.Name())
		switch {
		case e.IsDir():
			files, err := Files(p, time.Time{})
			if err != nil {
				return nil, err
			}
			if len(files) > 0 {
				out = append(out, Ledger{Name: p, Files: files})
			}
		case strings.HasSuffix(e.Name(), ".jsonl"):
			out = append(out, Ledger{Name: p, Files: []string{p}})
		}
	}
	return out, nil
}
