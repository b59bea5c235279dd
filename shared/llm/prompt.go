package llm

import "github.com/tidwall/gjson"

// The functions below measure PromptBytes (see Request) and refuse values
// of the wrong type. Members they do not read are skipped unchecked: the
// provider validates the rest of its schema.

// stringBytes reads a string or null.
func stringBytes(v gjson.Result, at path) (int64, *RequestError) {
	switch v.Type {
	case gjson.String:
		return decodedLen(v.Raw), nil
	case gjson.Null:
		return 0, nil
	}
	return 0, fieldError(at, v, "must be a string; got "+typeName(v))
}

// messagesBytes reads chat or Anthropic messages: an array of objects.
func messagesBytes(v gjson.Result, at path) (int64, *RequestError) {
	if v.Type == gjson.Null {
		return 0, nil
	}
	if !v.IsArray() {
		return 0, fieldError(at, v, "must be an array of messages; got "+typeName(v))
	}
	var n int64
	var err *RequestError
	i := 0
	v.ForEach(func(_, m gjson.Result) bool {
		mat := at.index(i)
		i++
		if !m.IsObject() {
			err = fieldError(mat, m, "must be a message object; got "+typeName(m))
			return false
		}
		if err = foldedKey(m, mat, Unknown, false, messageNames); err != nil {
			return false
		}
		m.ForEach(func(k, f gjson.Result) bool {
			var c int64
			switch k.Str {
			case "content":
				c, err = contentBytes(f, mat.key("content"))
			case "tool_calls":
				c, err = toolCallsBytes(f, mat.key("tool_calls"))
			}
			n = addSat(n, c)
			return err == nil
		})
		return err == nil
	})
	return n, err
}

// contentBytes reads a content value: a string, an array of content parts
// (OpenAI) or blocks (Anthropic), or null.
func contentBytes(v gjson.Result, at path) (int64, *RequestError) {
	switch {
	case v.Type == gjson.String:
		return decodedLen(v.Raw), nil
	case v.Type == gjson.Null:
		return 0, nil
	case v.IsArray():
		return partsBytes(v, at, 0)
	}
	return 0, fieldError(at, v, "must be a string, an array of content parts or null; got "+typeName(v))
}

// partsBytes reads an array of content parts or blocks: text counts; a
// tool_result's content counts (one level down); a tool_use's input counts
// its JSON bytes.
func partsBytes(v gjson.Result, at path, level int) (int64, *RequestError) {
	var n int64
	var err *RequestError
	i := 0
	v.ForEach(func(_, part gjson.Result) bool {
		pat := at.index(i)
		i++
		if !part.IsObject() {
			err = fieldError(pat, part, "must be a content part object; got "+typeName(part))
			return false
		}
		if err = foldedKey(part, pat, Unknown, false, partNames); err != nil {
			return false
		}
		part.ForEach(func(k, f gjson.Result) bool {
			var c int64
			switch k.Str {
			case "text":
				c, err = stringBytes(f, pat.key("text"))
			case "content":
				switch {
				case level > 0:
				case f.IsArray():
					c, err = partsBytes(f, pat.key("content"), level+1)
				default:
					c, err = contentBytes(f, pat.key("content"))
				}
			case "input":
				if f.IsObject() || f.IsArray() {
					c = int64(len(f.Raw))
				}
			}
			n = addSat(n, c)
			return err == nil
		})
		return err == nil
	})
	return n, err
}

// toolCallsBytes reads chat tool_calls[].function.arguments.
func toolCallsBytes(v gjson.Result, at path) (int64, *RequestError) {
	if v.Type == gjson.Null {
		return 0, nil
	}
	if !v.IsArray() {
		return 0, fieldError(at, v, "must be an array of tool calls; got "+typeName(v))
	}
	var n int64
	var err *RequestError
	i := 0
	v.ForEach(func(_, call gjson.Result) bool {
		cat := at.index(i)
		i++
		if !call.IsObject() {
			err = fieldError(cat, call, "must be a tool call object; got "+typeName(call))
			return false
		}
		if err = foldedKey(call, cat, Unknown, false, callNames); err != nil {
			return false
		}
		if fn := call.Get("function"); fn.IsObject() {
			if err = foldedKey(fn, cat.key("function"), Unknown, false, functionNames); err != nil {
				return false
			}
		}
		args := call.Get("function.arguments")
		var c int64
		c, err = stringBytes(args, cat.key("function").key("arguments"))
		n = addSat(n, c)
		return err == nil
	})
	return n, err
}

// promptBytes reads a completions prompt or an embeddings input: a string,
// an array of strings, an array of tokens, or an array of token arrays.
func promptBytes(v gjson.Result, at path) (int64, *RequestError) {
	switch {
	case v.Type == gjson.String:
		return decodedLen(v.Raw), nil
	case v.Type == gjson.Null:
		return 0, nil
	case !v.IsArray():
		return 0, fieldError(at, v, "must be a string, an array of strings, an array of tokens or an array of token arrays; got "+typeName(v))
	}
	var n int64
	var err *RequestError
	i := 0
	v.ForEach(func(_, e gjson.Result) bool {
		eat := at.index(i)
		i++
		switch {
		case e.Type == gjson.String:
			n = addSat(n, decodedLen(e.Raw))
		case e.Type == gjson.Number:
			n = addSat(n, TokenBytes)
		case e.IsArray():
			j := 0
			e.ForEach(func(_, t gjson.Result) bool {
				if t.Type != gjson.Number {
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
func responsesInputBytes(v gjson.Result, at path) (int64, *RequestError) {
	switch {
	case v.Type == gjson.String:
		return decodedLen(v.Raw), nil
	case v.Type == gjson.Null:
		return 0, nil
	case !v.IsArray():
		return 0, fieldError(at, v, "must be a string or an array of input items; got "+typeName(v))
	}
	var n int64
	var err *RequestError
	i := 0
	v.ForEach(func(_, item gjson.Result) bool {
		iat := at.index(i)
		i++
		if !item.IsObject() {
			err = fieldError(iat, item, "must be an input item object; got "+typeName(item))
			return false
		}
		if err = foldedKey(item, iat, Unknown, false, itemNames); err != nil {
			return false
		}
		item.ForEach(func(k, f gjson.Result) bool {
			var c int64
			switch k.Str {
			case "content", "output":
				c, err = contentBytes(f, iat.key(k.Str))
			case "arguments":
				c, err = stringBytes(f, iat.key("arguments"))
			}
			n = addSat(n, c)
			return err == nil
		})
		return err == nil
	})
	return n, err
}
