// Package wasmtest owns the embedded proxy-wasm host: an Envoy-faithful
// implementation of the proxy-wasm ABI v0.2.1 on wazero that loads a built
// filter module (a Go wasip1 reactor), runs it in several worker VMs that
// share one shared-data store, and serves HTTP through it as a reverse proxy.
//
// The same Host is what tests drive (Do, a ManualClock, SharedData, Metric,
// Logs, Counts) and what `tokentriage dev` serves (ServeHTTP, RealClock, a
// real upstream). shared/proxy-wasm.md is the fact sheet it follows;
// RATIONALE.md says where and why it departs from Envoy.
//
// # Lifecycle
//
// New compiles the module once and, like Envoy, starts a canary VM that runs
// _initialize, proxy_on_context_create(1, 0), proxy_on_vm_start and
// proxy_on_configure and is then discarded; a false from either fails New
// with the plugin's last warning or error lines. Each worker VM then does the
// same and serves. Close resets in-flight streams and gives every root context
// proxy_on_done, then proxy_on_delete.
//
// # What a filter author must know
//
//   - _initialize runs with host calls restricted to proxy_log and a few WASI
//     calls; any other proxy_* call traps with "restricted_callback", so Go
//     init() must not call the host. The guest allocator runs restricted the
//     same way (proxy_log, fd_write, clock_time_get only).
//   - Request headers are reachable in proxy_on_request_headers and, if that
//     callback paused, until the stream continues; after Continue they are
//     gone, in the request body callbacks as in the response ones (a value
//     read is BAD_ARGUMENT, the pairs are empty). Response headers likewise.
//     In proxy_on_log the request and response headers are readable again,
//     and nothing is writable. Cache what later callbacks need.
//   - After Pause in a body callback the next body callback reports the total
//     buffered, and proxy_get_buffer_bytes returns all of it; Continue passes
//     each chunk as it comes. A body of unknown length ends with an empty body
//     callback carrying end_of_stream. Buffering past Config.BufferLimit
//     (1 MiB by default, Envoy's) is a 413 for a request, a 500 for a
//     response.
//   - proxy_continue_stream, proxy_close_stream and proxy_send_local_response
//     act after the current callback returns. A callback that sent a local
//     reply counts as Pause whatever it returned; a second local reply is
//     BAD_ARGUMENT. A local reply sent before the response began runs this
//     filter's own response callbacks; sent later, it replaces the response
//     without them, or resets the stream once bytes reached the client.
//   - HTTP callouts go to Config.Clusters by name and need :method, :path and
//     :authority to be present (an empty value is accepted and sent, as
//     Envoy does). Their answer comes to proxy_on_http_call_response on the
//     root context when the VM is free, never inside the callback that made
//     the call; a failure is (0, 0, 0) with proxy_get_status (11, "reset"); a
//     timeout, on the host's Clock, is a 504 "upstream request timeout".
//   - A trap fails the VM. With FailOpen false the stream and every later
//     stream on that VM are answered 503 (details wasm_fail_stream), streams
//     paused on it included; with FailOpen true they pass through unfiltered.
//     Nothing is called on a failed VM again (ReloadOnFailure replaces it). A
//     Go panic does not print its value under Envoy's WASI (see RATIONALE.md):
//     log before you trap.
//   - Shared data follows Envoy's CAS rules: a set with CAS 0 is
//     unconditional, and a set of a missing key succeeds whatever its CAS. To
//     create a key exactly once when racing other VMs, set it with a non-zero
//     CAS that no key has (a get that found nothing returns CAS 0).
//   - Every request carries x-request-id (request.id); one is made up when
//     the client sent none.
//   - Config.Routes is a route table: the first route whose path prefix and
//     header matches (exact, prefix, a regular expression matched whole as
//     Envoy's safe_regex, present or absent) fit picks the cluster, and
//     answers xds.route_name and
//     xds.route_metadata (a filter reads its per-route settings at
//     xds.route_metadata.filter_metadata['envoy.filters.http.wasm'].<key>,
//     Struct values serialized as Envoy does: strings raw, numbers as 8-byte
//     doubles, bools as one byte, objects and lists in the pair format, the
//     whole Metadata message as protobuf). As in Envoy the route is chosen
//     before the filter runs and kept: a filter that changes a header the
//     routes match on calls the foreign function clear_route_cache.
//   - Config.Properties are keyed by path written as Envoy's attribute docs
//     write it, segments joined by dots and a segment that holds a dot as a
//     quoted key in brackets (shared/propertypath).
//   - Foreign functions: clear_route_cache, compress and uncompress (zlib)
//     are registered, as Envoy registers them. Envoy's declare_property,
//     set_envoy_filter_state, sign, verify_signature and expr_* are not:
//     they answer NOT_FOUND, as in a host that lacks them (foreign.go).
//   - The upstream request opens when the request headers leave the filter,
//     as Envoy's router opens it, with the content-length the filter left in
//     them (chunked without one): a filter that changes the body must remove
//     content-length at the headers, or hold them. A local reply sent from a
//     body callback resets an upstream request that has begun
//     (Response.Upstream says whether a request went upstream). With
//     Config.AllowOnHeadersStopIteration (Envoy's
//     allow_on_headers_stop_iteration), a Pause at the headers holds them,
//     still writable, while the body keeps reaching the filter; without it a
//     Pause holds the body back too. A response the filter buffers and
//     rewrites gets its exact Content-Length; a filter that changes a
//     streamed response body must remove content-length in
//     proxy_on_response_headers.
package wasmtest
