package ledger

import (
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/wire"
)

// FieldError is a row ParseRow refused: the field (a path such as
// "usage.input" or "shadow[1].node", empty for the row as a whole) and why.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "ledger: row: " + e.Reason
	}
	return "ledger: row field " + strconv.Quote(e.Field) + ": " + e.Reason
}

// ParseRow decodes one row written by AppendJSON (or by any JSON encoder
// using the same names). It is strict about what it knows: the input must
// be one valid JSON object in UTF-8; every known member must have its type
// (a string, an integer without fraction or exponent, true or false, an
// RFC 3339 time, null where the row allows it); counts must not be
// negative; the decision must be one of the five, a kind one of the four
// (ledger.Kind), a summary's count at least 1; a member may not appear
// twice. request_id (a well-formed request id), start, end, status and
// decision are required; every other member defaults to its zero value.
//
// Unknown members are ignored, at every level, once checked to be valid
// JSON: rows are written by filters and read by accountants upgraded at
// different times, and a row a newer filter wrote must not be lost by an
// older accountant. Times are returned in UTC, empty lists as nil.
func ParseRow(data []byte) (Row, error) {
	s := newScanner(data)
	var r Row
	err := s.row(&r)
	if err == nil && !s.fail {
		s.ws()
		if s.i != len(s.src) {
			s.fail = true
		}
	}
	if s.deep {
		return Row{}, &FieldError{Reason: "nested deeper than " + strconv.Itoa(maxDepth) + " levels (at byte " + strconv.Itoa(s.i) + ")"}
	}
	if s.fail {
		return Row{}, &FieldError{Reason: "not valid JSON (at byte " + strconv.Itoa(s.i) + ")"}
	}
	if err != nil {
		return Row{}, err
	}
	return r, nil
}

// loc names a field lazily: its path is built only for an error.
type loc struct {
	base string // the row member
	idx  int    // the list index, or -1
	key  string // the member inside base, or ""
}

func top(name string) loc { return loc{base: name, idx: -1} }

func (l loc) in(key string) loc { l.key = key; return l }

func (l loc) at(i int) loc { l.idx = i; return l }

func (l loc) String() string {
	p := l.base
	if l.idx >= 0 {
		p += "[" + strconv.Itoa(l.idx) + "]"
	}
	if l.key != "" {
		p += "." + l.key
	}
	return p
}

// mismatch reports that the value at the cursor is not what the field
// wants, unless the value is not valid JSON at all.
func (s *scanner) mismatch(at loc, want string) error {
	text := s.raw()
	if !s.skip() {
		return nil // s.fail is set: ParseRow reports invalid JSON
	}
	return &FieldError{at.String(), want + ", got " + text}
}

func (s *scanner) row(r *Row) error {
	if s.peek() != '{' {
		if !s.skip() {
			return nil
		}
		s.i = 0
		return &FieldError{Reason: "want a JSON object, got " + s.raw()}
	}
	s.i++
	const (
		fRequestID = uint64(1) << iota
		fStart
		fEnd
		fStatus
		fDecision
		fKID
		fNode
		fEndpoint
		fProvider
		fModel
		fServed
		fStream
		fUsage
		fErrorType
		fRefusedBy
		fShadow
		fBreached
		fSuspended
		fEstimated
		fReplica
		fCost
		fOutOfScope
		fClamped
		fReconcile
		fHolds
		fFree
		fGatewayEnd
		fKind
		fCount
		fLeaseTTL
		fCut
		fReplaced
		fCustomer
		fTags
		fFallback
		fOverflow
	)
	var seen uint64
	for first := true; s.next(first, '}'); first = false {
		k, ok := s.key()
		if !ok {
			return nil
		}
		var bit uint64
		var err error
		at := top(k)
		switch k {
		case "request_id":
			bit = fRequestID
			if r.RequestID, err = s.string(at); err == nil && !wire.ValidRequestID(r.RequestID) {
				err = &FieldError{k, strconv.Quote(r.RequestID) + " is not a request id (tt_ and 26 lowercase base32 characters)"}
			}
		case "start":
			bit = fStart
			r.Start, err = s.time(at)
		case "end":
			bit = fEnd
			r.End, err = s.time(at)
		case "kid":
			bit = fKID
			r.KID, err = s.string(at)
		case "node":
			bit = fNode
			r.Node, err = s.string(at)
		case "endpoint":
			bit = fEndpoint
			r.Endpoint, err = s.string(at)
		case "provider":
			bit = fProvider
			r.Provider, err = s.string(at)
		case "model":
			bit = fModel
			r.Model, err = s.string(at)
		case "model_served":
			bit = fServed
			r.Served, err = s.string(at)
		case "stream":
			bit = fStream
			r.Stream, err = s.bool(at)
		case "usage":
			bit = fUsage
			err = s.usage(at, &r.Usage)
		case "status":
			bit = fStatus
			var n int64
			if n, err = s.count(at); err == nil && n > 999 {
				err = &FieldError{k, strconv.FormatInt(n, 10) + " is not an HTTP status (0 when no response was sent)"}
			}
			r.Status = int(n)
		case "decision":
			bit = fDecision
			var d string
			if d, err = s.string(at); err == nil && !Decision(d).Known() {
				err = &FieldError{k, strconv.Quote(d) + " is not one of admitted, refused, shadow_refused, soft_breach, passthrough"}
			}
			r.Decision = Decision(d)
		case "error_type":
			bit = fErrorType
			r.ErrorType, err = s.string(at)
		case "refused_by":
			bit = fRefusedBy
			if !s.literal("null") {
				r.RefusedBy = new(Ref)
				err = s.ref(at, r.RefusedBy)
			}
		case "shadow":
			bit = fShadow
			r.Shadow, err = s.refs(at)
		case "breached":
			bit = fBreached
			r.Breached, err = s.refs(at)
		case "suspended":
			bit = fSuspended
			r.Suspended, err = s.strings(at)
		case "estimated":
			bit = fEstimated
			err = s.estimated(at, &r.Estimated)
		case "replica":
			bit = fReplica
			r.Replica, err = s.string(at)
		case "served_out_of_scope":
			bit = fOutOfScope
			r.ServedOutOfScope, err = s.bool(at)
		case "usage_clamped":
			bit = fClamped
			r.UsageClamped, err = s.bool(at)
		case "free":
			bit = fFree
			r.Free, err = s.bool(at)
		case "gateway_end":
			bit = fGatewayEnd
			r.GatewayEnd, err = s.time(at)
		case "reconcile":
			bit = fReconcile
			r.Reconcile, err = s.strings(at)
		case "holds":
			bit = fHolds
			r.Holds, err = s.strings(at)
		case "kind":
			bit = fKind
			var k string
			if k, err = s.string(at); err == nil && !Kind(k).Known() {
				err = &FieldError{"kind", strconv.Quote(excerpt(k)) + " is not one of start, summary, close (or absent, a finished request)"}
			}
			r.Kind = Kind(k)
		case "count":
			bit = fCount
			if r.Count, err = s.count(at); err == nil && r.Count == 0 {
				err = &FieldError{k, "0; a summary stands for at least one request"}
			}
		case "lease_ttl_ms":
			bit = fLeaseTTL
			r.LeaseTTLMS, err = s.count(at)
		case "cut":
			bit = fCut
			r.Cut, err = s.strings(at)
		case "replaced":
			bit = fReplaced
			if !s.literal("null") {
				r.Replaced = new(Replaced)
				err = s.replaced(at, r.Replaced)
			}
		case "customer":
			bit = fCustomer
			r.Customer, err = s.string(at)
		case "tags":
			bit = fTags
			r.Tags, err = s.strings(at)
		case "overflow":
			bit = fOverflow
			r.Overflow, err = s.strings(at)
		case "fallback":
			bit = fFallback
			if !s.literal("null") {
				r.Fallback = new(Fallback)
				err = s.fallback(at, r.Fallback)
			}
		case "cost":
			bit = fCost
			if !s.literal("null") {
				r.Cost = new(Cost)
				err = s.cost(at, r.Cost)
			}
		default:
			if !s.skip() {
				return nil
			}
			continue
		}
		if seen&bit != 0 {
			return &FieldError{k, "appears twice"}
		}
		seen |= bit
		if err != nil || s.fail {
			return err
		}
	}
	if s.ws(); s.fail || s.i != len(s.src) {
		s.fail = true // a broken or trailing value outranks a missing member
		return nil
	}
	for _, req := range []struct {
		bit  uint64
		name string
	}{{fRequestID, "request_id"}, {fStart, "start"}, {fEnd, "end"}, {fStatus, "status"}, {fDecision, "decision"}} {
		if seen&req.bit == 0 {
			return &FieldError{req.name, "missing; every row carries it"}
		}
	}
	return nil
}

func (s *scanner) string(at loc) (string, error) {
	v, ok := s.str()
	if !ok {
		if s.fail {
			return "", nil
		}
		return "", s.mismatch(at, "want a string")
	}
	return v, nil
}

func (s *scanner) bool(at loc) (bool, error) {
	switch {
	case s.literal("true"):
		return true, nil
	case s.literal("false"):
		return false, nil
	}
	return false, s.mismatch(at, "want true or false")
}

// count reads a non-negative integer written without fraction or exponent.
func (s *scanner) count(at loc) (int64, error) {
	save := s.i
	text, ok := s.number()
	if !ok {
		if s.fail {
			return 0, nil
		}
		return 0, s.mismatch(at, "want an integer")
	}
	n, err := strconv.ParseInt(text, 10, 64)
	switch {
	case err == nil && n < 0:
		return 0, &FieldError{at.String(), "negative " + text + "; counts are never below 0"}
	case err == nil:
		return n, nil
	case err.(*strconv.NumError).Err == strconv.ErrRange:
		return 0, &FieldError{at.String(), excerpt(text) + " is out of range"}
	}
	s.i = save
	return 0, s.mismatch(at, "want an integer")
}

func (s *scanner) time(at loc) (time.Time, error) {
	save := s.i
	v, err := s.string(at)
	if err != nil || s.fail {
		return time.Time{}, err
	}
	t, perr := time.Parse(time.RFC3339Nano, v)
	if perr != nil {
		s.i = save
		return time.Time{}, s.mismatch(at, "want an RFC 3339 time such as 2026-08-09T20:44:50.000000000Z")
	}
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, &FieldError{at.String(), strconv.Quote(v) + " falls outside the years 0000 to 9999 in UTC"}
	}
	return t, nil
}

// object walks the members of the object at the cursor; member parses the
// value of a known key and reports false for an unknown one.
func (s *scanner) object(at loc, member func(key string, at loc) (bool, error), required ...string) error {
	if s.peek() != '{' {
		return s.mismatch(at, "want an object")
	}
	s.i++
	var seen [5]string
	n := 0
	for first := true; s.next(first, '}'); first = false {
		k, ok := s.key()
		if !ok {
			return nil
		}
		known, err := member(k, at.in(k))
		if err != nil || s.fail {
			return err
		}
		if !known {
			if !s.skip() {
				return nil
			}
			continue
		}
		for _, p := range seen[:n] {
			if p == k {
				return &FieldError{at.in(k).String(), "appears twice"}
			}
		}
		if n < len(seen) {
			seen[n] = k
			n++
		}
	}
next:
	for _, want := range required {
		for _, p := range seen[:n] {
			if p == want {
				continue next
			}
		}
		if !s.fail {
			return &FieldError{at.in(want).String(), "missing; every row carries it"}
		}
	}
	return nil
}

func (s *scanner) usage(at loc, u *Usage) error {
	return s.object(at, func(k string, at loc) (bool, error) {
		var dst *int64
		switch k {
		case "input":
			dst = &u.Input
		case "output":
			dst = &u.Output
		case "cached_input":
			dst = &u.CachedInput
		case "reasoning":
			dst = &u.Reasoning
		case "total":
			dst = &u.Total
		default:
			return false, nil
		}
		var err error
		*dst, err = s.count(at)
		return true, err
	})
}

func (s *scanner) estimated(at loc, e *Estimated) error {
	return s.object(at, func(k string, at loc) (bool, error) {
		var err error
		switch k {
		case "input":
			e.Input, err = s.bool(at)
		case "output":
			e.Output, err = s.bool(at)
		default:
			return false, nil
		}
		return true, err
	})
}

func (s *scanner) cost(at loc, c *Cost) error {
	return s.object(at, func(k string, at loc) (bool, error) {
		var err error
		switch k {
		case "nanos":
			c.Nanos, err = s.count(at)
		case "unpriced":
			c.Unpriced, err = s.bool(at)
		case "estimated":
			c.Estimated, err = s.bool(at)
		default:
			return false, nil
		}
		return true, err
	})
}

func (s *scanner) replaced(at loc, p *Replaced) error {
	return s.object(at, func(k string, at loc) (bool, error) {
		var err error
		switch k {
		case "end":
			p.End, err = s.time(at)
		case "usage":
			err = s.usage(at, &p.Usage)
		case "cost":
			if !s.literal("null") {
				p.Cost = new(Cost)
				err = s.cost(at, p.Cost)
			}
		default:
			return false, nil
		}
		return true, err
	}, "end")
}

func (s *scanner) ref(at loc, f *Ref) error {
	return s.object(at, func(k string, at loc) (bool, error) {
		var err error
		switch k {
		case "limit_id":
			f.LimitID, err = s.string(at)
		case "limit_type":
			f.LimitType, err = s.string(at)
		case "node":
			f.Node, err = s.string(at)
		default:
			return false, nil
		}
		return true, err
	}, "limit_id", "limit_type", "node")
}

func (s *scanner) fallback(at loc, f *Fallback) error {
	return s.object(at, func(k string, at loc) (bool, error) {
		var err error
		switch k {
		case "limit_id":
			f.LimitID, err = s.string(at)
		case "model":
			f.Model, err = s.string(at)
		default:
			return false, nil
		}
		return true, err
	}, "limit_id", "model")
}

func (s *scanner) refs(at loc) ([]Ref, error) {
	if s.literal("null") {
		return nil, nil
	}
	if s.peek() != '[' {
		return nil, s.mismatch(at, "want a list")
	}
	s.i++
	var out []Ref
	for first := true; s.next(first, ']'); first = false {
		out = append(out, Ref{})
		if err := s.ref(at.at(len(out)-1), &out[len(out)-1]); err != nil || s.fail {
			return nil, err
		}
	}
	return out, nil
}

func (s *scanner) strings(at loc) ([]string, error) {
	if s.literal("null") {
		return nil, nil
	}
	if s.peek() != '[' {
		return nil, s.mismatch(at, "want a list")
	}
	s.i++
	var out []string
	for first := true; s.next(first, ']'); first = false {
		v, err := s.string(at.at(len(out)))
		if err != nil || s.fail {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// excerpt quotes a raw JSON value for an error, cut at 40 bytes.
func excerpt(raw string) string {
	if raw == "" {
		return "nothing"
	}
	if len(raw) > 40 {
		return raw[:40] + "…"
	}
	return raw
}
