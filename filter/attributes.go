package filter

import (
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/shared/jsontok/jv"

	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/wire"
)

// A request's customer and tags (issue: customers and tags without a key
// for each). Gate 1 reads them from the headers governance.attributes
// names (X-Tt-Customer, X-Tt-Tags by default), which never go upstream;
// gate 2 reads a customer from the body when no header named one (OpenAI's
// user and safety_identifier, Anthropic's metadata.user_id), and tags from
// the body fields tags_fields names. Each value is bounded in length and
// charset (govern.IDKind): one out of bound is a 400 naming the bound.

// AttributeHeaders are the names (lowercase) of the headers the binding
// reads a request's customer and tags from: the plan's, or the defaults
// before a plan is in force.
func (e *Engine) AttributeHeaders() (customer, tags string) {
	if e.plan != nil {
		return e.plan.Attributes.CustomerHeader, e.plan.Attributes.TagsHeader
	}
	return govern.DefaultCustomerHeader, govern.DefaultTagsHeader
}

// headAttributes reads the customer and tags headers of an armed, enabled
// plan into the stream, and removes them from what goes upstream. A value
// out of bound, or a header repeated with another value, is the 400 it
// returns.
func (e *Engine) headAttributes(s *Stream, h *RequestHead, v *Verdict) *wire.Rejection {
	a := &e.plan.Attributes
	if h.HasCustomer {
		v.RemoveHeaders = append(v.RemoveHeaders, a.CustomerHeader)
	}
	if h.HasTags {
		v.RemoveHeaders = append(v.RemoveHeaders, a.TagsHeader)
	}
	if h.AttributesRepeated {
		r := wire.BadIdentifier(s.id, "the "+a.CustomerHeader+" or "+a.TagsHeader+" header", "sent twice with different values", "")
		return &r
	}
	if h.HasCustomer {
		c := strings.TrimSpace(h.Customer)
		if msg := govern.CustomerID.Check(c); msg != "" {
			r := wire.BadIdentifier(s.id, "the "+a.CustomerHeader+" header", msg, "")
			return &r
		}
		s.dims.Customer, s.hasCustomer = c, true
	}
	if h.HasTags {
		tags, msg := govern.ParseTags(h.Tags)
		if msg != "" {
			r := wire.BadIdentifier(s.id, "the "+a.TagsHeader+" header", msg, "")
			return &r
		}
		s.dims.Tags, s.hasTags = tags, true
	}
	return nil
}

// attributePaths are the body fields of governance.attributes gate 2
// reads with the body (llm.ParseRequestFields, so that the body is read
// once): the customer's unless a header named it, then the tags'.
func (e *Engine) attributePaths(s *Stream) []string {
	a := &e.plan.Attributes
	e.paths = e.paths[:0]
	if !s.hasCustomer {
		e.paths = append(e.paths, a.CustomerFields...)
	}
	if !s.hasTags {
		e.paths = append(e.paths, a.TagsFields...)
	}
	return e.paths
}

// bodyAttributes reads, at gate 2, the customer and tags the headers did
// not name from the body fields of governance.attributes (e.fields, read
// with the body at attributePaths): the first field present (a string; a
// customer of "" counts as none). A value of another type or out of bound
// is the 400 it returns.
func (e *Engine) bodyAttributes(s *Stream) *wire.Rejection {
	a := &e.plan.Attributes
	tagsAt := 0 // where the tags' fields start in e.fields
	if !s.hasCustomer {
		tagsAt = len(a.CustomerFields)
		for i, f := range e.fields[:tagsAt] {
			switch f.Type {
			case jv.Null:
				continue
			case jv.String:
				if f.Str == "" {
					continue
				}
				if msg := govern.CustomerID.Check(f.Str); msg != "" {
					r := wire.BadIdentifier(s.id, "the body's "+a.CustomerFields[i]+" member", msg, a.CustomerFields[i])
					return &r
				}
				s.dims.Customer, s.hasCustomer = strings.Clone(f.Str), true
			default:
				r := wire.BadIdentifier(s.id, "the body's "+a.CustomerFields[i]+" member", "the customer must be a string; got "+typeName(f), a.CustomerFields[i])
				return &r
			}
			break
		}
	}
	if !s.hasTags {
		for i, f := range e.fields[tagsAt:] {
			var list []string
			switch {
			case f.Type == jv.Null:
				continue
			case f.Type == jv.String:
				list = strings.Split(f.Str, ",")
			case f.IsArray():
				ok := true
				f.ForEach(func(_, t jv.Value) bool {
					if t.Type != jv.String {
						ok = false
						return false
					}
					list = append(list, t.Str)
					return len(list) <= govern.MaxTags
				})
				if !ok {
					r := wire.BadIdentifier(s.id, "the body's "+a.TagsFields[i]+" member", "tags must be strings", a.TagsFields[i])
					return &r
				}
			default:
				r := wire.BadIdentifier(s.id, "the body's "+a.TagsFields[i]+" member", "tags must be a string (comma separated) or a list of strings; got "+typeName(f), a.TagsFields[i])
				return &r
			}
			tags, msg := govern.ParseTags(strings.Join(list, ","))
			if msg != "" {
				r := wire.BadIdentifier(s.id, "the body's "+a.TagsFields[i]+" member", msg, a.TagsFields[i])
				return &r
			}
			s.dims.Tags, s.hasTags = strings.Clone(tags), tags != ""
			break
		}
	}
	return nil
}

// checkModelName bounds the model a body names (govern.ModelID): a model
// of megabytes would become a counter, a row and a log line of megabytes.
func (e *Engine) checkModelName(s *Stream) *wire.Rejection {
	if msg := govern.ModelID.Check(s.req.Model); msg != "" {
		r := wire.BadIdentifier(s.id, "the body's model member", msg, "model")
		if n := govern.ModelID.MaxLen(); len(s.req.Model) > n {
			s.req.Model = s.req.Model[:n] // the row keeps what fits the bound
		}
		return &r
	}
	return nil
}

// customerAllowed checks a request's customer against a key's customers
// scope (path.Match patterns).
func customerAllowed(patterns []string, customer string) bool {
	return customer != "" && modelAllowed(patterns, customer)
}

// typeName names a JSON value's type for a message.
func typeName(v jv.Value) string {
	switch v.Type {
	case jv.Number:
		return "a number (" + strconv.Quote(v.Raw) + ")"
	case jv.True, jv.False:
		return "a boolean"
	case jv.JSON:
		if v.IsArray() {
			return "a list"
		}
		return "an object"
	}
	return "a string"
}

// rowTags is the stream's tags as a ledger row lists them.
func rowTags(tags string) []string {
	if tags == "" {
		return nil
	}
	return strings.Split(tags, ",")
}
