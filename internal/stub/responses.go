package stub

// responseStatus is the responses API status for the plan.
func (p plan) responseStatus() string {
	if p.truncated {
		return "incomplete"
	}
	return "completed"
}

// responseObject appends a response object. final selects the finished
// form (status, output and usage); otherwise it is the in-progress form.
func responseObject(b []byte, p plan, final bool) []byte {
	b = append(b, `{"id":"resp_stub`...)
	b = append(b, p.id...)
	b = append(b, `","object":"response","created_at":`...)
	b = appendInt(b, Created)
	b = append(b, `,"status":"`...)
	if final {
		b = append(b, p.responseStatus()...)
	} else {
		b = append(b, "in_progress"...)
	}
	b = append(b, `","error":null,"incomplete_details":`...)
	if final && p.truncated {
		b = append(b, `{"reason":"max_output_tokens"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"instructions":null,"max_output_tokens":`...)
	if p.req.HasMaxTokens {
		b = appendInt(b, p.req.MaxTokens)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = appendString(b, p.req.Model)
	b = append(b, `,"output":[`...)
	if final && p.tool() {
		b = functionCall(b, p, p.responseStatus(), p.text)
	} else if final {
		b = outputMessage(b, p, p.responseStatus(), p.text)
	}
	b = append(b, `],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":false,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":`...)
	if final {
		b = append(b, `{"input_tokens":`...)
		b = appendInt(b, p.prompt)
		b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
		b = appendInt(b, p.cached)
		b = append(b, `},"output_tokens":`...)
		b = appendInt(b, p.completion)
		b = append(b, `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":`...)
		b = appendInt(b, p.prompt+p.completion)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	return append(b, `,"user":null,"metadata":{}}`...)
}

// outputMessage appends the assistant message output item.
func outputMessage(b []byte, p plan, status, text string) []byte {
	b = append(b, `{"id":"msg_stub`...)
	b = append(b, p.id...)
	b = append(b, `","type":"message","status":"`...)
	b = append(b, status...)
	b = append(b, `","content":[`...)
	if status != "in_progress" {
		b = outputText(b, text)
	}
	return append(b, `],"role":"assistant"}`...)
}

// functionCall appends a function call output item with its arguments.
func functionCall(b []byte, p plan, status, args string) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, p.callID("fc_")...)
	b = append(b, `","type":"function_call","status":"`...)
	b = append(b, status...)
	b = append(b, `","arguments":`...)
	b = appendString(b, args)
	b = append(b, `,"call_id":"`...)
	b = append(b, p.callID("call_")...)
	b = append(b, `","name":`...)
	b = appendString(b, p.shape.name)
	return append(b, '}')
}

func outputText(b []byte, text string) []byte {
	b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
	b = appendString(b, text)
	return append(b, '}')
}

// responsesBody is a /v1/responses answer.
func responsesBody(b []byte, p plan) []byte { return responseObject(b, p, true) }

// streamResponses answers a streaming /v1/responses request with the
// responses API event sequence, ending in response.completed (or
// response.incomplete when the output maximum cut the reply).
func streamResponses(sw *sse, p plan) {
	var b []byte
	seq := int64(0)
	ev := func(typ string, body func([]byte) []byte) {
		b = append(b[:0], `{"type":"`...)
		b = append(b, typ...)
		b = append(b, `","sequence_number":`...)
		b = appendInt(b, seq)
		b = body(append(b, ','))
		b = append(b, '}')
		seq++
		sw.event(typ, b)
	}
	itemRef := func(b []byte) []byte {
		b = append(b, `"item_id":"msg_stub`...)
		b = append(b, p.id...)
		return append(b, `","output_index":0,"content_index":0`...)
	}
	ev("response.created", func(b []byte) []byte { return responseObject(append(b, `"response":`...), p, false) })
	ev("response.in_progress", func(b []byte) []byte { return responseObject(append(b, `"response":`...), p, false) })
	if p.tool() {
		callRef := func(b []byte) []byte {
			b = append(b, `"item_id":"`...)
			b = append(b, p.callID("fc_")...)
			return append(b, `","output_index":0`...)
		}
		ev("response.output_item.added", func(b []byte) []byte {
			return functionCall(append(b, `"output_index":0,"item":`...), p, "in_progress", "")
		})
		for _, piece := range p.pieces() {
			ev("response.function_call_arguments.delta", func(b []byte) []byte {
				b = append(callRef(b), `,"delta":`...)
				return appendString(b, piece)
			})
		}
		ev("response.function_call_arguments.done", func(b []byte) []byte {
			b = append(callRef(b), `,"arguments":`...)
			return appendString(b, p.text)
		})
		ev("response.output_item.done", func(b []byte) []byte {
			return functionCall(append(b, `"output_index":0,"item":`...), p, p.responseStatus(), p.text)
		})
		ev("response."+p.responseStatus(), func(b []byte) []byte { return responseObject(append(b, `"response":`...), p, true) })
		return
	}
	ev("response.output_item.added", func(b []byte) []byte {
		return outputMessage(append(b, `"output_index":0,"item":`...), p, "in_progress", "")
	})
	ev("response.content_part.added", func(b []byte) []byte {
		return outputText(append(itemRef(b), `,"part":`...), "")
	})
	for _, piece := range p.pieces() {
		ev("response.output_text.delta", func(b []byte) []byte {
			b = append(itemRef(b), `,"delta":`...)
			b = appendString(b, piece)
			return append(b, `,"logprobs":[]`...)
		})
	}
	ev("response.output_text.done", func(b []byte) []byte {
		b = append(itemRef(b), `,"text":`...)
		b = appendString(b, p.text)
		return append(b, `,"logprobs":[]`...)
	})
	ev("response.content_part.done", func(b []byte) []byte {
		return outputText(append(itemRef(b), `,"part":`...), p.text)
	})
	ev("response.output_item.done", func(b []byte) []byte {
		return outputMessage(append(b, `"output_index":0,"item":`...), p, p.responseStatus(), p.text)
	})
	ev("response."+p.responseStatus(), func(b []byte) []byte { return responseObject(append(b, `"response":`...), p, true) })
}
