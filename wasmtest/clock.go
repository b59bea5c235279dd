package wasmtest

import (
	"sort"
	"sync"
	"time"
)

// Clock is the host's time source: WASI clock_time_get, request.time, tick
// timers and callout timeouts all read it, so a test that controls the clock
// controls every time the filter can observe.
type Clock interface {
	// Now is the wall clock (WASI realtime, proxy_get_current_time_nanoseconds).
	Now() time.Time
	// Monotonic is WASI's monotonic clock: time since an arbitrary origin.
	Monotonic() time.Duration
	// AfterFunc runs f once, d from now, in its own goroutine (RealClock) or
	// inside ManualClock.Advance.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not happened yet and reports whether
	// it did so.
	Stop() bool
}

// RealClock returns the clock of the machine, for the proxy.
func RealClock() Clock { return realClock{origin: time.Now()} }

type realClock struct{ origin time.Time }

func (c realClock) Now() time.Time           { return time.Now() }
func (c realClock) Monotonic() time.Duration { return time.Since(c.origin) + time.Second }
func (c realClock) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc(d, f)
}

var _ Clock = realClock{}
var _ Clock = (*ManualClock)(nil)

// ManualClock is a Clock that moves only when told to. Advance fires every
// timer that falls due, in deadline order (ties in the order they were set),
// at its own deadline, and returns once each has run; a timer set by a timer
// callback fires in the same Advance if it falls due within it. The zero
// value is not usable; call NewManualClock.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	start  time.Time
	seq    uint64
	timers []*manualTimer
	adv    sync.Mutex // serialises Advance calls
}

// NewManualClock returns a clock standing at start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, start: start}
}

// Now returns the clock's current instant.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Monotonic returns the time advanced since NewManualClock, plus one second
// so that it is never zero.
func (c *ManualClock) Monotonic() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(c.start) + time.Second
}

// AfterFunc schedules f at Now()+d. A d of zero or less falls due at the next
// Advance, even Advance(0).
func (c *ManualClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &manualTimer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock forward by d, running due timers on the way.
func (c *ManualClock) Advance(d time.Duration) {
	c.adv.Lock()
	defer c.adv.Unlock()
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		if len(c.timers) == 0 {
			c.now = target
			c.mu.Unlock()
			return
		}
		sort.Slice(c.timers, func(i, j int) bool {
			a, b := c.timers[i], c.timers[j]
			if !a.at.Equal(b.at) {
				return a.at.Before(b.at)
			}
			return a.seq < b.seq
		})
		t := c.timers[0]
		if t.at.After(target) {
			c.now = target
			c.mu.Unlock()
			return
		}
		c.timers = c.timers[1:]
		if t.at.After(c.now) {
			c.now = t.at
		}
		t.fired = true
		c.mu.Unlock()
		t.f()
	}
}

// Pending reports how many timers are waiting.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

type manualTimer struct {
	c     *ManualClock
	at    time.Time
	seq   uint64
	f     func()
	fired bool
}

func (t *manualTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.fired {
		return false
	}
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			t.fired = true
			return true
		}
	}
	return false
}

// proxy_get_current_time_nanoseconds(ret): the host Clock's wall time.
func hostGetCurrentTime(v *vm, s []uint64) {
	if !v.putU64(uint32(s[0]), uint64(v.h.clock.Now().UnixNano())) {
		s[0] = statusInvalidMemoryAccess
		return
	}
	s[0] = statusOK
}
