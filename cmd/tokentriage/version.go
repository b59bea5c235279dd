package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"
)

// version is the release this build is of, set at link time by the
// Makefile (-ldflags "-X main.version=…", from git describe); a build
// without it reports the module's version and the commit Go recorded.
var version = ""

var versionCmd = &command{
	name:    "version",
	usage:   "",
	summary: "print the version of this build (also tokentriage --version)",
	help: `
Prints one line: the release, the commit and its time (with "modified"
when the tree had uncommitted changes), the Go version and the platform.`,
	setup: func(*pflag.FlagSet) func(*env) int {
		return func(e *env) int { return printVersion(e.stdout, e.args, e.stderr) }
	},
}

func printVersion(w io.Writer, args []string, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "tokentriage version: unexpected argument %q\n", args[0])
		return 2
	}
	fmt.Fprintln(w, versionLine())
	return 0
}

// versionLine describes the build: "tokentriage v0.1.0 (commit 1a2b3c4d5e6f,
// 2026-08-14T09:00:00Z) go1.26.0 linux/amd64".
func versionLine() string {
	v := version
	var rev, at string
	modified := false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	line := "tokentriage " + v
	if rev != "" {
		line += " (commit " + rev[:min(12, len(rev))]
		if at != "" {
			line += ", " + at
		}
		if modified {
			line += ", modified"
		}
		line += ")"
	}
	return line + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}
