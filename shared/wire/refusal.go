package wire

import (
	"github.com/tokentriage/tokentriage/shared/jsontok"
	"strconv"
	"time"
)

// Refusal is a limit breach, answered with 429 Too Many Requests. The caller
// fills in what it knows; which fields reach the wire depends on the limit
// type's class (seed 000):
//
//	LedgerSettled (budget_usd, quota_tokens, quota_requests):
//	  refused_by {limit_id, limit_type, unit, node, period, resets_at,
//	  retry_after_s, observed, limit}; enforcement {posture, approximate:
//	  true, bound {tee_lag_rows, dropped_rows}, note}
//	rpm, tpm: refused_by {limit_id, limit_type, unit, node, period,
//	  retry_after_s}; enforcement {posture, approximate} (tpm approximate)
//	concurrency: refused_by {limit_id, limit_type, unit, node, observed,
//	  limit}; enforcement {posture, approximate: false}
//	Unfittable (a tpm reserve above the burst): error.type
//	  quota_cost_unfittable; refused_by {limit_id, limit_type, unit, node,
//	  period, cost, burst}; enforcement {posture, approximate}
//	Unfittable on quota_tokens (fit: true, less than min_output left this
//	  period): error.type quota_cost_unfittable; refused_by {limit_id,
//	  limit_type, unit, node, period, resets_at, retry_after_s, cost,
//	  observed, limit}; enforcement as LedgerSettled
//
// Headers, in this order: Content-Type, Ratelimit, Retry-After,
// X-Tt-Refusal-Type, X-Tt-Refused-By, X-Tt-Request-Id (seed 000's set and
// order), then what the official SDKs read: Retry-After-Ms when a retry
// can succeed, X-Should-Retry, X-Request-Id and Request-Id (the same id as
// X-Tt-Request-Id). Ratelimit says r=0
// (nothing this request could use is available now; the live remaining of a
// cell is disclosed on served responses and by /tt/v1/me) and t=
// retry_after_s. A concurrency refusal carries neither Ratelimit nor
// Retry-After: a slot frees when a request in flight finishes, not on a
// clock, and a Ratelimit t would invite a retry loop on a guess. An
// unfittable refusal carries neither either: no wait makes the request fit.
// The request id headers are omitted only when RequestID is empty.
//
// X-Should-Retry is true exactly when waiting as told can admit the same
// request in less than MaxRetryWait (ShouldRetry): an rpm or tpm window
// that frees within a minute, or a calendar period that ends within one. A
// concurrency slot frees on no clock, an unfittable cost never fits, and a
// day's budget does not come back within a minute: those say false, and
// the SDKs fail at once instead of sleeping or retrying.
type Refusal struct {
	RequestID string
	// Shape is the body's form: seed 000's (the default), with OpenAI's
	// param and code, or Anthropic's envelope.
	Shape     Shape
	LimitID   string
	LimitType LimitType
	Node      string
	// Period is day, week or month for LedgerSettled limits, and the
	// window as Go prints it ("1m0s") for rpm and tpm.
	Period string
	// ResetsAt is when a LedgerSettled limit's calendar period ends
	// (calendar.End); rendered in UTC to the second.
	ResetsAt time.Time
	// RetryAfter is the wait in whole seconds (Seconds): until ResetsAt
	// for LedgerSettled, the algorithm's RetryAfter for rpm and tpm.
	RetryAfter int64
	// Wait is the same wait to the nanosecond, when known: it decides
	// ShouldRetry and is sent as Retry-After-Ms. Zero means RetryAfter.
	Wait time.Duration
	// Observed and Limit are nanodollars for budget_usd, counts for the
	// quota types, and for concurrency the live gauge and the cap this
	// replica enforces.
	Observed int64
	Limit    int64
	// Bound is the LedgerSettled lag disclosure.
	Bound Bound
	// Unfittable marks a cost that can never fit (a tpm reserve above the
	// burst): Cost is that reserve, Burst the cell's capacity. On a
	// spend or quota type (fit: true), a cost the period's rest cannot
	// hold: Cost is the least the call needs, Observed and Limit the
	// counter, and the period's reset clears it.
	Unfittable bool
	Cost       int64
	Burst      int64
	// Reserve marks a budget_usd limit in reserve mode: the replica counts
	// its own calls as it admits them (at their dearest cost until they
	// settle), so the in-flight lag of the default class does not apply.
	// Replicas is the live replica count: with others, their spend still
	// arrives with the accountant's snapshot.
	Reserve  bool
	Replicas int
	// Held marks a reserve-mode refusal decided in the fleet's shared
	// Redis, where every replica's calls in flight are held: exact, with
	// no replica's spend left to arrive.
	Held bool
	// InFlight, on a reserve-mode budget refusal, is what of Observed the
	// holds of calls still in flight hold, set only when the call would
	// fit without them: the budget is not spent, what is left of it comes
	// back as those calls settle, and no clock says when. Such a refusal
	// names no reset time and no wait (no Ratelimit, Retry-After,
	// resets_at or retry_after_s), says X-Should-Retry false as a
	// concurrency refusal does, and carries in_flight in refused_by.
	InFlight int64
}

// Bound is what a LedgerSettled number may be missing: rows not yet
// acknowledged by the accountant, and rows dropped when the 4,096-row buffer
// overflowed.
type Bound struct {
	TeeLagRows  int64
	DroppedRows int64
	// UnackedFor, when positive, is how long the oldest row not yet
	// acknowledged has waited: the gateway's queue to the accountant is
	// stuck and the number misses what it holds (unacked_for_s, written
	// only then).
	UnackedFor time.Duration
}

// Posture label of every 429: only a limit that is on and hard refuses.
const postureEnforcing = "enforcing"

// Notes on LedgerSettled refusals: what the number may not yet include.
const (
	NoteSpend = "spend from in-flight and streaming requests admitted before this refusal may not yet be reflected"
	NoteUsage = "usage from in-flight and streaming requests admitted before this refusal may not yet be reflected"
	// NoteReserve is the note of a reserve-mode budget refusal on a lone
	// replica; NoteReserveFleet adds what the other replicas' spend may
	// lack.
	NoteReserve      = "budget reserve mode: every call this gateway admitted is counted, at its dearest cost until it settles"
	NoteReserveFleet = NoteReserve + "; spend on the other gateway replicas arrives with the accountant's snapshot and may not yet be reflected"
	// NoteReserveHeld is the note of one decided where every replica's
	// calls are held (Refusal.Held).
	NoteReserveHeld = "budget reserve mode, held in the fleet's shared Redis: every call admitted on any gateway replica is counted, at its dearest cost until it settles"
	// NoteInFlight follows the reserve note of a refusal with InFlight.
	NoteInFlight = "what is left of the budget is held by calls in flight (in_flight) and comes back as they settle, which no clock predicts: retry when some of them have finished, not at the period's end"
)

// Status is 429.
func (r *Refusal) Status() int { return 429 }

// ErrorType is the body's error.type and the X-Tt-Refusal-Type header.
func (r *Refusal) ErrorType() string {
	if r.Unfittable {
		return TypeCostUnfittable
	}
	return r.LimitType.ErrorType()
}

// wait is the refusal's wait: Wait, or RetryAfter seconds.
func (r *Refusal) wait() time.Duration {
	if r.Wait > 0 {
		return r.Wait
	}
	return time.Duration(r.RetryAfter) * time.Second
}

// ShouldRetry reports whether the same request, retried after the wait the
// refusal names, can be admitted sooner than MaxRetryWait: never for an
// unfittable cost or a concurrency slot (it frees on no clock).
func (r *Refusal) ShouldRetry() bool {
	if r.neverFits() || r.LimitType == Concurrency || r.inFlight() {
		return false
	}
	return r.wait() < MaxRetryWait
}

// neverFits reports an unfittable cost no wait makes fit: one above a
// window's burst (a period's reset clears a quota's).
func (r *Refusal) neverFits() bool { return r.Unfittable && !r.LimitType.Settled() }

// inFlight reports a reserve-mode budget refusal that calls in flight
// cause (InFlight).
func (r *Refusal) inFlight() bool { return r.InFlight > 0 && r.Reserve && r.LimitType == BudgetUSD }

// AppendBody appends the JSON body in r.Shape.
func (r *Refusal) AppendBody(dst []byte) []byte {
	dst = appendHead(dst, r.Shape, r.Status(), r.ErrorType())
	dst = r.appendMessage(dst)
	dst = appendTail(dst, r.Shape, r.ErrorType(), "")
	dst = jsontok.AppendKeyString(dst, `,"refused_by":{"limit_id":`, r.LimitID)
	dst = jsontok.AppendKeyString(dst, `,"limit_type":`, string(r.LimitType))
	dst = jsontok.AppendKeyString(dst, `,"unit":`, r.LimitType.Unit())
	dst = jsontok.AppendKeyString(dst, `,"node":`, r.Node)
	switch {
	case r.Unfittable && r.LimitType.Settled():
		dst = r.appendResets(dst)
		dst = r.appendAmount(dst, `,"cost":`, r.Cost)
		dst = r.appendAmount(dst, `,"observed":`, r.Observed)
		dst = r.appendAmount(dst, `,"limit":`, r.Limit)
	case r.Unfittable:
		dst = r.appendPeriod(dst)
		dst = jsontok.AppendKeyInt(dst, `,"cost":`, r.Cost)
		dst = jsontok.AppendKeyInt(dst, `,"burst":`, r.Burst)
	case r.inFlight():
		dst = r.appendPeriod(dst)
		dst = r.appendAmount(dst, `,"observed":`, r.Observed)
		dst = r.appendAmount(dst, `,"limit":`, r.Limit)
		dst = r.appendAmount(dst, `,"in_flight":`, r.InFlight)
	case r.LimitType.Settled():
		dst = r.appendResets(dst)
		dst = r.appendAmount(dst, `,"observed":`, r.Observed)
		dst = r.appendAmount(dst, `,"limit":`, r.Limit)
	case r.LimitType == Concurrency:
		dst = jsontok.AppendKeyInt(dst, `,"observed":`, r.Observed)
		dst = jsontok.AppendKeyInt(dst, `,"limit":`, r.Limit)
	default: // rpm, tpm
		dst = r.appendPeriod(dst)
		dst = r.appendRetry(dst)
	}
	dst = append(dst, `},"enforcement":{"posture":"`+postureEnforcing+`","approximate":`...)
	switch {
	case r.Reserve && r.LimitType == BudgetUSD:
		dst = appendBool(dst, r.Replicas > 1 && !r.Held)
		dst = append(dst, `,"note":`...)
		note := NoteReserve
		if r.Held {
			note = NoteReserveHeld
		} else if r.Replicas > 1 {
			note = NoteReserveFleet
		}
		if r.inFlight() {
			dst = jsontok.AppendString(dst, note+"; "+NoteInFlight)
		} else {
			dst = jsontok.AppendString(dst, note)
		}
	case r.LimitType.Settled():
		dst = appendBool(dst, true)
		dst = jsontok.AppendKeyInt(dst, `,"bound":{"tee_lag_rows":`, r.Bound.TeeLagRows)
		dst = jsontok.AppendKeyInt(dst, `,"dropped_rows":`, r.Bound.DroppedRows)
		if r.Bound.UnackedFor > 0 {
			dst = jsontok.AppendKeyInt(dst, `,"unacked_for_s":`, int64(max(r.Bound.UnackedFor/time.Second, 1)))
		}
		dst = append(dst, `},"note":`...)
		if r.LimitType == BudgetUSD {
			dst = jsontok.AppendString(dst, NoteSpend)
		} else {
			dst = jsontok.AppendString(dst, NoteUsage)
		}
	default:
		dst = appendBool(dst, r.LimitType.Approximate())
	}
	dst = append(dst, '}')
	return appendClose(dst, r.Shape, r.RequestID)
}

func (r *Refusal) appendMessage(dst []byte) []byte {
	if !r.Unfittable {
		dst = append(dst, `"request refused by limit `...)
		dst = jsontok.AppendEscaped(dst, r.LimitID)
		return append(dst, '"')
	}
	unit := r.LimitType.Unit()
	if r.LimitType.Settled() {
		left := max(r.Limit-r.Observed, 0)
		return jsontok.AppendString(dst, "request refused by limit "+r.LimitID+": it needs at least "+strconv.FormatInt(r.Cost, 10)+" "+unit+
			" (its prompt and the least output the limit lets a call through with, min_output) and the limit has "+strconv.FormatInt(left, 10)+
			" left this "+r.Period+"; send a shorter prompt, or wait for the period to reset")
	}
	msg := "request refused by limit " + r.LimitID + ": it needs " + strconv.FormatInt(r.Cost, 10) + " " + unit +
		" at once and the limit's burst is " + strconv.FormatInt(r.Burst, 10) + ", so it can never fit"
	if r.LimitType == TPM {
		msg += "; lower max_tokens or shorten the prompt (the reserve is prompt bytes/4 plus max_tokens, at most 16384)"
	}
	return jsontok.AppendString(dst, msg)
}

func (r *Refusal) appendPeriod(dst []byte) []byte {
	dst = append(dst, `,"period":`...)
	return jsontok.AppendString(dst, r.Period)
}

// appendResets appends a settled limit's period, when it resets and the
// wait until then.
func (r *Refusal) appendResets(dst []byte) []byte {
	dst = r.appendPeriod(dst)
	dst = append(dst, `,"resets_at":`...)
	dst = appendSecondTime(dst, r.ResetsAt)
	return r.appendRetry(dst)
}

func (r *Refusal) appendRetry(dst []byte) []byte {
	dst = append(dst, `,"retry_after_s":`...)
	return strconv.AppendInt(dst, r.RetryAfter, 10)
}

func (r *Refusal) appendAmount(dst []byte, key string, v int64) []byte {
	dst = append(dst, key...)
	if r.LimitType == BudgetUSD {
		return AppendUSD(dst, v)
	}
	return strconv.AppendInt(dst, v, 10)
}

// AppendHeaders appends the response headers in the seeds' order.
func (r *Refusal) AppendHeaders(dst [][2]string) [][2]string {
	dst = append(dst, [2]string{HeaderContentType, contentTypeJSON})
	retry := r.ShouldRetry()
	var ms string // Retry-After-Ms, sharing the Ratelimit value's string
	if !r.neverFits() && r.LimitType != Concurrency && !r.inFlight() {
		var buf [128]byte // the values share one string
		b := ratelimitItem(buf[:0], r.LimitID, 'r', 0, 't', r.RetryAfter)
		cut := len(b)
		b = strconv.AppendInt(b, r.RetryAfter, 10)
		cut2 := len(b)
		if retry && r.Wait > 0 {
			b = appendMillis(b, r.Wait)
		}
		v := string(b)
		dst = append(dst, [2]string{HeaderRatelimit, v[:cut]}, [2]string{HeaderRetryAfter, v[cut:cut2]})
		ms = v[cut2:]
	}
	dst = append(dst,
		[2]string{HeaderRefusalType, r.ErrorType()},
		[2]string{HeaderRefusedBy, r.LimitID})
	if r.RequestID != "" {
		dst = append(dst, [2]string{HeaderRequestID, r.RequestID})
	}
	if ms != "" {
		dst = append(dst, [2]string{HeaderRetryAfterMs, ms})
	}
	return appendSDKHeaders(dst, retry, r.RequestID)
}

// Headers returns AppendHeaders(nil).
func (r *Refusal) Headers() [][2]string { return r.AppendHeaders(make([][2]string, 0, 10)) }
