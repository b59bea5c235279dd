package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progressDelay is how long reading a ledger runs before a progress bar
// appears: a ledger read in less never shows one.
const progressDelay = 500 * time.Millisecond

// progressBar returns a progress reporter for reading what (a ledger) that
// draws one line on the terminal w, redrawn at most ten times a second,
// once the read has taken progressDelay, and finished with a newline when
// done reaches total: "reading ledger [=====>     ]  41%  130/318 MiB
// 52 MiB/s  4s left". now is the clock. RATIONALE.md#why-a-progress-line-of-our-own
func progressBar(w io.Writer, what string, now func() time.Time) func(done, total int64) {
	start := now()
	var last time.Time
	shown := false
	return func(done, total int64) {
		t := now()
		finished := done >= total
		if !shown && t.Sub(start) < progressDelay {
			return
		}
		if !finished && t.Sub(last) < 100*time.Millisecond {
			return
		}
		last = t
		shown = true
		frac := 1.0
		if total > 0 {
			frac = min(float64(done)/float64(total), 1)
		}
		const width = 30
		n := int(frac * width)
		bar := strings.Repeat("=", n)
		if n < width {
			bar += ">" + strings.Repeat(" ", width-n-1)
		}
		elapsed := t.Sub(start).Seconds()
		rate := float64(done) / max(elapsed, 1e-3) / (1 << 20)
		tail := "done in " + t.Sub(start).Round(100*time.Millisecond).String()
		if !finished {
			left := "?"
			if done > 0 {
				left = (time.Duration(elapsed*float64(total-done)/float64(done)) * time.Second).Round(time.Second).String()
			}
			tail = left + " left"
		}
		fmt.Fprintf(w, "\r%s [%s] %3.0f%%  %d/%d MiB  %.0f MiB/s  %s\x1b[K", what, bar, frac*100, done>>20, total>>20, rate, tail)
		if finished {
			fmt.Fprintln(w)
		}
	}
}
