// Command tokentriage is the operator CLI: validate a configuration, and
// (as their files join the command table) run the accountant, mint keys,
// preview a config against the ledger and run the embedded dev stack.
//
// main only wires the process to doMain, so tests run every command
// in-process with their own arguments and output buffers.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(doMain(os.Args[1:], os.Stdout, os.Stderr))
}

// doMain runs the command named by args and returns the exit status: 0 on
// success, 1 when the command ran and found a problem, 2 for a usage error
// or an unreadable input. SIGINT and SIGTERM cancel the command's context.
func doMain(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, stdout, stderr)
}
