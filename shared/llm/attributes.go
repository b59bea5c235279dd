package llm

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Fields reads body members by dotted path (user, metadata.user_id): for
// each path of paths, the value at it, or a value of Type gjson.Null and
// empty Raw when the body has none. The body's top level is walked once,
// whatever the number of paths; a path is plain member names joined by
// "." (govern checks them at compile). The body must be a valid JSON
// object (ParseRequest has read it). out is reused when it has room.
func Fields(body []byte, paths []string, out []gjson.Result) []gjson.Result {
	out = out[:0]
	for range paths {
		out = append(out, gjson.Result{})
	}
	if len(paths) == 0 {
		return out
	}
	left := len(paths)
	gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool {
		for i, p := range paths {
			if out[i].Raw != "" {
				continue // the first occurrence of a member is read, as gjson reads it
			}
			first, rest, nested := strings.Cut(p, ".")
			if k.Str != first {
				continue
			}
			f := v
			if nested {
				f = v.Get(rest)
			}
			if f.Raw == "" {
				continue
			}
			out[i] = f
			left--
		}
		return left > 0
	})
	return out
}
