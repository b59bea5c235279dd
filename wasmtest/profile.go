package wasmtest

import (
	"sort"
	"sync"
	"time"
)

// The host times every call into a guest export, per VM and export name,
// and keeps the slowest recent calls with when they ran: a per-VM
// timeline that tells a request's stall apart from the call that caused
// it (a tick or a sync holding the VM, or the guest's Go runtime
// collecting its heap inside whichever export allocated last). A call is
// timed in wall time with the VM's lock held, so the figure is what a
// request waiting for that VM waited. The cost is two reads of the
// monotonic clock per guest call.

// ExportProfile is what one guest export cost, summed over every VM.
type ExportProfile struct {
	// Export is the callback's name ("proxy_on_request_headers").
	Export string
	// Calls, Total and Max are the number of calls, their summed wall
	// time and the longest.
	Calls int64
	Total time.Duration
	Max   time.Duration
}

// SlowCall is one guest call that held its VM at least SlowCallAt.
type SlowCall struct {
	// At is when the call began; VM names the VM ("worker 2").
	At     time.Time
	VM     string
	Export string
	Took   time.Duration
	// Pages is the VM's linear memory size after the call, in 64 KiB
	// pages: a call that grew it, or ran long at a large size, points at
	// the guest's collector.
	Pages uint32
}

// SlowCallAt is the least time a guest call holds its VM for the host to
// keep it among the slow calls.
const SlowCallAt = 5 * time.Millisecond

// maxSlowCalls bounds the slow calls kept: the newest ones stay.
const maxSlowCalls = 512

// exportStat accumulates one export's calls in one VM (under its lock).
type exportStat struct {
	calls      int64
	total, max time.Duration
}

// slowCalls is the host's ring of slow calls, shared by its VMs.
type slowCalls struct {
	mu   sync.Mutex
	ring []SlowCall
	next int
}

func (s *slowCalls) add(c SlowCall) {
	s.mu.Lock()
	if len(s.ring) < maxSlowCalls {
		s.ring = append(s.ring, c)
	} else {
		s.ring[s.next] = c
		s.next = (s.next + 1) % maxSlowCalls
	}
	s.mu.Unlock()
}

func (s *slowCalls) list() []SlowCall {
	s.mu.Lock()
	out := make([]SlowCall, 0, len(s.ring))
	out = append(out, s.ring[s.next:]...)
	out = append(out, s.ring[:s.next]...)
	s.mu.Unlock()
	return out
}

// timed records one call of export that began at start (v.mu held).
func (v *vm) timed(export string, start time.Time) {
	took := time.Since(start)
	st := v.prof[export]
	if st == nil {
		if v.prof == nil {
			v.prof = map[string]*exportStat{}
		}
		st = &exportStat{}
		v.prof[export] = st
	}
	st.calls++
	st.total += took
	st.max = max(st.max, took)
	if took >= SlowCallAt {
		var pages uint32
		if v.mem != nil {
			pages = v.mem.Size() / 65536
		}
		v.h.slow.add(SlowCall{At: start, VM: v.name, Export: export, Took: took, Pages: pages})
	}
}

// Profile returns what each guest export cost over the host's life (every
// worker VM, retired ones included), the most costly first, and the
// slowest recent calls in the order they began.
func (h *Host) Profile() ([]ExportProfile, []SlowCall) {
	sum := map[string]*ExportProfile{}
	add := func(v *vm) {
		v.mu.Lock()
		for name, st := range v.prof {
			p := sum[name]
			if p == nil {
				p = &ExportProfile{Export: name}
				sum[name] = p
			}
			p.Calls += st.calls
			p.Total += st.total
			p.Max = max(p.Max, st.max)
		}
		v.mu.Unlock()
	}
	for _, w := range h.workers {
		add(w.v.Load())
	}
	h.retiredMu.Lock()
	retired := append([]*vm(nil), h.retired...)
	h.retiredMu.Unlock()
	for _, v := range retired {
		add(v)
	}
	out := make([]ExportProfile, 0, len(sum))
	for _, p := range sum {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Total != out[j].Total {
			return out[i].Total > out[j].Total
		}
		return out[i].Export < out[j].Export
	})
	slow := h.slow.list()
	sort.SliceStable(slow, func(i, j int) bool { return slow[i].At.Before(slow[j].At) })
	return out, slow
}
