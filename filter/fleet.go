package filter

import (
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/rate"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// store: redis (seed 000's "fleet-exact while healthy"). The filter never
// talks to Redis itself: at gate 1 it asks its accountant, in one callout
// for all of the request's store: redis rpm instances, and the request
// waits for the answer (paused at its headers). The accountant runs one
// script that takes the instances in seed 004 order and stops at the first
// over, with shared/rate's arithmetic, so the fleet shares one cell per
// counter. The Redis operation is bounded by shared_state.redis.timeout
// (5 ms by default) at the accountant, and the whole round trip by that
// and fleetHop; past it, or when the accountant says Redis did not
// decide, the filter's own cell answers, and the request's row,
// X-Tt-Suspended, the tokentriage.suspended metric and a log line say so.
//
// Local instances are judged in the same walk, in order. So that an
// instance after the first one over counts nothing (seed 000), only the
// redis instances before the first local instance that is over are asked:
// the local cells are read (not written) first to find it, and the real
// walk runs on the answer.

// fleetRate reports whether in is a store: redis rate instance that the
// accountant can be asked about.
func (e *Engine) fleetRate(in *govern.Instance) bool {
	return in.Limit.Store == govern.StoreRedis && e.host.Caller != nil &&
		(in.Limit.Type == govern.RPM || in.Limit.Type == govern.TPM) && in.Limit.Algorithm != rate.TokenBucket
}

// fleetAsk is one request's question to the accountant and its answer.
type fleetAsk struct {
	inst    []govern.Instance // the gate's instances, kept while it waits
	asked   []int             // the positions asked, in order
	results []rate.Result     // the answers, one per asked position answered
	held    []int64           // a budget hold's answer: what it holds,
	used    []int64           // what the fleet spent and held before,
	flight  []int64           // and what of used calls in flight held
	why     string            // why Redis did not decide, "" when it did
	at      time.Time         // when gate 2 asked (the holds' period)
	pending bool              // a callout is out
	sent    bool              // the question left for the accountant
	done    bool              // the answer (or its absence) is in
	eos     bool              // a headers-only request: gate 2 runs on the answer
}

// result is the fleet's answer for the instance at position i: ok false
// when it was not asked or Redis did not decide.
func (f *fleetAsk) result(i int) (rate.Result, bool) {
	if !f.done || f.why != "" {
		return rate.Result{}, false
	}
	for k, p := range f.asked {
		if p == i {
			if k < len(f.results) {
				return f.results[k], true
			}
			return rate.Result{}, false
		}
	}
	return rate.Result{}, false
}

// hold is the fleet's answer for the budget hold at position i: what it
// holds and what the fleet had spent and held before it.
func (f *fleetAsk) hold(i int) (held, used, inFlight int64) {
	for k, p := range f.asked {
		if p == i && k < len(f.held) && k < len(f.used) && k < len(f.flight) {
			return f.held[k], f.used[k], min(max(f.flight[k], 0), f.used[k])
		}
	}
	return 0, 0, 0
}

// wasAsked reports whether position i was in the question.
func (f *fleetAsk) wasAsked(i int) bool {
	for _, p := range f.asked {
		if p == i {
			return true
		}
	}
	return false
}

func (f *fleetAsk) reset() {
	*f = fleetAsk{inst: f.inst[:0], asked: f.asked[:0], results: f.results[:0], held: f.held[:0], used: f.used[:0], flight: f.flight[:0]}
}

// fleetPrefix returns the positions of the store: redis rpm instances of
// insts to ask about: those before the first local instance (rpm or
// concurrency) that would refuse now (read, not written).
func (e *Engine) fleetPrefix(s *Stream, insts []govern.Instance, now time.Time) []int {
	any := false
	for i := range insts {
		if insts[i].Limit.Type == govern.RPM && e.fleetRate(&insts[i]) {
			any = true
			break
		}
	}
	if !any {
		return nil // no store: redis instance: nothing to read ahead
	}
	var asked []int
	for i := range insts {
		in := &insts[i]
		l := in.Limit
		if l.Type == govern.RPM && e.fleetRate(in) {
			asked = append(asked, i)
			continue
		}
		if l.Mode != govern.ModeOn || l.Enforce != govern.EnforceHard {
			continue // admits whatever it reads
		}
		switch l.Type {
		case govern.RPM:
			if res, err := e.cells.rateWouldTake(in.CellKey(), l.Algorithm, now, 1, e.rateParams(in)); err == nil && !res.Allowed {
				return asked // the walk stops here; nothing after it counts
			}
		case govern.Concurrency:
			if live, err := e.cells.gaugeRead(in.CellKey(), now); err == nil && live >= e.shareCap(in.Amount, l.Store) {
				return asked
			}
		}
	}
	return asked
}

// askFleet sends the question for the positions asked and pauses the
// request; when the callout cannot be made, the walk runs at once with the
// local answers.
func (e *Engine) askFleet(s *Stream, insts []govern.Instance, asked []int, eos bool, v Verdict, now time.Time) (Verdict, bool) {
	f := &s.fleet
	f.reset()
	f.inst = append(f.inst, insts...)
	f.asked = append(f.asked, asked...)
	f.eos = eos
	body := append(e.buf[:0], `{"rate":[`...)
	for k, i := range asked {
		if k > 0 {
			body = append(body, ',')
		}
		body = appendRateStep(body, &insts[i], 1)
	}
	body = append(body, "]}"...)
	e.buf = body[:0]
	gen := s.gen
	err := e.host.Caller.Call("POST", syncwire.AdmitPath, jsonHeaders, body, e.fleetTimeout(), func(status int, answer []byte) {
		if s.gen != gen || !s.fleet.pending {
			return // the request ended while it waited
		}
		s.fleet.pending = false
		e.fleetAnswered(s, status, answer)
		s.wake(e.gate1Walk(s, s.fleet.inst, e.host.Now(), s.fleet.eos, Verdict{}))
	})
	if err != nil {
		f.done, f.why = true, "the accountant could not be called: "+err.Error()
		e.noteFleet(f.why)
		return Verdict{}, false
	}
	f.pending = true
	v.Action = ActPause
	return v, true
}

var jsonHeaders = [][2]string{{"content-type", "application/json"}}

// appendRateStep appends one syncwire.RateStep for instance in, taking n.
func appendRateStep(dst []byte, in *govern.Instance, n int64) []byte {
	l := in.Limit
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendQuote(dst, in.ID)
	dst = append(dst, `,"alg":"`...)
	dst = append(dst, l.Algorithm.String()...)
	dst = append(dst, `","amount":`...)
	dst = strconv.AppendInt(dst, in.Amount, 10)
	dst = append(dst, `,"period_ns":`...)
	dst = strconv.AppendInt(dst, int64(l.Period.Window), 10)
	dst = append(dst, `,"burst":`...)
	dst = strconv.AppendInt(dst, l.Burst, 10)
	dst = append(dst, `,"n":`...)
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '}')
}

// fleetHop is what the way to the accountant and back may add to
// shared_state.redis.timeout, which bounds the Redis operation itself (the
// accountant runs it under that deadline, seed 002's per-operation
// deadline). The hop is a local call to the sidecar, well under a
// millisecond when the machine is busy; on a machine whose threads had
// slept it took 10 to 15 ms, and a round trip held to the Redis deadline
// alone was answered locally and said suspended for most calls of a
// gateway serving one call every few seconds.
const fleetHop = 25 * time.Millisecond

// redisTimeout is the plan's shared_state.redis.timeout.
func (e *Engine) redisTimeout() time.Duration {
	if d := e.plan.RedisTimeout(); d > 0 {
		return d
	}
	return govern.DefaultRedisTimeout
}

// fleetTimeout is the deadline of the whole round trip.
func (e *Engine) fleetTimeout() time.Duration { return e.redisTimeout() + fleetHop }

// fleetAnswered reads the accountant's answer into s.fleet.
func (e *Engine) fleetAnswered(s *Stream, status int, answer []byte) {
	f := &s.fleet
	f.done = true
	switch {
	case status == 0:
		f.why = "the accountant did not answer"
	case status == 504:
		f.why = "no answer within " + e.fleetTimeout().String() + " (shared_state.redis.timeout " + e.redisTimeout().String() + " and " + fleetHop.String() + " for the way to the accountant and back)"
	case status != 200:
		f.why = "the accountant answered " + strconv.Itoa(status)
	case !gjson.ValidBytes(answer):
		f.why = "the accountant's answer is not JSON"
	}
	if f.why == "" {
		r := gjson.ParseBytes(answer)
		if why := r.Get("suspended").String(); why != "" {
			f.why = why
		} else {
			f.results, f.held, f.used, f.flight = f.results[:0], f.held[:0], f.used[:0], f.flight[:0]
			r.Get("rate").ForEach(func(_, x gjson.Result) bool {
				f.held = append(f.held, x.Get("held").Int())
				f.used = append(f.used, x.Get("used").Int())
				f.flight = append(f.flight, x.Get("in_flight").Int())
				f.results = append(f.results, rate.Result{
					Allowed:    x.Get("allowed").Bool(),
					Limit:      x.Get("limit").Int(),
					Remaining:  x.Get("remaining").Int(),
					RetryAfter: time.Duration(x.Get("retry_after_ns").Int()),
					ResetAfter: time.Duration(x.Get("reset_after_ns").Int()),
					Unfittable: x.Get("unfittable").Bool(),
				})
				return true
			})
			if len(f.results) == 0 || len(f.results) > len(f.asked) {
				f.why = "the accountant's answer has " + strconv.Itoa(len(f.results)) + " results for " + strconv.Itoa(len(f.asked)) + " questions"
			}
		}
	}
	e.noteFleet(f.why)
}

// noteFleet logs the transitions of the fleet store as this VM sees them:
// one line when Redis stops deciding (and why), one when it decides again.
func (e *Engine) noteFleet(why string) {
	switch {
	case why != "" && !e.fleetDown:
		e.fleetDown = true
		e.logf(LogWarn, "store: redis: %s; the local limiter answers and every such request says suspended until the fleet store answers again", why)
	case why == "" && e.fleetDown:
		e.fleetDown = false
		e.logf(LogInfo, "store: redis: the fleet store answers again")
	}
}

// appendAdjust appends one syncwire.RateStep correcting reserve r by n.
func appendAdjust(dst []byte, r reserve, n int64) []byte {
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendQuote(dst, r.id)
	dst = append(dst, `,"alg":"`...)
	dst = append(dst, r.alg.String()...)
	dst = append(dst, `","amount":`...)
	dst = strconv.AppendInt(dst, r.params.Amount, 10)
	dst = append(dst, `,"period_ns":`...)
	dst = strconv.AppendInt(dst, int64(r.params.Period), 10)
	dst = append(dst, `,"burst":`...)
	dst = strconv.AppendInt(dst, r.params.Burst, 10)
	dst = append(dst, `,"n":`...)
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '}')
}

// reconcileEntry is a ledger.Row.Reconcile entry correcting reserve r by n.
func reconcileEntry(r reserve, n int64) string {
	b := make([]byte, 0, 64+len(r.id))
	b = append(b, r.alg.String()...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.params.Amount, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(r.params.Period), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.params.Burst, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, n, 10)
	b = append(b, ' ')
	b = append(b, r.id...)
	return string(b)
}

// fleetSeenKey is where a replica keeps the fleet's last answer for a
// store: redis instance, as a cell (shared by every VM of the replica).
func fleetSeenKey(id string) string { return "tt/fleet|" + id }

// noteFleetSeen keeps the fleet's answer for instance in, for /tt/v1/me:
// the cell it describes (rate.FromResult), in the replica's shared data so
// that whichever VM answers /tt/v1/me reads it, drained to its now. A write
// that fails costs only that page's figure, never the request.
func (e *Engine) noteFleetSeen(in *govern.Instance, res rate.Result, now time.Time) {
	st := rate.FromResult(in.Limit.Algorithm, res, now, e.rateParams(in))
	e.cells.scratch = st.AppendBinary(e.cells.scratch[:0])
	_ = e.cells.put(fleetSeenKey(in.CellKey()), e.cells.scratch)
}
