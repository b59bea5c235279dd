package wasmtest

// Counts instruments the boundary between host and guest, per stream (in
// Response.Counts) and in total (Host.Counts), so that benchmarks can report
// what a request costs besides time.
type Counts struct {
	// Streams is how many HTTP streams finished (totals only).
	Streams int64
	// GuestCalls are calls into the guest: callbacks and allocations.
	GuestCalls int64
	// HostCalls are host functions the guest called: proxy_* and WASI.
	HostCalls int64
	// SharedGets and SharedSets are proxy_get_shared_data and
	// proxy_set_shared_data calls, whatever their result.
	SharedGets int64
	SharedSets int64
}

func (c *Counts) add(o Counts) {
	c.Streams += o.Streams
	c.GuestCalls += o.GuestCalls
	c.HostCalls += o.HostCalls
	c.SharedGets += o.SharedGets
	c.SharedSets += o.SharedSets
}

// Counts returns the totals over every worker VM the host has run
// (callbacks of root contexts included; the canary excluded).
func (h *Host) Counts() Counts {
	var c Counts
	for _, w := range h.workers {
		v := w.v.Load()
		v.mu.Lock()
		c.add(v.total)
		v.mu.Unlock()
	}
	h.retiredMu.Lock()
	for _, v := range h.retired {
		v.mu.Lock()
		c.add(v.total)
		v.mu.Unlock()
	}
	h.retiredMu.Unlock()
	return c
}
