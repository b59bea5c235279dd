package testkit

import "strings"

// ProseChat is a chat completions body: a system prompt, then one user
// message of prose with the escapes a pasted document brings (newlines,
// quotes, a tab now and then), repeated until the body so far holds at
// least fill bytes; rest closes the message and the body (for one,
// `"}],"max_tokens":16}`).
func ProseChat(fill int, rest string) []byte {
	const para = `The quick brown fox jumps over the lazy dog. \"Quoted words\" and a tab\there; then a new line.\n`
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a careful reader."},{"role":"user","content":"`)
	for b.Len() < fill {
		b.WriteString(para)
	}
	b.WriteString(rest)
	return []byte(b.String())
}
