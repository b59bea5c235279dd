// Package wire owns the bytes tokentriage puts on the wire toward clients
// and operators: the 429 of every limit breach (body, headers and the
// enforcement block of seeds 000 and 002, field order included), the
// refusals that are not limit breaches (401, 403, 400, 413, 503, 404, 405),
// the disclosure headers of a served response, the GET /tt/v1/me document,
// the GET /tt/api/v1/governance/limits document, USD amounts rendered from
// nanodollars, and request ids.
//
// Everything is plain values and hand-written appenders: no reflection, and
// the refusal path appends into a caller's buffer. The package is pure (no
// clock, no I/O) and builds for wasip1.
package wire
