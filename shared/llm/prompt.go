package llm

import "github.com/tokentriage/tokentriage/shared/jsontok/jv"

// The functions below measure PromptBytes (see Request) and refuse values
// of the wrong type. Members they do not read are skipped unchecked: the
// provider validates the rest of its schema.

// stringBytes reads a string or null.
func stringBytes(v jv.Value, at path) (int64, *RequestError) {
	switch v.Type {
	case jv.String:
		return decodedLen(v.Raw), nil
	case jv.Null:
		return 0, nil
	}
	return 0, fieldError(at, v, "must be a string; got "+typeName(v))
}

// arrayOr reads what every reader below starts with: null counts 0, a
// string its decoded length when str, and anything else but an array is
// refused as not what want says; array is true when v is one, for the
// caller to read.
func arrayOr(v jv.Value, at path, str bool, want string) (n int64, array bool, err *RequestError) {
	switch {
	case v.Type == jv.String && str:
		return decodedLen(v.Raw), false, nil
	case v.Type == jv.Null:
		return 0, false, nil
	case !v.IsArray():
		return 0, false, fieldError(at, v, "must be "+want+"; got "+typeName(v))
	}
	return 0, true, nil
}

// objectsBytes reads an array of objects, each "what" (a message, a
// content part): an element that is not an object is refused, and so is
// a member name that folds to one of names spelt otherwise; each counts
// what each gives it.
func objectsBytes(v jv.Value, at path, what string, names []string, each func(o jv.Value, at path) (int64, *RequestError)) (int64, *RequestError) {
	var n int64
	var err *RequestError
	i := 0
	v.ForEach(func(_, o jv.Value) bool {
		oat := at.index(i)
		i++
		if !o.IsObject() {
			err = fieldError(oat, o, "must be "+what+" object; got "+typeName(o))
			return false
		}
		if err = foldedKey(o, oat, Unknown, false, names); err != nil {
			return false
		}
		var c int64
		c, err = each(o, oat)
		n = addSat(n, c)
		return err == nil
	})
	return n, err
}

// membersBytes adds up what member gives each member of the object o.
func membersBytes(o jv.Value, at path, member func(k string, f jv.Value, at path) (int64, *RequestError)) (int64, *RequestError) {
	var n int64
	var err *RequestError
	o.ForEach(func(k, f jv.Value) bool {
		var c int64
		c, err = member(k.Str, f, at)
		n = addSat(n, c)
		return err == nil
	})
	return n, err
}

// messagesBytes reads chat or Anthropic messages: an array of objects.
func messagesBytes(v jv.Value, at path) (int64, *RequestError) {
	if n, array, err := arrayOr(v, at, false, "an array of messages"); !array {
		return n, err
	}
	return objectsBytes(v, at, "a message", messageNames, func(m jv.Value, mat path) (int64, *RequestError) {
		return membersBytes(m, mat, messageMember)
	})
}

func messageMember(k string, f jv.Value, at path) (int64, *RequestError) {
	switch k {
	case "content":
		return contentBytes(f, at.key("content"))
	case "tool_calls":
		return toolCallsBytes(f, at.key("tool_calls"))
	}
	return 0, nil
}

// contentBytes reads a content value: a string, an array of content parts
// (OpenAI) or blocks (Anthropic), or null.
func contentBytes(v jv.Value, at path) (int64, *RequestError) {
	if n, array, err := arrayOr(v, at, true, "a string, an array of content parts or null"); !array {
		return n, err
	}
	return partsBytes(v, at, 0)
}

// partsBytes reads an array of content parts or blocks: text counts; a
// tool_result's content counts (one level down); a tool_use's input counts
// its JSON bytes.
func partsBytes(v jv.Value, at path, level int) (int64, *RequestError) {
	return objectsBytes(v, at, "a content part", partNames, func(part jv.Value, pat path) (int64, *RequestError) {
		return membersBytes(part, pat, func(k string, f jv.Value, pat path) (int64, *RequestError) {
			switch k {
			case "text":
				return stringBytes(f, pat.key("text"))
			case "content":
				switch {
				case level > 0:
				case f.IsArray():
					return partsBytes(f, pat.key("content"), level+1)
				default:
					return contentBytes(f, pat.key("content"))
				}
			case "input":
				if f.IsObject() || f.IsArray() {
					return int64(len(f.Raw)), nil
				}
			}
			return 0, nil
		})
	})
}

// toolCallsBytes reads chat tool_calls[].function.arguments.
func toolCallsBytes(v jv.Value, at path) (int64, *RequestError) {
	if n, array, err := arrayOr(v, at, false, "an array of tool calls"); !array {
		return n, err
	}
	return objectsBytes(v, at, "a tool call", callNames, func(call jv.Value, cat path) (int64, *RequestError) {
		if fn := call.Get("function"); fn.IsObject() {
			if err := foldedKey(fn, cat.key("function"), Unknown, false, functionNames); err != nil {
				return 0, err
			}
		}
		return stringBytes(call.Get("function.arguments"), cat.key("function").key("arguments"))
	})
}

// promptBytes reads a completions prompt or an embeddings input: a string,
// an array of strings, an array of tokens, or an array of token arrays.
func promptBytes(v jv.Value, at path) (int64, *RequestError) {
	n, array, err := arrayOr(v, at, true, "a string, an array of strings, an array of tokens or an array of token arrays")
	if !array {
		return n, err
	}
	i := 0
	v.ForEach(func(_, e jv.Value) bool {
		eat := at.index(i)
		i++
		switch {
		case e.Type == jv.String:
			n = addSat(n, decodedLen(e.Raw))
		case e.Type == jv.Number:
			n = addSat(n, TokenBytes)
		case e.IsArray():
			j := 0
			e.ForEach(func(_, t jv.Value) bool {
				if t.Type != jv.Number {
					err = fieldError(eat.index(j), t, "must be a token (an integer); got "+typeName(t))
					return false
				}
				j++
				n = addSat(n, TokenBytes)
				return true
			})
		default:
			err = fieldError(eat, e, "must be a string, a token or an array of tokens; got "+typeName(e))
		}
		return err == nil
	})
	return n, err
}

// responsesInputBytes reads a responses input: a string, or an array of
// input items whose content, output and arguments count.
func responsesInputBytes(v jv.Value, at path) (int64, *RequestError) {
	if n, array, err := arrayOr(v, at, true, "a string or an array of input items"); !array {
		return n, err
	}
	return objectsBytes(v, at, "an input item", itemNames, func(item jv.Value, iat path) (int64, *RequestError) {
		return membersBytes(item, iat, func(k string, f jv.Value, iat path) (int64, *RequestError) {
			switch k {
			case "content", "output":
				return contentBytes(f, iat.key(k))
			case "arguments":
				return stringBytes(f, iat.key("arguments"))
			}
			return 0, nil
		})
	})
}
