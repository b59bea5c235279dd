package govern

import (
	"strconv"
	"strings"

	"github.com/tokentriage/tokentriage/shared/config"
)

// Attributes is where a request's customer and tags are read
// (governance.attributes, with defaults applied): the headers at the
// first gate, and, when a header is absent, the body fields at the second.
type Attributes struct {
	// CustomerHeader and TagsHeader are header names, lowercase.
	CustomerHeader string
	TagsHeader     string
	// CustomerFields and TagsFields are dotted paths of body members, read
	// in order; the first present one is used.
	CustomerFields []string
	TagsFields     []string
}

// The defaults of governance.attributes.
const (
	DefaultCustomerHeader = "x-tt-customer"
	DefaultTagsHeader     = "x-tt-tags"
)

// DefaultCustomerFields are OpenAI's user and safety_identifier and
// Anthropic's metadata.user_id: where a client names its end user.
var DefaultCustomerFields = []string{"user", "safety_identifier", "metadata.user_id"}

// maxAttributeFields bounds the body fields of one attribute.
const maxAttributeFields = 8

// reservedHeaders are headers a customer or tags header cannot be: the
// gate reads them for other things, or the provider needs them.
var reservedHeaders = []string{"authorization", "x-api-key", "content-type", "content-length", "content-encoding", "host",
	"anthropic-version", "x-tt-model", "x-tt-provider", "openai-organization", "openai-project"}

func (c *compiler) attributes(a *config.Attributes) Attributes {
	out := Attributes{CustomerHeader: DefaultCustomerHeader, TagsHeader: DefaultTagsHeader, CustomerFields: DefaultCustomerFields}
	if a == nil || c.unbuilt("governance.attributes", "attributes") {
		return out
	}
	const p = "governance.attributes"
	if a.CustomerHeader != "" {
		out.CustomerHeader = c.attributeHeader(p+".customer_header", a.CustomerHeader)
	}
	if a.TagsHeader != "" {
		out.TagsHeader = c.attributeHeader(p+".tags_header", a.TagsHeader)
	}
	if out.CustomerHeader != "" && out.CustomerHeader == out.TagsHeader {
		c.at(p+".tags_header", "%q is the customer header too; name two headers", a.TagsHeader)
	}
	if a.CustomerFields != nil {
		out.CustomerFields = c.attributeFields(p+".customer_fields", *a.CustomerFields)
	}
	out.TagsFields = c.attributeFields(p+".tags_fields", a.TagsFields)
	return out
}

func (c *compiler) attributeHeader(at, h string) string {
	name := strings.ToLower(h)
	if name == "" || !headerToken(name) {
		c.at(at, "%q is not a header name (letters, digits and - such as X-Customer-Id)", h)
		return ""
	}
	for _, r := range reservedHeaders {
		if name == r {
			c.at(at, "%q is read by the gateway or the provider for something else; name a header of your own, such as X-Customer-Id", h)
			return ""
		}
	}
	return name
}

func headerToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func (c *compiler) attributeFields(at string, fields []string) []string {
	if len(fields) > maxAttributeFields {
		c.at(at, "%d fields, over the bound of %d", len(fields), maxAttributeFields)
		return nil
	}
	out := make([]string, 0, len(fields))
	for i, f := range fields {
		if !fieldPathOK(f) {
			c.at(at+"["+strconv.Itoa(i)+"]", "%q is not a body field: write member names joined by '.', each letters, digits, _ and - (user, metadata.user_id)", f)
			continue
		}
		out = append(out, f)
	}
	return out
}

// fieldPathOK reports whether f is a dotted path of plain member names.
func fieldPathOK(f string) bool {
	if f == "" || len(f) > 128 {
		return false
	}
	for seg := range strings.SplitSeq(f, ".") {
		if seg == "" {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
				return false
			}
		}
	}
	return true
}
