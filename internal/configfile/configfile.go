// Package configfile loads a tokentriage configuration file from disk into
// a *config.File. YAML (go.yaml.in/yaml/v3) and JSON (config.ParseJSON) are
// both turned into the generic tree shared/config decodes strictly, so the
// two spellings accept the same documents; number literals reach the
// decoder exactly as written, as config.Number (a dollar amount never
// passes through a float).
package configfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tokentriage/tokentriage/shared/config"
)

// ReadError is a configuration file that could not be read at all.
type ReadError struct {
	Path string
	Err  error
}

func (e *ReadError) Error() string {
	cause := errors.Unwrap(e.Err)
	if cause == nil {
		cause = e.Err
	}
	return fmt.Sprintf("cannot read the config file %s: %v", e.Path, cause)
}

func (e *ReadError) Unwrap() error { return e.Err }

// Load reads and decodes the file at path. The error is a *ReadError when
// the file cannot be read, a *config.SyntaxError when it cannot be parsed,
// and a config.Problems when it parses but does not fit the schema.
func Load(path string) (*config.File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &ReadError{Path: path, Err: err}
	}
	return Parse(path, b)
}

// Parse decodes the bytes of a configuration file; name chooses the syntax
// by extension (.json is JSON, .yaml and .yml are YAML, anything else is
// JSON when its first character is "{" and YAML otherwise).
func Parse(name string, b []byte) (*config.File, error) {
	tree, err := ParseTree(name, b)
	if err != nil {
		return nil, err
	}
	return config.DecodeFile(tree)
}

// ParseTree parses the bytes of a configuration file into the generic tree.
// A leading UTF-8 byte order mark, which some editors write, is skipped in
// both spellings.
func ParseTree(name string, b []byte) (any, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	if isJSON(name, b) {
		return config.ParseJSON(b)
	}
	return ParseYAML(b)
}

func isJSON(name string, b []byte) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return true
	case ".yaml", ".yml":
		return false
	}
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] == '{'
}
