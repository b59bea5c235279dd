package stub

// stopReason is Anthropic's stop_reason for the plan.
func (p plan) stopReason() string {
	switch {
	case p.truncated:
		return "max_tokens"
	case p.tool():
		return "tool_use"
	}
	return "end_turn"
}

// toolUse appends a tool_use content block; input is its input object
// ({} while a stream has not sent it, or when the output maximum cut it
// short of being JSON).
func toolUse(b []byte, p plan, input string) []byte {
	b = append(b, `{"type":"tool_use","id":"`...)
	b = append(b, p.callID("toolu_")...)
	b = append(b, `","name":`...)
	b = appendString(b, p.shape.name)
	b = append(b, `,"input":`...)
	return append(append(b, input...), '}')
}

// anthropicUsage appends a usage object: the cached part of the prompt is
// reported as cache_read_input_tokens and the rest as input_tokens, as
// Anthropic counts them. output is the output_tokens to report.
func anthropicUsage(b []byte, p plan, output int64) []byte {
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, p.prompt-p.cached)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	b = appendInt(b, p.cached)
	b = append(b, `,"output_tokens":`...)
	b = appendInt(b, output)
	return append(b, `,"service_tier":"standard"}`...)
}

// message appends a message object; final adds the content, stop reason
// and output count, otherwise it is message_start's empty form.
func message(b []byte, p plan, final bool) []byte {
	b = append(b, `{"id":"msg_stub`...)
	b = append(b, p.id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendString(b, p.req.Model)
	b = append(b, `,"content":[`...)
	switch {
	case final && p.tool() && p.truncated:
		b = toolUse(b, p, "{}")
	case final && p.tool():
		b = toolUse(b, p, p.text)
	case final:
		b = append(b, `{"type":"text","text":`...)
		b = appendString(b, p.text)
		b = append(b, '}')
	}
	b = append(b, `],"stop_reason":`...)
	if final {
		b = append(append(append(b, '"'), p.stopReason()...), '"')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"stop_sequence":null,"usage":`...)
	if final {
		b = anthropicUsage(b, p, p.completion)
	} else {
		b = anthropicUsage(b, p, min(1, p.completion))
	}
	return append(b, '}')
}

// messageBody is a /v1/messages answer.
func messageBody(b []byte, p plan) []byte { return message(b, p, true) }

// streamMessages answers a streaming /v1/messages request with Anthropic's
// event sequence: message_start, content_block_start, ping,
// content_block_delta per piece, content_block_stop, message_delta (with
// the output count) and message_stop.
func streamMessages(sw *sse, p plan) {
	var b []byte
	b = message(append(b[:0], `{"type":"message_start","message":`...), p, false)
	sw.event("message_start", append(b, '}'))
	if p.tool() {
		b = toolUse(append(b[:0], `{"type":"content_block_start","index":0,"content_block":`...), p, "{}")
		sw.event("content_block_start", append(b, '}'))
	} else {
		sw.event("content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`))
	}
	sw.event("ping", []byte(`{"type": "ping"}`))
	for _, piece := range p.pieces() {
		if p.tool() {
			b = append(b[:0], `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`...)
		} else {
			b = append(b[:0], `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`...)
		}
		b = appendString(b, piece)
		sw.event("content_block_delta", append(b, `}}`...))
	}
	sw.event("content_block_stop", []byte(`{"type":"content_block_stop","index":0}`))
	b = append(b[:0], `{"type":"message_delta","delta":{"stop_reason":"`...)
	b = append(b, p.stopReason()...)
	b = append(b, `","stop_sequence":null},"usage":{"output_tokens":`...)
	b = appendInt(b, p.completion)
	sw.event("message_delta", append(b, `}}`...))
	sw.event("message_stop", []byte(`{"type":"message_stop"}`))
}
