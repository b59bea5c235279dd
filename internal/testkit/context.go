package testkit

import (
	"context"
	"testing"
	"time"
)

// Context is the test's context, ending a little before the test binary's
// deadline so that a wait that never ends fails with what it saw.
func Context(tb testing.TB) context.Context {
	ctx := tb.Context()
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl.Add(-10*time.Second))
			tb.Cleanup(cancel)
		}
	}
	return ctx
}
