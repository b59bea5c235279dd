package ledger

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/jsontok"
)

// TimeLayout is how a row writes its times: RFC 3339 in UTC with all nine
// fractional digits, so every time has the same width and rows sort by
// text. ParseRow accepts any RFC 3339 time and converts it to UTC.
const TimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// AppendJSON appends the row as one JSON object, members in struct order
// under their json tags, with no newline: times in TimeLayout, nil
// pointers as null, nil and empty lists as []. It does not allocate when dst
// has room. Times must lie in years 0 to 9999, as RFC 3339 requires.
func (r *Row) AppendJSON(dst []byte) []byte {
	dst = jsontok.AppendKeyString(dst, `{"request_id":`, r.RequestID)
	dst = append(dst, `,"start":`...)
	dst = appendTime(dst, r.Start)
	dst = append(dst, `,"end":`...)
	dst = appendTime(dst, r.End)
	dst = jsontok.AppendKeyString(dst, `,"kid":`, r.KID)
	dst = jsontok.AppendKeyString(dst, `,"node":`, r.Node)
	dst = jsontok.AppendKeyString(dst, `,"endpoint":`, r.Endpoint)
	dst = jsontok.AppendKeyString(dst, `,"provider":`, r.Provider)
	dst = jsontok.AppendKeyString(dst, `,"model":`, r.Model)
	dst = jsontok.AppendKeyString(dst, `,"model_served":`, r.Served)
	dst = jsontok.AppendKeyBool(dst, `,"stream":`, r.Stream)
	dst = append(dst, `,"usage":`...)
	dst = r.Usage.appendJSON(dst)
	dst = jsontok.AppendKeyInt(dst, `,"status":`, int64(r.Status))
	dst = jsontok.AppendKeyString(dst, `,"decision":`, string(r.Decision))
	dst = jsontok.AppendKeyString(dst, `,"error_type":`, r.ErrorType)
	dst = append(dst, `,"refused_by":`...)
	if r.RefusedBy == nil {
		dst = append(dst, "null"...)
	} else {
		dst = r.RefusedBy.appendJSON(dst)
	}
	dst = append(dst, `,"shadow":`...)
	dst = appendRefs(dst, r.Shadow)
	dst = append(dst, `,"breached":`...)
	dst = appendRefs(dst, r.Breached)
	dst = append(dst, `,"suspended":`...)
	dst = jsontok.AppendStrings(dst, r.Suspended)
	dst = jsontok.AppendKeyBool(dst, `,"estimated":{"input":`, r.Estimated.Input)
	dst = jsontok.AppendKeyBool(dst, `,"output":`, r.Estimated.Output)
	dst = jsontok.AppendKeyString(dst, `},"replica":`, r.Replica)
	if r.ServedOutOfScope {
		dst = append(dst, `,"served_out_of_scope":true`...)
	}
	if r.UsageClamped {
		dst = append(dst, `,"usage_clamped":true`...)
	}
	if r.Free {
		dst = append(dst, `,"free":true`...)
	}
	if !r.GatewayEnd.IsZero() {
		dst = append(dst, `,"gateway_end":`...)
		dst = appendTime(dst, r.GatewayEnd)
	}
	if len(r.Reconcile) > 0 {
		dst = append(dst, `,"reconcile":`...)
		dst = jsontok.AppendStrings(dst, r.Reconcile)
	}
	if len(r.Holds) > 0 {
		dst = append(dst, `,"holds":`...)
		dst = jsontok.AppendStrings(dst, r.Holds)
	}
	if r.Kind != KindEnd {
		dst = jsontok.AppendKeyString(dst, `,"kind":`, string(r.Kind))
	}
	if r.Count != 0 {
		dst = jsontok.AppendKeyInt(dst, `,"count":`, r.Count)
	}
	if r.LeaseTTLMS != 0 {
		dst = jsontok.AppendKeyInt(dst, `,"lease_ttl_ms":`, r.LeaseTTLMS)
	}
	if len(r.Cut) > 0 {
		dst = append(dst, `,"cut":`...)
		dst = jsontok.AppendStrings(dst, r.Cut)
	}
	if p := r.Replaced; p != nil {
		dst = append(dst, `,"replaced":{"end":`...)
		dst = appendTime(dst, p.End)
		dst = append(dst, `,"usage":`...)
		dst = p.Usage.appendJSON(dst)
		dst = append(dst, `,"cost":`...)
		dst = p.Cost.appendJSON(dst)
		dst = append(dst, '}')
	}
	if r.Customer != "" {
		dst = jsontok.AppendKeyString(dst, `,"customer":`, r.Customer)
	}
	if len(r.Tags) > 0 {
		dst = append(dst, `,"tags":`...)
		dst = jsontok.AppendStrings(dst, r.Tags)
	}
	if f := r.Fallback; f != nil {
		dst = jsontok.AppendKeyString(dst, `,"fallback":{"limit_id":`, f.LimitID)
		dst = jsontok.AppendKeyString(dst, `,"model":`, f.Model)
		dst = append(dst, '}')
	}
	if len(r.Overflow) > 0 {
		dst = append(dst, `,"overflow":`...)
		dst = jsontok.AppendStrings(dst, r.Overflow)
	}
	dst = append(dst, `,"cost":`...)
	dst = r.Cost.appendJSON(dst)
	return append(dst, '}')
}

// appendJSON appends the cost, or null.
func (c *Cost) appendJSON(dst []byte) []byte {
	if c == nil {
		return append(dst, "null"...)
	}
	dst = jsontok.AppendKeyInt(dst, `{"nanos":`, c.Nanos)
	dst = jsontok.AppendKeyBool(dst, `,"unpriced":`, c.Unpriced)
	dst = jsontok.AppendKeyBool(dst, `,"estimated":`, c.Estimated)
	return append(dst, '}')
}

func (u *Usage) appendJSON(dst []byte) []byte {
	dst = jsontok.AppendKeyInt(dst, `{"input":`, u.Input)
	dst = jsontok.AppendKeyInt(dst, `,"output":`, u.Output)
	dst = jsontok.AppendKeyInt(dst, `,"cached_input":`, u.CachedInput)
	dst = jsontok.AppendKeyInt(dst, `,"reasoning":`, u.Reasoning)
	dst = jsontok.AppendKeyInt(dst, `,"total":`, u.Total)
	return append(dst, '}')
}

func (f *Ref) appendJSON(dst []byte) []byte {
	dst = jsontok.AppendKeyString(dst, `{"limit_id":`, f.LimitID)
	dst = jsontok.AppendKeyString(dst, `,"limit_type":`, f.LimitType)
	dst = jsontok.AppendKeyString(dst, `,"node":`, f.Node)
	return append(dst, '}')
}

func appendRefs(dst []byte, refs []Ref) []byte {
	dst = append(dst, '[')
	for i := range refs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = refs[i].appendJSON(dst)
	}
	return append(dst, ']')
}

// appendTime appends t as a JSON string in TimeLayout, in UTC. Every row
// carries two; time.AppendFormat reads its layout again at each call, which
// in the filter's wasm cost more than the rest of the row, so the fixed
// layout is written digit by digit (years 0 to 9999; any other goes
// through AppendFormat). TestAppendTimeMatchesFormat holds the two equal.
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		dst = append(dst, '"')
		dst = t.AppendFormat(dst, TimeLayout)
		return append(dst, '"')
	}
	hour, min, sec := t.Clock()
	ns := t.Nanosecond()
	var b [32]byte // "2006-01-02T15:04:05.000000000Z"
	b[0] = '"'
	put4(b[1:], year)
	b[5] = '-'
	put2(b[6:], int(month))
	b[8] = '-'
	put2(b[9:], day)
	b[11] = 'T'
	put2(b[12:], hour)
	b[14] = ':'
	put2(b[15:], min)
	b[17] = ':'
	put2(b[18:], sec)
	b[20] = '.'
	for i := 29; i >= 21; i-- {
		b[i] = byte('0' + ns%10)
		ns /= 10
	}
	b[30] = 'Z'
	b[31] = '"'
	return append(dst, b[:]...)
}

func put2(b []byte, v int) { b[0], b[1] = byte('0'+v/10), byte('0'+v%10) }

func put4(b []byte, v int) {
	put2(b, v/100)
	put2(b[2:], v%100)
}
