// Package e2e holds the end-to-end tests of the whole system and the
// throughput benchmark of `tokentriage dev`. The tests start the dev system
// in-process (internal/devserver: the accountant, the built filter in the
// embedded proxy-wasm host, the stub upstream) on 127.0.0.1:0 and drive it
// over real loopback HTTP with the official OpenAI and Anthropic Go SDKs,
// as an application would; the benchmark sets it beside a bare
// httputil.ReverseProxy in front of the same stub.
package e2e
