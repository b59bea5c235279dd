package govern

import (
	"github.com/tokentriage/tokentriage/shared/config"
)

// Problem is one thing wrong with a governance configuration or runtime
// plane. Path is the config path it sits at (governance.limits[2].period,
// runtime.overrides[0]).
//
// Limit is set on the problems seed 002 and seed 004 report from a limit's
// compile step at boot; those render in the seeds' words,
//
//	governance: compile limits: govern: limit "team_rpm": rpm requires ...
//
// while every other problem renders as "path: message".
type Problem struct {
	Path    string
	Message string
	Limit   string
	// Node is the node a pinned limit names when it is not in the tenancy
	// tree, so a caller that knows the runtime plane can say more.
	Node string
}

// String renders the problem the way validate prints it.
func (p Problem) String() string {
	if p.Limit != "" {
		return `governance: compile limits: govern: limit "` + p.Limit + `": ` + p.Message
	}
	return config.Problem{Path: p.Path, Message: p.Message}.String()
}

// Problems is every problem Compile found. It is the error Compile returns.
type Problems []Problem

// Error renders every problem, one per line.
func (ps Problems) Error() string { return config.Lines(ps) }

var _ error = Problems(nil)

// FromConfig turns decode problems into Problems, so a caller that both
// decodes and compiles reports one list.
func FromConfig(ps config.Problems) Problems {
	out := make(Problems, len(ps))
	for i, p := range ps {
		out[i] = Problem{Path: p.Path, Message: p.Message}
	}
	return out
}
