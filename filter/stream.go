package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/ledger"
	"github.com/tokentriage/tokentriage/shared/llm"
	"github.com/tokentriage/tokentriage/shared/rate"
	"github.com/tokentriage/tokentriage/shared/vkey"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// Stream is the state of one HTTP request through the gates. Streams are
// reused: reset clears everything a request set.
type Stream struct {
	id    string
	start time.Time
	kid   string
	// key is the entry of the virtual key the request authenticated
	// with (nil when it did not): its resolved instances are kept there.
	key    *keyEntry
	owner  string
	scopes *vkey.Scopes
	chain  []string
	dims   govern.Dims
	// hasCustomer, hasTags: a header or a body field named the request's
	// customer (dims.Customer) and tags (dims.Tags).
	hasCustomer, hasTags bool
	method               string
	path                 string // without the query
	ep                   llm.Endpoint
	governs              bool // a governed LLM endpoint: gate 2 runs on its body
	// held: the request headers wait for gate 2 (hold_headers), which may
	// still set them; hadLength: the client sent a content-length.
	held      bool
	hadLength bool
	// holdChosen, holdIt: whether the request is one that waits at its
	// headers, decided once (Engine.holding).
	holdChosen, holdIt bool
	// shape is the body shape of the gateway's own answers to it.
	shape wire.Shape
	// free is a free endpoint (models.go), freeID the model of
	// /v1/models/{id}; modelScope, when not nil, filters the upstream's
	// model list, whose body is then held until it is complete.
	free       freeKind
	freeID     string
	modelScope []string
	holdBody   bool
	// listReadable is false when the held list came back compressed.
	listReadable bool

	// Gate results.
	leases     []lease
	reserves   []reserve
	disclosure wire.Disclosure
	shadow     []ledger.Ref
	breached   []ledger.Ref
	suspended  []string
	// overflow lists the limits that counted the request in their
	// overflow counter (its value was past max_distinct).
	overflow []string
	unarmed  bool // no plan in force yet: nothing was checked
	// fb is the request's fallback to a limit's fallback model.
	fb fallbackState

	// wait is the request's wait for a lease of a fleet limit, and where
	// its gate resumes; reconcile are the corrections of its store: redis
	// tpm reserves its lot could not take, for the row
	// (ledger.Row.Reconcile); body is the request body while gate 2 waits.
	wait      leaseWait
	reconcile []string
	body      []byte
	// gen changes every time the stream is reused, so an answer to a
	// callout of an earlier request is recognised and dropped.
	gen uint64
	// waker carries out a verdict reached outside the request's callbacks
	// (on a callout's answer): the binding's context, set by it.
	waker Waker
	// bodyIn says the body ended (bodyInEnd) or its trailers came
	// (bodyInTrailers) while gate 1 waited for the fleet: gate 2 runs when
	// gate 1 has decided (BodyAfterWait).
	bodyIn uint8

	// The request as parsed at gate 2.
	req          llm.Request
	parsed       bool
	forwarded    bool // gate 2 let it go to the provider
	bodySize     int
	stripUsage   bool
	replacedBody bool
	// outMax is the output maximum budget reserve mode lowered the call
	// to, -1 when none did; spend are its reservations.
	outMax int64
	spend  []spendReserve

	// The answer.
	replied   bool // a local reply was sent (a refusal or /tt/v1/me)
	local     bool // a /tt/ path, answered by the filter: never a ledger row
	refusal   refusalInfo
	status    int
	respSeen  bool
	respDone  bool
	sse       *llm.StreamScanner // scanning an SSE answer (scanner), else nil
	scanner   *llm.StreamScanner // kept across requests, with its buffers
	jsonBody  []byte             // a copy of a JSON response, for its usage
	jsonOver  bool               // the JSON response outgrew the copy cap
	bigJSON   *llm.UsageScanner  // then reads its usage; kept across requests
	usage     ledger.Usage
	estimated ledger.Estimated
	served    string
	// clamped: the provider's usage was past what the request could
	// produce and was held to the bound (boundUsage).
	clamped bool
	// authority is the request's :authority, for log lines.
	authority string
	// passthrough: a request let through ungoverned (not a governed
	// endpoint); it leaves a passthrough row.
	passthrough bool
	settled     bool
	out         []byte // scratch for rewritten response chunks
}

// lease is one concurrency lease taken at gate 1.
type lease struct {
	hold     *gaugeHold
	released bool
}

// reserve is one tpm reserve taken at gate 2: from the fleet's lot named
// lot (store: redis; corrected in that lot while it is the replica's,
// else by the row's reconcile), or in the shared-data rate cell named cell
// (a local reserve, or the replica's share while the fleet does not
// decide), corrected there on a hand-back and at settlement. key is the
// instance's shared-data key (Instance.CellKey), id the counter identity
// the fleet's Redis knows it by; metric what its tokens count.
type reserve struct {
	key    string
	id     string
	metric govern.Metric
	alg    rate.Algorithm
	params rate.Params
	amount int64
	lot    int64
	cell   string
}

// refusalInfo is what the ledger row records of a refusal.
type refusalInfo struct {
	errorType string
	by        *ledger.Ref
}

func (s *Stream) reset() {
	leases, reserves, spend := s.leases[:0], s.reserves[:0], s.spend[:0]
	shadow, breached, suspended, overflow := s.shadow[:0], s.breached[:0], s.suspended[:0], s.overflow[:0]
	chain, out, jsonBody, scanner, bigJSON := s.chain[:0], s.out[:0], s.jsonBody[:0], s.scanner, s.bigJSON
	wait, gen, reconcile := s.wait, s.gen+1, s.reconcile[:0]
	body := s.body[:0]
	if cap(body) > 64<<10 {
		body = nil // a large body's copy is not kept for the next request
	}
	wait.reset()
	*s = Stream{wait: wait, gen: gen, reconcile: reconcile, body: body}
	s.leases, s.reserves, s.spend = leases, reserves, spend
	s.shadow, s.breached, s.suspended, s.overflow = shadow, breached, suspended, overflow
	s.chain, s.out, s.jsonBody, s.scanner, s.bigJSON = chain, out, jsonBody, scanner, bigJSON
}

// Waker carries out a verdict the engine reached on the answer to a
// callout a request was waiting for.
type Waker interface {
	Wake(Verdict)
}

// SetWaker names who carries out s's verdicts reached outside its
// callbacks (the binding's HTTP context).
func (s *Stream) SetWaker(w Waker) { s.waker = w }

// wake hands v to the stream's waker, if it has one.
func (s *Stream) wake(v Verdict) {
	if s.waker != nil {
		s.waker.Wake(v)
	}
}

// NewStream returns a fresh stream for a request.
func (e *Engine) NewStream() *Stream {
	if n := len(e.free); n > 0 {
		s := e.free[n-1]
		e.free = e.free[:n-1]
		return s
	}
	return &Stream{}
}

// Release returns a finished stream for reuse. The caller must not use s
// again.
func (e *Engine) Release(s *Stream) {
	if len(e.free) < 64 {
		s.reset()
		e.free = append(e.free, s)
	}
}

// Verdict tells the binding what to do after a request callback.
type Verdict struct {
	Action Action
	// Reply is sent as a local response when Action is Reply.
	Reply *Reply
	// RemoveHeaders and SetHeaders edit the request headers (only while
	// they are still writable: in the headers callback, or in the body
	// callback when the headers callback paused). RemoveHeaders may be the
	// engine's scratch, valid until its next callback.
	RemoveHeaders []string
	SetHeaders    [][2]string
	// RouteHeaders are set when the host can (a map past its limits may
	// refuse them): the request goes on either way. ClearRoute asks the
	// host to choose the route again after the header edits (Envoy chooses
	// it before the filter runs).
	RouteHeaders [][2]string
	ClearRoute   bool
	// Body, when non-nil, replaces the buffered request body.
	Body []byte
	// Length, when positive, is the content-length the replaced body goes
	// with; where the host cannot set it the header is removed (the body
	// then goes chunked).
	Length int64
}

// Action is the callback's result.
type Action int

const (
	// ActContinue lets the request go on.
	ActContinue Action = iota
	// ActPause holds the request (its body is being buffered).
	ActPause
	// ActReply answers locally with Verdict.Reply.
	ActReply
)

// Reply is a local response.
type Reply struct {
	Status  int
	Headers [][2]string
	Body    []byte
	Details string // the response code details Envoy records
}
