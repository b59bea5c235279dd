package wasmtest

import "time"

// Ticks (shared/proxy-wasm.md 3.6): one timer per root context, on the
// host's Clock. The first tick comes one period after
// proxy_set_tick_period_milliseconds, the next one period after the previous
// proxy_on_tick returned; 0 stops it. Each worker VM ticks on its own.

// proxy_set_tick_period_milliseconds(period)
func hostSetTickPeriod(v *vm, s []uint64) {
	v.stopTick()
	v.tickPeriod = time.Duration(uint32(s[0])) * time.Millisecond
	if v.tickPeriod > 0 && !v.closed {
		v.armTick()
	}
	s[0] = statusOK
}

func (v *vm) armTick() {
	gen := v.tickGen
	v.tickTimer = v.h.clock.AfterFunc(v.tickPeriod, func() { v.fireTick(gen) })
}

func (v *vm) stopTick() {
	v.tickGen++
	if v.tickTimer != nil {
		v.tickTimer.Stop()
		v.tickTimer = nil
	}
}

func (v *vm) fireTick(gen uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if gen != v.tickGen || v.closed || v.failed.Load() || !v.rootAlive {
		return
	}
	v.tickTimer = nil
	v.enterRoot()
	v.call(v.fn.tick, "proxy_on_tick", uint64(v.rootID))
	v.afterCall(nil)
	if gen == v.tickGen && v.tickPeriod > 0 && !v.closed && !v.failed.Load() {
		v.armTick()
	}
}
