// Package cputime reads the CPU time the process has used, for benchmarks
// that must hold on a machine shared with other work: a wall-clock figure
// swings with the load, the CPU a piece of work takes much less.
package cputime

import "time"

// Now is the CPU time (user and system, every thread) the process has
// used so far, or 0 where the platform offers no such clock (Supported
// says which).
func Now() time.Duration { return now() }

// Supported reports whether Now reads a clock.
func Supported() bool { return supported }
