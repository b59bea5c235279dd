// Package wasmtest owns the embedded proxy-wasm host: an Envoy-faithful
// implementation of the proxy-wasm ABI v0.2.1 on wazero that loads a built
// filter module (a Go wasip1 reactor), runs it in several worker VMs that
// share one shared-data store, and serves HTTP through it as a reverse proxy.
//
// The same Host is what tests drive (Do, a ManualClock, SharedData, Metric,
// Logs) and what `tokentriage dev` serves (ServeHTTP, the real clock, a real
// upstream). Where Envoy's behaviour is surprising, the host reproduces it and
// says so; shared/proxy-wasm.md is the fact sheet this package follows and
// RATIONALE.md explains the choices that are this package's own.
//
// What a filter author must know, in short:
//   - _initialize runs with host calls restricted to proxy_log and WASI; any
//     other proxy_* call traps with "restricted_callback". The guest allocator
//     runs restricted the same way (proxy_log, fd_write, clock_time_get).
//   - Request headers are readable only in proxy_on_request_headers and, after
//     that callback returned Pause, until the stream continues; response
//     headers likewise. Cache what later callbacks need.
//   - After Pause in a body callback the next body callback reports the total
//     buffered size, and get_buffer_bytes returns all of it.
//   - proxy_continue_stream and proxy_send_local_response take effect after the
//     current callback returns. A local reply sent before the response started
//     runs this filter's own response callbacks.
//   - HTTP callouts are delivered to the root context, never inside the
//     calling callback; a failure is (0,0,0) with proxy_get_status code 11 and a
//     timeout is a 504.
//   - A trap fails the VM: with FailOpen false every stream on it is answered
//     503 (details wasm_fail_stream); with FailOpen true streams pass through
//     unfiltered. Nothing is called on a failed VM again.
package wasmtest
