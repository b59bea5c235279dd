package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// A call the gates let through is counted when its row arrives, as it
// ends. If its proxy dies first (a kill -9, a crashed node), the row never
// comes and the provider still bills the call. So an admitted call's start
// reaches the accountant within one flush: each batch the VM sends first
// queues a start row (ledger.KindStart) for every call still in flight
// that has none yet; a call that ends before the next batch leaves needs
// none, its end row counts it. The start carries the call's reserved
// estimate (its prompt's tokens and its output maximum) and the filter's
// lease_ttl; the accountant closes a call whose end never arrives at that
// estimate, marked estimated, once lease_ttl has passed since it last
// heard of the call, and a late end replaces the estimate (see RATIONALE.md,
// "How is a call whose proxy died still counted?"). A call still in flight
// after a third of lease_ttl has its start sent again, so a long stream of
// a live replica is never closed at its estimate. A VM sends starts only
// to an accountant that said it reads them, in its answer to a batch; one
// with calls in flight that has had no answer yet asks (askKinds).
const maxOpenCalls = 1 << 16

// openCall is a call in flight whose start is, or is to be, recorded.
type openCall struct {
	s      *Stream
	gen    uint64
	sentAt int64 // when its start was last queued (unix ns), 0 not yet
}

// noteStart records that s was let through to the provider (gate 2).
func (e *Engine) noteStart(s *Stream) {
	if e.host.Caller == nil || !s.governs || len(e.open) >= maxOpenCalls {
		return
	}
	e.open = append(e.open, openCall{s: s, gen: s.gen})
}

// queueStarts queues the start rows due before a batch is cut: calls in
// flight whose start was never sent, or last sent a third of lease_ttl
// ago. Calls that ended since are forgotten. It reports whether a start
// is due that waits only for the VM to learn whether the accountant reads
// start rows (no answer to a batch has said yet): the caller asks
// (askKinds).
func (e *Engine) queueStarts(now time.Time) (unknown bool) {
	if len(e.open) == 0 {
		return false
	}
	renew := int64(e.leaseTTL / 3)
	keep := e.open[:0]
	for _, c := range e.open {
		if c.s.gen != c.gen || c.s.settled {
			continue // ended: its own row counts it
		}
		if c.sentAt == 0 || now.UnixNano()-c.sentAt >= renew {
			unknown = unknown || !e.kinds.known
			if e.kinds.start {
				e.fillStart(&e.row, c.s, now)
				if e.enqueue(&e.row, now) {
					c.sentAt = now.UnixNano()
					e.host.Metrics.Add(MetricStartsSent, 1)
				}
			}
		}
		keep = append(keep, c)
	}
	clear(e.open[len(keep):])
	e.open = keep
	return unknown
}

// askKinds asks the accountant which row kinds it reads, with an empty
// ingest batch, for a VM that has calls in flight whose starts are due and
// that has had no answer to a batch yet: it learns the kinds only from
// answers, and a VM whose calls are all still running (long streams, the
// first calls after a start) has no row to send, so its starts would wait
// until some call of its ended, and a proxy killed before that left no
// record of them. The answer lets the starts leave at once; a failed ask
// is made again after a backoff, as a batch is.
func (e *Engine) askKinds(now time.Time, call callFunc) {
	k := &e.kinds
	if k.known || k.asking || now.Before(k.nextAsk) {
		return
	}
	failed := func(t time.Time) {
		k.backoff = min(max(2*k.backoff, 500*time.Millisecond), maxBackoff)
		k.nextAsk = t.Add(k.backoff)
	}
	k.asking = true
	err := call("POST", syncwire.IngestPath, e.ingestHeaders, nil, ingestTimout, func(status int, resp []byte) {
		k.asking = false
		t := e.host.Now()
		if status != 200 {
			failed(t)
			e.logf(LogWarn, "asking the accountant which ledger row kinds it reads (so that the starts of the calls in flight can be sent) failed (status %d: %s); asking again in %s", status, excerptBytes(resp), k.backoff)
			return
		}
		k.learn(resp)
		k.backoff = 0
		if k.start && e.finishing == nil {
			e.flushRows(t, true) // the starts due leave now
		}
	})
	if err != nil {
		k.asking = false
		failed(now)
		e.logf(LogWarn, "asking the accountant which ledger row kinds it reads (so that the starts of the calls in flight can be sent): %v; asking again in %s", err, k.backoff)
	}
}

// fillStart writes the start row of a call in flight: its row as it would
// end now, with the call's reserved estimate as its usage.
func (e *Engine) fillStart(r *ledger.Row, s *Stream, now time.Time) {
	e.fillRow(r, s, now)
	in := llm.EstimateTokens(s.req.PromptBytes)
	out := llm.OutputReserve(s.req) * max(s.req.Choices, 1)
	if s.req.Endpoint == llm.Embeddings {
		out = 0
	}
	r.Usage = ledger.Usage{Input: in, Output: out, Total: in + out}
	r.Estimated = ledger.Estimated{Input: true, Output: true}
	r.Served, r.Status, r.UsageClamped, r.ServedOutOfScope = "", 0, false, false
	r.Reconcile, r.Holds = nil, nil // the end carries them
	r.Kind, r.LeaseTTLMS = ledger.KindStart, e.leaseTTL.Milliseconds()
}
