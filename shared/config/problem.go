package config

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a configuration: the config path it sits
// at (governance.limits[0].attach) and what is wrong there.
type Problem struct {
	Path    string
	Message string
}

// String renders the problem as "path: message", the form the validate
// command prints one per line.
func (p Problem) String() string {
	if p.Path == "" {
		return "top level: " + p.Message
	}
	return p.Path + ": " + p.Message
}

// Problems is every problem found in one configuration. Decoding collects
// them all rather than stopping at the first.
type Problems []Problem

// Error renders every problem, one per line.
func (ps Problems) Error() string { return Lines(ps) }

// Lines renders problems one per line.
func Lines[P fmt.Stringer](ps []P) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

var _ error = Problems(nil)

// JoinPath appends a field name to a config path.
func JoinPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}
