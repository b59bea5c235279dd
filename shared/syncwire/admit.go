package syncwire

// AdmitPath is where the filter asks its accountant to decide a request's
// store: redis limits in the fleet's shared Redis: one POST per gate, for
// all of the request's redis instances, while the request waits.
//
//	POST /tt/internal/v1/admit
//	{"rate":[{"id":"team_rpm|rpm|org:acme/team:ml||1m0s|gcra","alg":"gcra","amount":30,"period_ns":60000000000,"burst":30,"n":1}]}
//
// The accountant runs one script that takes each step in order and stops at
// the first that refuses; the answer has one result per step evaluated:
//
//	{"rate":[{"allowed":true,"limit":30,"remaining":29,"retry_after_ns":0,"reset_after_ns":2000000000,"unfittable":false}]}
//
// A budget in reserve mode (reserve: true) is a step of alg "hold" in the
// same list: the call's dearest cost (n), the least it can be lowered to
// (least), the budget's amount, calendar unit and period start, and the
// hold's lease; it holds on the fleet's spend (every accountant's total
// plus every live hold) under the request's id until the accountant that
// records the call's row releases it (its row's holds), the request is
// refused (release), or the lease lapses. Its result says what it holds
// (held), what the fleet had spent and held before it (used), and how much
// of used the holds of calls in flight held (in_flight).
//
// When Redis cannot decide (this accountant has none, it is down, or it
// missed the deadline) the answer is 200 with Suspended saying why and no
// results: the filter's local limiter answers and the row says suspended.
const AdmitPath = "/tt/internal/v1/admit"

// AdmitRequest is the body of an admit call.
type AdmitRequest struct {
	// Rate are rate cells to take from (rpm at gate 1, a tpm reserve at
	// gate 2), in seed 004 order.
	Rate []RateStep `json:"rate,omitempty"`
	// Adjust are signed corrections to commit without a decision (a tpm
	// reserve handed back when a later limit refused the request).
	Adjust []RateStep `json:"adjust,omitempty"`
	// RequestID names the request's budget holds (alg "hold" steps, and
	// Release).
	RequestID string `json:"request_id,omitempty"`
	// Release are budget holds of RequestID to release without a
	// decision: the request was refused after they were taken.
	Release []HoldRef `json:"release,omitempty"`
}

// AlgHold is the RateStep.Alg of a budget hold.
const AlgHold = "hold"

// HoldRef names a budget hold's counter and period.
type HoldRef struct {
	ID    string `json:"id"`
	Unit  string `json:"unit"`
	Start int64  `json:"start"`
}

// RateStep is one rate cell: its counter identity, algorithm (gcra,
// fixed_window or sliding_window), numbers (the burst 0 means the
// amount), and N, the cost to take or the signed correction.
type RateStep struct {
	ID       string `json:"id"`
	Alg      string `json:"alg"`
	Amount   int64  `json:"amount"`
	PeriodNS int64  `json:"period_ns"`
	Burst    int64  `json:"burst"`
	N        int64  `json:"n"`
	// A budget hold's numbers (Alg "hold"): the least cost, the calendar
	// unit and the period start (unix s) it counts in, and its lease.
	Least   int64  `json:"least,omitempty"`
	Unit    string `json:"unit,omitempty"`
	Start   int64  `json:"start,omitempty"`
	LeaseNS int64  `json:"lease_ns,omitempty"`
}

// AdmitAnswer answers an admit call.
type AdmitAnswer struct {
	Rate []RateResult `json:"rate,omitempty"`
	// Suspended, when set, says why Redis did not decide (no results
	// follow): the filter answers with its local limiter.
	Suspended string `json:"suspended,omitempty"`
}

// RateResult is one step's decision, as shared/rate's Result.
type RateResult struct {
	Allowed      bool  `json:"allowed"`
	Limit        int64 `json:"limit"`
	Remaining    int64 `json:"remaining"`
	RetryAfterNS int64 `json:"retry_after_ns"`
	ResetAfterNS int64 `json:"reset_after_ns"`
	Unfittable   bool  `json:"unfittable"`
	// A budget hold's answer: what it holds, what the fleet had spent
	// and held before it, and how much of that the holds of calls still
	// in flight held (it comes back as they settle).
	Held     int64 `json:"held,omitempty"`
	Used     int64 `json:"used,omitempty"`
	InFlight int64 `json:"in_flight,omitempty"`
}
