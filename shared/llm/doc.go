// Package llm owns what the gateway reads from LLM API traffic: which
// provider API a path is, the governed fields of a request body (model, the
// output maximum, stream flags, prompt bytes), the tpm reserve, the
// stream_options rewrite that makes OpenAI streams report usage, usage from
// JSON response bodies, and an incremental scanner over SSE streams that
// records usage and can drop the usage chunk the gateway asked for.
//
// It runs inside the wasm filter on every request, so it reads JSON with
// the project's tokenizer (shared/jsontok and its jv reader) over a
// zero-copy view of the body, never decodes a whole document,
// and allocates little. Nothing here panics on bad input: a request body
// that cannot be read is a *RequestError suitable for a 400 body; a response
// body or stream that cannot be read yields no usage.
package llm
