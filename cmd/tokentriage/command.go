package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tokentriage/tokentriage/accountant"
)

// command is one tokentriage subcommand. Each lives in its own file
// (validate.go, ...) as a package-level *command and is listed once in the
// commands table (commands.go).
type command struct {
	// name is the words that select the command: "validate",
	// "govern preview".
	name string
	// usage follows the name on the usage line: "-c FILE".
	usage string
	// summary is the one line shown in the command list.
	summary string
	// help is the longer description --help prints above the flags.
	help string
	// setup defines the command's flags on fs and returns the function that
	// runs it once they are parsed.
	setup func(fs *pflag.FlagSet) func(e *env) int
}

// env is what a command runs with.
type env struct {
	ctx    context.Context // cancelled on SIGINT / SIGTERM
	args   []string        // positional arguments left after the flags
	stdout io.Writer
	stderr io.Writer
	name   string // the command's name, for messages
}

// failf prints "tokentriage <cmd>: message" on stderr and returns code.
func (e *env) failf(code int, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "tokentriage %s: %s\n", e.name, fmt.Sprintf(format, args...))
	return code
}

// bootFailure prints a config that does not load or compile the way the
// seeds show a boot failure: each problem on a line of its own,
//
//	Error: governance: compile limits: govern: limit "team_tpm": tpm limit "team_tpm": burst 500 is below ...
//
// then one line naming the file, and returns exit status 1. ok is false
// when err is not such a config.
func (e *env) bootFailure(err error) (code int, ok bool) {
	var ce *accountant.ConfigError
	if !errors.As(err, &ce) {
		return 0, false
	}
	for _, p := range ce.Problems {
		fmt.Fprintf(e.stderr, "Error: %s\n", p)
	}
	what := "does not load"
	if ce.Compile {
		what = "does not compile"
	}
	return e.failf(1, "%s %s (%d problem(s)); nothing was started", ce.Path, what, len(ce.Problems)), true
}

// run dispatches args to a command.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr, "")
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		if args[0] == "help" && len(args) > 1 {
			return run(ctx, append(args[1:], "--help"), stdout, stderr)
		}
		usage(stdout, "")
		return 0
	case "--version", "-V":
		return printVersion(stdout, args[1:], stderr)
	}
	cmd, rest := lookup(args)
	if cmd == nil {
		group := leadingWords(args)
		if len(group) > 0 && hasGroup(strings.Join(group, " ")) {
			g := strings.Join(group, " ")
			if wantsHelp(args[len(group):]) {
				usage(stdout, g)
				return 0
			}
			fmt.Fprintf(stderr, "tokentriage %s: a subcommand is required\n\n", g)
			usage(stderr, g)
			return 2
		}
		if len(group) == 0 {
			fmt.Fprintf(stderr, "tokentriage: %q is not a command or a flag tokentriage takes before one (--help, --version)\n\n", args[0])
			usage(stderr, "")
			return 2
		}
		name := strings.Join(group, " ")
		fmt.Fprintf(stderr, "tokentriage: unknown command %q\n", name)
		if m := meanLine(suggestCommand(group)); m != "" {
			fmt.Fprintln(stderr, m)
		}
		fmt.Fprintln(stderr)
		usage(stderr, "")
		return 2
	}

	fs := pflag.NewFlagSet("tokentriage "+cmd.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are printed below
	fs.SortFlags = false
	runFn := cmd.setup(fs)
	help := fs.BoolP("help", "h", false, "show this help")
	err := fs.Parse(rest)
	if *help || errors.Is(err, pflag.ErrHelp) {
		commandHelp(stdout, cmd, fs)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "tokentriage %s: %v\n", cmd.name, err)
		if m := flagSuggestion(err, fs); m != "" {
			fmt.Fprintln(stderr, m)
		}
		fmt.Fprintf(stderr, "Run 'tokentriage %s --help' for usage.\n", cmd.name)
		return 2
	}
	return runFn(&env{ctx: ctx, args: fs.Args(), stdout: stdout, stderr: stderr, name: cmd.name})
}

// suggestCommand is the command names nearest to the words typed: the
// whole run of them ("govern previw" → "govern preview"), else its first
// word ("spnd" → "spend").
func suggestCommand(words []string) []string {
	names := commandNames()
	typed := strings.Join(words, " ")
	if s := closest(typed, names); len(s) > 0 {
		return s
	}
	if len(words) > 1 {
		for _, n := range closest(words[0], names) {
			// The group's commands, or the command itself.
			var sub []string
			for _, c := range commands {
				if strings.HasPrefix(c.name, n+" ") {
					sub = append(sub, c.name)
				}
			}
			if s := closest(typed, sub); len(s) > 0 {
				return s
			}
			if len(sub) > 0 {
				return sub
			}
			return []string{n}
		}
	}
	return nil
}

// lookup finds the command whose name is the longest run of leading words
// of args, and returns the arguments after it.
func lookup(args []string) (*command, []string) {
	words := leadingWords(args)
	for n := len(words); n > 0; n-- {
		name := strings.Join(words[:n], " ")
		for _, c := range commands {
			if c.name == name {
				return c, args[n:]
			}
		}
	}
	return nil, nil
}

// leadingWords are the arguments before the first flag.
func leadingWords(args []string) []string {
	n := 0
	for n < len(args) && !strings.HasPrefix(args[n], "-") {
		n++
	}
	return args[:n]
}

func hasGroup(prefix string) bool {
	for _, c := range commands {
		if strings.HasPrefix(c.name, prefix+" ") {
			return true
		}
	}
	return false
}

func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "--help" {
			return true
		}
	}
	return false
}

// usage prints the command list (of one group when group is not "").
func usage(w io.Writer, group string) {
	fmt.Fprintln(w, "tokentriage: governance for LLM API traffic, enforced inside the proxy.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage:")
	if group == "" {
		fmt.Fprintln(w, "  tokentriage <command> [flags]")
	} else {
		fmt.Fprintf(w, "  tokentriage %s <command> [flags]\n", group)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name+" "+c.usage))
	}
	for _, c := range commands {
		if group != "" && !strings.HasPrefix(c.name, group+" ") {
			continue
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name+" "+c.usage, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'tokentriage <command> --help' for a command's flags.")
}

func commandHelp(w io.Writer, c *command, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage: tokentriage %s %s\n\n", c.name, c.usage)
	fmt.Fprintln(w, c.summary)
	if c.help != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, strings.TrimSpace(c.help))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Flags:")
	fmt.Fprint(w, fs.FlagUsages())
}
