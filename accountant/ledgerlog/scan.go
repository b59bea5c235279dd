package ledgerlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// rotatedLayout is the timestamp in a rotated file's name; it sorts
// lexically in time order.
const rotatedLayout = "20060102T150405.000000000Z"

// RotationSlack is how far a row's end time may trail its file's rotation
// time (clock skew between filters and the accountant, late rows). Files
// rotated longer than this before a replay's start are skipped.
const RotationSlack = time.Hour

// RotatedName is the name a file rotated at t gets.
func RotatedName(t time.Time) string {
	return "decisions-" + t.UTC().Format(rotatedLayout) + ".jsonl"
}

// rotatedAt parses a rotated file's name.
func rotatedAt(name string) (time.Time, bool) {
	s, ok := strings.CutPrefix(name, "decisions-")
	if !ok {
		return time.Time{}, false
	}
	s, ok = strings.CutSuffix(s, ".jsonl")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(rotatedLayout, s)
	return t, err == nil
}

// Files lists the ledger files of dir oldest first: the rotated files in
// rotation order, then the active file. Files rotated more than
// RotationSlack before from are left out (none of their rows can end at or
// after from); a zero from lists every file.
func Files(dir string, from time.Time) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ledgerlog: listing %s: %w", dir, err)
	}
	var rotated []string
	active := ""
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		if e.Name() == ActiveName {
			active = filepath.Join(dir, ActiveName)
			continue
		}
		t, ok := rotatedAt(e.Name())
		if !ok {
			continue
		}
		if !from.IsZero() && t.Before(from.Add(-RotationSlack)) {
			continue
		}
		rotated = append(rotated, e.Name())
	}
	sort.Strings(rotated)
	out := make([]string, 0, len(rotated)+1)
	for _, n := range rotated {
		out = append(out, filepath.Join(dir, n))
	}
	if active != "" {
		out = append(out, active)
	}
	return out, nil
}

// FilesFor resolves what a user names as a ledger: a directory (its ledger
// files), decisions.jsonl (it and its rotated siblings), or any other file
// (that file alone).
func FilesFor(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("ledgerlog: %w", err)
	}
	if st.IsDir() {
		return Files(path, time.Time{})
	}
	if filepath.Base(path) == ActiveName {
		return Files(filepath.Dir(path), time.Time{})
	}
	return []string{path}, nil
}

// ScanFile calls fn with every non-empty line of the file at path, in
// order, without its newline. The slice is only valid during the call. A
// last line without a newline (torn) is passed too; the parser decides.
func ScanFile(path string, fn func(line []byte) error) error {
	return ScanLines(path, func(_ int, line []byte, _ bool) error { return fn(line) })
}

// ScanLines is ScanFile that also gives each line's number in the file
// (1-based, empty lines counted) and whether it is a last line without a
// newline: a write a crash cut short, or a file that is not a ledger.
func ScanLines(path string, fn func(n int, line []byte, torn bool) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("ledgerlog: %w", err)
	}
	defer f.Close()
	return scan(f, fn)
}

// Size returns the total size in bytes of files, for progress reporting.
func Size(files []string) int64 {
	var n int64
	for _, p := range files {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}

func scan(r io.Reader, fn func(n int, line []byte, torn bool) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var long []byte
	n := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			continue
		}
		line := chunk
		if long != nil {
			long = append(long, chunk...)
			line = long
		}
		n++
		torn := len(line) > 0 && line[len(line)-1] != '\n'
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			if ferr := fn(n, line, torn); ferr != nil {
				return ferr
			}
		}
		long = long[:0:0]
		long = nil
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("ledgerlog: reading: %w", err)
		}
	}
}
