package syncwire

// LeasePath is where the filter takes, gives back and renews its leases:
// slices of a fleet limit's remaining amount that the accountant takes
// from the fleet's shared Redis, atomically, and the replica decides on
// locally, in its shared data, with no round trip per request (RATIONALE.md,
// "How do leases keep a fleet limit without a round trip per request?").
//
//	POST /tt/internal/v1/lease
//	{"replica":"r-abc","wait":true,"leases":[{"kind":"rate","id":"team_rpm|rpm|org:acme/team:ml||1m0s|gcra",
//	  "alg":"gcra","amount":30,"period_ns":60000000000,"burst":30,"need":1,"extra":4}]}
//
// answers one grant per lease, in order:
//
//	{"leases":[{"allowed":true,"granted":5,"limit":30,"remaining":25,"anchor":"1786000000000000000","valid_ns":2000000000}],"replicas":3}
//
// Three kinds: "rate" (units of a store: redis rpm or tpm cell, for the
// lot's window or hold), "spend" (nanodollars of a budget, tokens or
// requests of a quota, in reserve mode, for the calendar period) and
// "slots" (slots of a concurrency limit under store: share). need is what
// a request waiting for this answer needs, extra what the replica would
// like ahead of need, back what it gives back (of the lot anchor names,
// for a rate lease). granted and held say what the replica holds (a rate
// lot's units, a spend lease's grants not given back and what its calls in
// flight hold, the slots it holds): each call renews the lease, and after
// Redis lost its data they are what is counted again.
//
// When Redis cannot decide (this accountant has none, it is down, it
// missed the deadline, or it lost its data and the fleet's leases are
// being counted again) the answer is 200 with Suspended saying why and no
// grants: the replica decides inside the lease it holds, and past it
// within its share of the limit, and says suspended.
const LeasePath = "/tt/internal/v1/lease"

// Lease kinds.
const (
	LeaseRate  = "rate"
	LeaseSpend = "spend"
	LeaseSlots = "slots"
)

// LeaseRequest is the body of a lease call.
type LeaseRequest struct {
	// Replica names the host process whose shared data holds the leases.
	Replica string `json:"replica"`
	// Wait: requests wait for this answer, which then has
	// shared_state.redis.timeout for its Redis operation; otherwise it is
	// off the request path and has longer.
	Wait bool `json:"wait,omitempty"`
	// DeadlineNS is how long requests may still wait for this answer (a
	// Wait call): the Redis operation has that long, and at least
	// shared_state.redis.timeout.
	DeadlineNS int64 `json:"deadline_ns,omitempty"`
	// LeaseTTLNS is the filter's lease_ttl: how long what its calls in
	// flight hold keeps counting after it went silent (0: 15 minutes).
	LeaseTTLNS int64   `json:"lease_ttl_ns,omitempty"`
	Leases     []Lease `json:"leases"`
}

// Lease is one lease operation on one counter.
type Lease struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// A rate cell's numbers (kind rate): its algorithm (gcra,
	// fixed_window, sliding_window), amount, window and burst.
	Alg      string `json:"alg,omitempty"`
	Amount   int64  `json:"amount"`
	PeriodNS int64  `json:"period_ns,omitempty"`
	Burst    int64  `json:"burst,omitempty"`
	// A spend lease's calendar unit (day, week, month) and period start
	// (unix s).
	Unit  string `json:"unit,omitempty"`
	Start int64  `json:"start,omitempty"`
	// Need is what a waiting request needs (a spend call's dearest cost),
	// Least the least it can do with (a spend call's cost with its output
	// maximum lowered to one token), Extra what the replica would like
	// ahead of need, Back what it gives back.
	Need  int64 `json:"need,omitempty"`
	Least int64 `json:"least,omitempty"`
	Extra int64 `json:"extra,omitempty"`
	Back  int64 `json:"back,omitempty"`
	// Anchor names the rate lot Back and Granted are of.
	Anchor string `json:"anchor,omitempty"`
	// Ask names this ask (unique to the replica's VM): Redis records what
	// it grants under it for a couple of minutes, and the same ask again
	// (its answer was lost: a deadline passed on the way back) is answered
	// with that grant, never a second one.
	Ask string `json:"ask,omitempty"`
	// Granted is a rate lot's units taken in all, or a spend lease's
	// grants not given back; Held what a spend lease's calls in flight
	// hold, or the slots a replica holds.
	Granted int64 `json:"granted,omitempty"`
	Held    int64 `json:"held,omitempty"`
}

// LeaseAnswer answers a lease call.
type LeaseAnswer struct {
	Leases []LeaseGrant `json:"leases,omitempty"`
	// Suspended, when set, says why Redis did not decide (no grants
	// follow). Down says it does not decide for now (no Redis, Redis
	// lost, or its data being counted again after it lost them): the
	// replica decides past its leases within its share until a call
	// succeeds again; otherwise the one call missed its deadline, and the
	// same ask may be made again.
	Suspended string `json:"suspended,omitempty"`
	Down      bool   `json:"down,omitempty"`
	// Replicas is the fleet's live replica count as the accountant last
	// knew it (a replica's share of a limit is the amount left over it).
	Replicas int `json:"replicas"`
}

// LeaseGrant is one lease's answer.
type LeaseGrant struct {
	// Allowed: all of Need was granted; Granted is what was (Need and
	// extra, or a part of Need, or, for a spend call whose dearest cost
	// does not fit, all that was left when its least cost did).
	Allowed bool  `json:"allowed"`
	Granted int64 `json:"granted"`
	// A rate cell after the grant, as shared/rate's Result: RetryAfterNS
	// is the wait for all of Need when it was not granted.
	Limit        int64 `json:"limit,omitempty"`
	Remaining    int64 `json:"remaining,omitempty"`
	RetryAfterNS int64 `json:"retry_after_ns,omitempty"`
	ResetAfterNS int64 `json:"reset_after_ns,omitempty"`
	Unfittable   bool  `json:"unfittable,omitempty"`
	// A rate lot: its name and how long it may be drawn on.
	Anchor  string `json:"anchor,omitempty"`
	ValidNS int64  `json:"valid_ns,omitempty"`
	// A spend lease: the fleet's spend before the grant, what of it the
	// calls in flight hold, and what is left after it.
	Spent    int64 `json:"spent,omitempty"`
	InFlight int64 `json:"in_flight,omitempty"`
	Left     int64 `json:"left,omitempty"`
	// Slots: those the other replicas hold, and this one's.
	Others int64 `json:"others,omitempty"`
	Mine   int64 `json:"mine,omitempty"`
	// Error is this lease's own failure (a malformed lease).
	Error string `json:"error,omitempty"`
}
