package ledger

import (
	"strconv"
	"time"

	"github.com/tokentriage/tokentriage/shared/wire"
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
	dst = append(dst, `{"request_id":`...)
	dst = wire.AppendJSONString(dst, r.RequestID)
	dst = append(dst, `,"start":`...)
	dst = appendTime(dst, r.Start)
	dst = append(dst, `,"end":`...)
	dst = appendTime(dst, r.End)
	dst = append(dst, `,"kid":`...)
	dst = wire.AppendJSONString(dst, r.KID)
	dst = append(dst, `,"node":`...)
	dst = wire.AppendJSONString(dst, r.Node)
	dst = append(dst, `,"endpoint":`...)
	dst = wire.AppendJSONString(dst, r.Endpoint)
	dst = append(dst, `,"provider":`...)
	dst = wire.AppendJSONString(dst, r.Provider)
	dst = append(dst, `,"model":`...)
	dst = wire.AppendJSONString(dst, r.Model)
	dst = append(dst, `,"model_served":`...)
	dst = wire.AppendJSONString(dst, r.Served)
	dst = append(dst, `,"stream":`...)
	dst = strconv.AppendBool(dst, r.Stream)
	dst = append(dst, `,"usage":{"input":`...)
	dst = strconv.AppendInt(dst, r.Usage.Input, 10)
	dst = append(dst, `,"output":`...)
	dst = strconv.AppendInt(dst, r.Usage.Output, 10)
	dst = append(dst, `,"cached_input":`...)
	dst = strconv.AppendInt(dst, r.Usage.CachedInput, 10)
	dst = append(dst, `,"reasoning":`...)
	dst = strconv.AppendInt(dst, r.Usage.Reasoning, 10)
	dst = append(dst, `,"total":`...)
	dst = strconv.AppendInt(dst, r.Usage.Total, 10)
	dst = append(dst, `},"status":`...)
	dst = strconv.AppendInt(dst, int64(r.Status), 10)
	dst = append(dst, `,"decision":`...)
	dst = wire.AppendJSONString(dst, string(r.Decision))
	dst = append(dst, `,"error_type":`...)
	dst = wire.AppendJSONString(dst, r.ErrorType)
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
	dst = append(dst, `,"suspended":[`...)
	for i, s := range r.Suspended {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = wire.AppendJSONString(dst, s)
	}
	dst = append(dst, `],"estimated":{"input":`...)
	dst = strconv.AppendBool(dst, r.Estimated.Input)
	dst = append(dst, `,"output":`...)
	dst = strconv.AppendBool(dst, r.Estimated.Output)
	dst = append(dst, `},"replica":`...)
	dst = wire.AppendJSONString(dst, r.Replica)
	if r.ServedOutOfScope {
		dst = append(dst, `,"served_out_of_scope":true`...)
	}
	if r.UsageClamped {
		dst = append(dst, `,"usage_clamped":true`...)
	}
	if len(r.Reconcile) > 0 {
		dst = append(dst, `,"reconcile":[`...)
		for i, s := range r.Reconcile {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = wire.AppendJSONString(dst, s)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"cost":`...)
	if r.Cost == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, `{"nanos":`...)
		dst = strconv.AppendInt(dst, r.Cost.Nanos, 10)
		dst = append(dst, `,"unpriced":`...)
		dst = strconv.AppendBool(dst, r.Cost.Unpriced)
		dst = append(dst, `,"estimated":`...)
		dst = strconv.AppendBool(dst, r.Cost.Estimated)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

func (f *Ref) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"limit_id":`...)
	dst = wire.AppendJSONString(dst, f.LimitID)
	dst = append(dst, `,"limit_type":`...)
	dst = wire.AppendJSONString(dst, f.LimitType)
	dst = append(dst, `,"node":`...)
	dst = wire.AppendJSONString(dst, f.Node)
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

func appendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, TimeLayout)
	return append(dst, '"')
}
