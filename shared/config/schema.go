package config

// File is a tokentriage configuration file: the YAML an operator writes, or
// the same document as JSON. Its one top-level key is governance.
type File struct {
	Governance *Governance `json:"governance"`
}

// Governance is the governance block of seeds 002 and 004. The filter's
// plugin configuration may embed the same block as JSON.
type Governance struct {
	// Enabled arms governance. Default false; an absent block is off.
	Enabled *bool `json:"enabled"`
	// RequireKey refuses requests without a valid virtual key (401). Off:
	// anonymous traffic resolves to the chain [__global].
	RequireKey bool `json:"require_key"`
	// Keys holds key-related switches.
	Keys *Keys `json:"keys"`
	// Tenants is the declarative plane of the tenancy tree.
	Tenants []Tenant `json:"tenants"`
	// Limits are the limit definitions, pinned or level templates.
	Limits []Limit `json:"limits"`
	// SharedState configures fleet-wide stores.
	SharedState *SharedState `json:"shared_state"`
	// Refusals shapes the bodies of the gateway's own answers.
	Refusals *Refusals `json:"refusals,omitempty"`
	// Attributes says where a request's customer and tags are read.
	Attributes *Attributes `json:"attributes,omitempty"`
	// Timezone is the IANA zone (Europe/Berlin) of every calendar period
	// whose limit names none; default UTC.
	Timezone string `json:"timezone,omitempty"`
}

// Attributes holds governance.attributes: the request headers and body
// fields a request's customer and tags come from.
type Attributes struct {
	// CustomerHeader is the header naming the request's customer. Default
	// X-Tt-Customer.
	CustomerHeader string `json:"customer_header,omitempty"`
	// TagsHeader is the header listing the request's tags, comma
	// separated. Default X-Tt-Tags.
	TagsHeader string `json:"tags_header,omitempty"`
	// CustomerFields are the body fields read, in order, when no header
	// names the customer: dotted paths of string members. Default user,
	// safety_identifier, metadata.user_id; an empty list reads none.
	CustomerFields *[]string `json:"customer_fields,omitempty"`
	// TagsFields are the body fields read, in order, when no header lists
	// tags: a string (comma separated) or a list of strings. Default none.
	TagsFields []string `json:"tags_fields,omitempty"`
}

// Refusals holds governance.refusals.
type Refusals struct {
	// Shape is the body of a refusal on OpenAI paths: "tokentriage"
	// (default; seed 000's {"error":{"type":…,"message":…,…}}) or
	// "provider" (the same with OpenAI's param and code members). Anthropic
	// endpoints always answer in Anthropic's envelope.
	Shape string `json:"shape"`
}

// Keys holds governance.keys.
type Keys struct {
	// DiscloseLimits adds Ratelimit-Policy and X-Ratelimit-* headers to
	// served responses. Default true.
	DiscloseLimits *bool `json:"disclose_limits"`
}

// Tenant declares one org with its teams and the users of each team.
type Tenant struct {
	Org   string              `json:"org"`
	Teams []string            `json:"teams"`
	Users map[string][]string `json:"users"`
}

// Limit is one entry of governance.limits.
type Limit struct {
	// ID names the limit on every 429 and ledger row; charset [a-z0-9_].
	ID string `json:"id"`
	// Attach pins the limit to a node or templates it at a level.
	Attach Attach `json:"attach"`
	// Type is one of budget_usd, quota_tokens, quota_requests, rpm, tpm,
	// concurrency.
	Type string `json:"type"`
	// Amount is the cap for every type but budget_usd (a count).
	Amount *int64 `json:"amount"`
	// AmountUSD is the cap of a budget_usd limit, in dollars, quantized to
	// the nanodollar grid.
	AmountUSD *USD `json:"amount_usd"`
	// Period is day | week | month for spend and quota types, a Go
	// duration (1s, 1m) for rpm and tpm.
	Period string `json:"period"`
	// Burst is how many units a drained rate key absorbs at once. Default
	// Amount.
	Burst *int64 `json:"burst"`
	// Algorithm is gcra (default), fixed_window, sliding_window or
	// token_bucket; rate types only.
	Algorithm string `json:"algorithm"`
	// Store is local (default), redis or share.
	Store string `json:"store"`
	// Match narrows which requests the limit counts.
	Match *Match `json:"match"`
	// Posture sets mode, enforcement, failure behaviour and alert
	// thresholds. Absent: on, hard, open.
	Posture *Posture `json:"posture"`
	// Override permits per-node overrides (spend and quota types only).
	Override *Override `json:"override"`
	// Reserve (budget_usd only) turns on reserve mode: admission reserves
	// the dearest cost the call can reach, lowering its output maximum to
	// fit what is left, so the cap holds within one gateway replica.
	Reserve bool `json:"reserve,omitempty"`
	// Fit (tpm, quota_tokens; budget_usd with reserve) lowers a call's
	// output maximum to what the window or period still holds instead of
	// refusing it; MinOutput is the least output a call is let through
	// with (default 256).
	Fit       bool   `json:"fit,omitempty"`
	MinOutput *int64 `json:"min_output,omitempty"`
	// Metric (tpm, quota_tokens) is what a token counts: input, output or
	// total (the default).
	Metric string `json:"metric,omitempty"`
	// Timezone is the IANA zone of a calendar period's boundaries; default
	// governance.timezone, else UTC.
	Timezone string `json:"timezone,omitempty"`
	// Fallback (budget_usd, quota_tokens, quota_requests) serves a request
	// the limit would refuse with another model instead.
	Fallback *Fallback `json:"fallback,omitempty"`
	// MaxDistinct bounds the counters a limit keeps per instance and
	// period for its per-value dims (a model, customer or tag pattern):
	// past it, new values share one overflow counter.
	MaxDistinct *int64 `json:"max_distinct,omitempty"`
}

// Fallback is the model a limit's refusal falls back to.
type Fallback struct {
	Model string `json:"model"`
}

// Attach says where a limit binds: exactly one of Node and Level.
type Attach struct {
	Node  string `json:"node"`
	Level string `json:"level"`
}

// Match narrows a limit to requests whose dims match. Model, customer and
// tag use path.Match patterns; provider and endpoint are compared exactly.
type Match struct {
	Model    string `json:"model"`
	Provider string `json:"provider"`
	Endpoint string `json:"endpoint"`
	// Customer is the request's customer (X-Tt-Customer, or the body's
	// user fields): "*" keeps one counter per customer.
	Customer string `json:"customer,omitempty"`
	// Tag is one of the request's tags (X-Tt-Tags): the limit counts the
	// requests that carry a matching tag.
	Tag string `json:"tag,omitempty"`
}

// Posture is a limit's enforcement posture.
type Posture struct {
	Mode       string    `json:"mode"`       // on | shadow | off; default on
	Enforce    string    `json:"enforce"`    // hard | soft; default hard
	Fail       string    `json:"fail"`       // open | closed; default open
	Thresholds []float64 `json:"thresholds"` // alert fractions in [0,1]
}

// Override is a template's permission for per-node overrides and their
// ceiling. Omitting the ceiling while allowing overrides declares none.
type Override struct {
	Allow        bool   `json:"allow"`
	MaxAmount    *int64 `json:"max_amount"`
	MaxAmountUSD *USD   `json:"max_amount_usd"`
}

// SharedState configures the stores shared by a fleet.
type SharedState struct {
	Redis *Redis `json:"redis"`
}

// Redis is the shared Redis used by store: redis limits and the accountant:
// one server (addr), a Redis Cluster (cluster, with addrs or addr as
// seeds), or a master behind Sentinel (sentinel_master, with the
// Sentinels in addrs), over TLS where wanted (tls, or a rediss:// addr).
type Redis struct {
	// Addr is host:port of the Redis server (or a seed of a cluster), or a
	// redis:// or rediss:// URL.
	Addr string `json:"addr"`
	// Addrs are the seeds of a Redis Cluster (cluster: true) or the
	// Sentinels (sentinel_master), host:port each.
	Addrs []string `json:"addrs,omitempty"`
	// Cluster: the addresses are nodes of a Redis Cluster.
	Cluster bool `json:"cluster,omitempty"`
	// SentinelMaster is the name of the master the Sentinels in addrs
	// watch; SentinelUsername and SentinelPasswordEnv authenticate to
	// them.
	SentinelMaster      string `json:"sentinel_master,omitempty"`
	SentinelUsername    string `json:"sentinel_username,omitempty"`
	SentinelPasswordEnv string `json:"sentinel_password_env,omitempty"`
	// Username is the ACL user.
	Username string `json:"username"`
	// PasswordEnv names the environment variable holding the password.
	PasswordEnv string `json:"password_env"`
	DB          int    `json:"db"`
	// TLS connects over TLS; TLSCAFile names the CA bundle that signs the
	// server's certificate (default: the system's), TLSCertFile and
	// TLSKeyFile a client certificate, TLSServerName the name to check
	// the server's certificate against (default: the host).
	TLS           bool   `json:"tls,omitempty"`
	TLSCAFile     string `json:"tls_ca_file,omitempty"`
	TLSCertFile   string `json:"tls_cert_file,omitempty"`
	TLSKeyFile    string `json:"tls_key_file,omitempty"`
	TLSServerName string `json:"tls_server_name,omitempty"`
	// KeyPrefix prefixes every key; default "tt".
	KeyPrefix string `json:"key_prefix"`
	// Timeout is the deadline of one Redis decision on the request path
	// (a Go duration), from the filter's question to the accountant's
	// answer; past it the local limiter answers and discloses suspended.
	// Default "5ms" (seed 000).
	Timeout string `json:"timeout"`
}

// USD is a dollar amount held exactly on the nanodollar grid
// (1 USD = 1e9 nanodollars). It decodes from a JSON or YAML number written
// in decimal ("0.000001", "1000", "12.5") without passing through a float.
type USD struct {
	Nanos int64
}
