package filter

import "time"

// The spend snapshot lives in the counter table in shared data (table.go),
// one entry per counter identity:
//
//	i64 period_start (unix seconds) | i64 value
//
// A VM reads the counters a request's instances name (e.counter), not the
// snapshot. Its time and fleet field ride in the version record: the time
// is zero until the table holds a whole snapshot.

// snapshotAt is the time of the snapshot the counter table holds, zero
// when it holds none yet.
func (e *Engine) snapshotAt() time.Time { return e.sync.loaded.generatedAt }
