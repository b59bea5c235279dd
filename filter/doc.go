// Package filter is the governance filter: the proxy-wasm plugin that gates
// every request at the proxy. Gate 1 runs on request headers (virtual key,
// chain, rpm, concurrency), gate 2 once the body is complete (model and
// scopes, budget and quota from the accountant's snapshot, the tpm
// reserve), and settlement on every terminal path (tpm reconcile, lease
// release, one ledger row for the accountant).
//
// The gate logic is host-agnostic: it runs over narrow interfaces (Store for
// shared data with compare-and-swap, a clock, Caller for HTTP callouts), so
// it tests natively with in-memory fakes; context.go binds it to the
// proxy-wasm ABI through filter/proxywasm. Every request passes through it,
// so it is written to allocate little and to make few host calls: see
// BENCHMARKS.md for what a request costs.
package filter
