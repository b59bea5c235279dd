package filter

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
	"github.com/tokentriage/tokentriage/shared/pluginconf"
	"github.com/tokentriage/tokentriage/shared/pricing"
	"github.com/tokentriage/tokentriage/shared/syncwire"
	"github.com/tokentriage/tokentriage/shared/vkey"
)

// One VM of the host polls the accountant per interval, elected by a lease
// cell; it writes what changed into shared data and then a version record.
// Every VM compares that record with its own on each request (one small
// read) and decodes a part only when its version moved.
const (
	syncLeaseKey  = "tt/sync/lease"
	syncVerKey    = "tt/sync/ver"
	syncPlanKey   = "tt/sync/plan"
	syncKeysKey   = "tt/sync/keys"
	syncRTKey     = "tt/sync/rt"
	syncSnapKey   = "tt/sync/snap"
	syncPricesKey = "tt/sync/prices"
	verFormat     = 2

	// snapshotTrust is how long a snapshot is trusted (seed 000).
	snapshotTrust = pluginconf.SnapshotTrust
)

// syncVersions is the version record in shared data.
type syncVersions struct {
	plan, keys, runtime, snapshot, prices string
	generatedAt                           time.Time
	replicas                              int
	// redis: the accountant has the fleet's shared Redis
	// (syncwire.Sync.Redis).
	redis bool
}

func (v *syncVersions) append(dst []byte) []byte {
	dst = append(dst, verFormat)
	for _, s := range [...]string{v.plan, v.keys, v.runtime, v.snapshot, v.prices} {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s)))
		dst = append(dst, s...)
	}
	var ns int64 // 0: no heartbeat time (a zero time has no UnixNano)
	if !v.generatedAt.IsZero() {
		ns = v.generatedAt.UnixNano()
	}
	dst = binary.LittleEndian.AppendUint64(dst, uint64(ns))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(v.replicas))
	if v.redis {
		dst = append(dst, 1)
	}
	return dst
}

func decodeVersions(b []byte) (syncVersions, bool) {
	var v syncVersions
	if len(b) < 1 || b[0] != verFormat {
		return v, false
	}
	p := 1
	var parts [5]string
	for i := range parts {
		if p+2 > len(b) {
			return v, false
		}
		n := int(binary.LittleEndian.Uint16(b[p:]))
		p += 2
		if p+n > len(b) {
			return v, false
		}
		parts[i] = string(b[p : p+n])
		p += n
	}
	if p+12 != len(b) && (p+13 != len(b) || b[p+12] != 1) {
		return v, false
	}
	v.redis = p+13 == len(b)
	v.plan, v.keys, v.runtime, v.snapshot, v.prices = parts[0], parts[1], parts[2], parts[3], parts[4]
	if ns := int64(binary.LittleEndian.Uint64(b[p:])); ns != 0 {
		v.generatedAt = time.Unix(0, ns).UTC()
	}
	v.replicas = int(binary.LittleEndian.Uint32(b[p+8:]))
	return v, true
}

// syncState is what this VM has loaded.
type syncState struct {
	raw      []byte // the version record as last read
	next     []byte // the version record being loaded
	loaded   syncVersions
	nextPoll time.Time
	polling  bool
	mismatch string // the accountant plan hash last reported as different
}

// refresh reloads whatever another VM (or this one) synced since the last
// look. It costs one shared-data read when nothing changed.
func (e *Engine) refresh(now time.Time) {
	if e.host.Caller == nil {
		return // no accountant: nothing is ever synced
	}
	got, _, found, err := e.host.Store.Get(syncVerKey)
	if err != nil || !found || bytes.Equal(got, e.sync.raw) {
		return
	}
	// The parts are read with further gets, which may reuse got's buffer.
	e.sync.next = append(e.sync.next[:0], got...)
	raw := e.sync.next
	v, ok := decodeVersions(raw)
	if !ok {
		return
	}
	cur := &e.sync.loaded
	complete := true
	armAgain := false
	if v.keys != cur.keys {
		if b, ok := e.part(syncKeysKey); ok {
			keys, err := decodeKeys(b)
			if err != nil {
				e.logf(LogError, "sync: decoding the key table: %v", err)
			}
			e.keys = buildKeyTable(e.cfg.Keys, keys, e.keys)
			cur.keys = v.keys
		} else {
			complete = false
		}
	}
	if v.runtime != cur.runtime {
		if b, ok := e.part(syncRTKey); ok {
			if rt, err := decodeRuntime(b); err != nil {
				e.logf(LogError, "sync: decoding the runtime plane: %v", err)
			} else {
				e.runtime = runtimeOf(rt)
				armAgain = true
			}
			cur.runtime = v.runtime
		} else {
			complete = false
		}
	}
	plan := e.plan
	if v.plan != cur.plan {
		switch {
		case e.static != nil:
			if v.plan != "" && v.plan != e.static.Hash && e.sync.mismatch != v.plan {
				e.logf(LogWarn, "sync: the accountant enforces plan %s but this filter's configuration carries plan %s; spend counters are matched by counter identity", short(v.plan), short(e.static.Hash))
				e.host.Metrics.Add(MetricPlanMismatch, 1)
				e.sync.mismatch = v.plan
			}
			cur.plan = v.plan
		default:
			if b, ok := e.part(syncPlanKey); ok {
				if p, err := compilePlan(b); err == errNoPlan && e.plan == nil {
					e.logf(LogWarn, "sync: the accountant (plan version %q) has no governance block; nothing is governed until it has one", short(v.plan))
				} else if err == errNoPlan {
					e.logf(LogWarn, "sync: the accountant (plan version %q) has no governance block now; keeping the plan in force", short(v.plan))
				} else if err != nil {
					e.logf(LogError, "sync: the accountant's plan %s does not compile here; keeping the plan in force: %v", short(v.plan), err)
				} else {
					plan = p
					armAgain = true
					e.warnProviders(p)
				}
				cur.plan = v.plan
			} else {
				complete = false
			}
		}
	}
	if armAgain && plan != nil {
		e.arm(plan, e.runtime)
	}
	if v.snapshot != cur.snapshot {
		if b, ok := e.part(syncSnapKey); ok {
			if s, err := decodeSnapshot(b, v.snapshot); err != nil {
				e.logf(LogError, "sync: %v", err)
			} else {
				e.snap = s
			}
			cur.snapshot = v.snapshot
		} else {
			complete = false
		}
	}
	if v.prices != cur.prices {
		if b, ok := e.part(syncPricesKey); ok {
			if m, err := decodePrices(b); err != nil {
				e.logf(LogError, "sync: decoding the price catalog: %v", err)
			} else {
				e.prices = m
			}
			cur.prices = v.prices
		} else {
			complete = false
		}
	}
	if e.snap != nil && v.generatedAt.After(e.snap.generatedAt) {
		e.snap.generatedAt = v.generatedAt
	}
	if v.replicas > 0 {
		e.replicas = v.replicas
	}
	e.fleetStore = v.redis
	if complete {
		e.sync.raw = append(e.sync.raw[:0], raw...)
	}
}

// part reads one synced part; a copy, since decoders may keep slices of it.
func (e *Engine) part(key string) ([]byte, bool) {
	b, _, found, err := e.host.Store.Get(key)
	return append([]byte(nil), b...), err == nil && found
}

// warnProviders logs each limit of a synced plan whose match.provider this
// filter never gives a request (its providers rules and the names it
// infers, pluginconf.ProviderNames): the accountant cannot check that, as
// it does not see the filter's plugin configuration, and the limit would
// never count. An embedded plan is refused for it at configure instead.
func (e *Engine) warnProviders(p *govern.Plan) {
	names := e.cfg.ProviderNames()
	for _, l := range p.Limits {
		if n := l.Match.Provider; n != "" && !slices.Contains(names, n) {
			e.logf(LogWarn, "sync: limit %s of the accountant's plan: match.provider %s", l.ID, pluginconf.UnknownProvider(n, names))
		}
	}
}

func compilePlan(b []byte) (*govern.Plan, error) {
	if len(bytes.TrimSpace(b)) == 0 || string(b) == "null" {
		return nil, errNoPlan
	}
	g, err := config.DecodeGovernanceJSON(b)
	if err != nil {
		return nil, err
	}
	return govern.Compile(g)
}

type planError string

func (e planError) Error() string { return string(e) }

const errNoPlan = planError("the accountant has no governance block")

// decodeKeys reads the key table part, a JSON array of syncwire.Key, with
// gjson. A missing or null field reads as its zero value (a null scope list
// stays nil: unrestricted). An entry of the wrong shape is left out rather
// than read loosely (a scope list misread as absent would widen the key);
// the error names the first one.
//
// Each entry is read in one pass over its members (decodeKey); an entry
// that pass is not sure of (a repeated or escaped member name) is read by
// the path lookups of checkShape, which decide it as before. A table of
// 100,000 keys used to take a path lookup per field and per key, tens of
// microseconds a key in the guest (see BenchmarkGrowthKeys).
func decodeKeys(b []byte) ([]syncwire.Key, error) {
	r := gjson.ParseBytes(b)
	if r.Type == gjson.Null {
		return nil, nil
	}
	if !r.IsArray() {
		return nil, shapeError("keys", "a list", r)
	}
	var keys []syncwire.Key
	var first error
	i := 0
	r.ForEach(func(_, v gjson.Result) bool {
		k, ok := decodeKey(v)
		if !ok {
			var err error
			if k, err = decodeKeySlow(v, i); err != nil {
				if first == nil {
					first = err
				}
				i++
				return true
			}
		}
		keys = append(keys, k)
		i++
		return true
	})
	return keys, first
}

// decodeKeySlow reads one entry of the key table with path lookups.
func decodeKeySlow(v gjson.Result, i int) (syncwire.Key, error) {
	if err := checkShape(v, "keys["+strconv.Itoa(i)+"]", keyShape); err != nil {
		return syncwire.Key{}, err
	}
	return syncwire.Key{
		KID:        v.Get("kid").Str,
		SHA256:     v.Get("sha256").Str,
		Owner:      v.Get("owner").Str,
		Revoked:    v.Get("revoked").Type == gjson.True,
		Name:       v.Get("name").Str,
		ExpiresAt:  v.Get("expires_at").Int(),
		PrevSHA256: v.Get("prev_sha256").Str,
		PrevUntil:  v.Get("prev_until").Int(),
		Scopes: vkey.Scopes{
			Models:           stringList(v.Get("scopes.models")),
			Providers:        stringList(v.Get("scopes.providers")),
			Endpoints:        stringList(v.Get("scopes.endpoints")),
			AllowPassthrough: v.Get("scopes.allow_passthrough").Type == gjson.True,
			Customers:        stringList(v.Get("scopes.customers")),
		},
	}, nil
}

// decodeKey reads one well-formed entry of the key table in one pass over
// its members: what decodeKeySlow reads, or ok false when the entry is of
// the wrong shape or has a member name repeated or spelt with escapes
// (decodeKeySlow then decides it).
func decodeKey(v gjson.Result) (k syncwire.Key, ok bool) {
	if !v.IsObject() {
		return k, false
	}
	ok = true
	var seen uint16
	once := func(key gjson.Result, bit uint16) bool {
		if seen&bit != 0 || len(key.Raw) != len(key.Str)+2 {
			ok = false // repeated, or spelt with escapes
			return false
		}
		seen |= bit
		return true
	}
	v.ForEach(func(key, f gjson.Result) bool {
		switch key.Str {
		case "kid", "sha256", "owner", "name", "prev_sha256":
			var bit uint16
			var dst *string
			switch key.Str {
			case "kid":
				bit, dst = 1, &k.KID
			case "sha256":
				bit, dst = 2, &k.SHA256
			case "owner":
				bit, dst = 4, &k.Owner
			case "name":
				bit, dst = 32, &k.Name
			default:
				bit, dst = 64, &k.PrevSHA256
			}
			if !once(key, bit) {
				return false
			}
			switch f.Type {
			case gjson.String:
				*dst = f.Str
			case gjson.Null:
			default:
				ok = false
			}
		case "expires_at", "prev_until":
			bit, dst := uint16(128), &k.ExpiresAt
			if key.Str == "prev_until" {
				bit, dst = 256, &k.PrevUntil
			}
			if !once(key, bit) {
				return false
			}
			switch f.Type {
			case gjson.Number:
				n, err := strconv.ParseInt(f.Raw, 10, 64)
				if err != nil {
					ok = false
				}
				*dst = n
			case gjson.Null:
			default:
				ok = false
			}
		case "revoked":
			if !once(key, 8) {
				return false
			}
			switch f.Type {
			case gjson.True:
				k.Revoked = true
			case gjson.False, gjson.Null:
			default:
				ok = false
			}
		case "scopes":
			if !once(key, 16) {
				return false
			}
			if f.Type != gjson.Null && !decodeScopes(f, &k.Scopes) {
				ok = false
			}
		default:
			if len(key.Raw) != len(key.Str)+2 {
				ok = false // an escaped name may spell one of the above
			}
		}
		return ok
	})
	return k, ok
}

// decodeScopes reads a key's scopes object in one pass; false as decodeKey.
func decodeScopes(v gjson.Result, sc *vkey.Scopes) bool {
	if !v.IsObject() {
		return false
	}
	ok := true
	var seen uint8
	v.ForEach(func(key, f gjson.Result) bool {
		if len(key.Raw) != len(key.Str)+2 {
			ok = false
			return false
		}
		var bit uint8
		var dst *[]string
		switch key.Str {
		case "models":
			bit, dst = 1, &sc.Models
		case "providers":
			bit, dst = 2, &sc.Providers
		case "endpoints":
			bit, dst = 4, &sc.Endpoints
		case "allow_passthrough":
			bit = 8
		case "customers":
			bit, dst = 16, &sc.Customers
		default:
			return true
		}
		if seen&bit != 0 {
			ok = false
			return false
		}
		seen |= bit
		if dst == nil {
			switch f.Type {
			case gjson.True:
				sc.AllowPassthrough = true
			case gjson.False, gjson.Null:
			default:
				ok = false
			}
			return ok
		}
		switch {
		case f.Type == gjson.Null:
		case f.IsArray():
			list := []string{}
			f.ForEach(func(_, e gjson.Result) bool {
				if e.Type != gjson.String {
					ok = false
					return false
				}
				list = append(list, e.Str)
				return true
			})
			*dst = list
		default:
			ok = false
		}
		return ok
	})
	return ok
}

// decodeRuntime reads the runtime plane part, a JSON syncwire.Runtime,
// with gjson; a part of the wrong shape is refused whole.
func decodeRuntime(b []byte) (syncwire.Runtime, error) {
	r := gjson.ParseBytes(b)
	if err := checkShape(r, "runtime", runtimeShape); err != nil {
		return syncwire.Runtime{}, err
	}
	rt := syncwire.Runtime{Version: r.Get("version").Str, Nodes: stringList(r.Get("nodes"))}
	for i, v := range r.Get("overrides").Array() {
		if err := checkShape(v, "runtime.overrides["+strconv.Itoa(i)+"]", overrideShape); err != nil {
			return syncwire.Runtime{}, err
		}
		n, _ := strconv.ParseInt(v.Get("amount").Raw, 10, 64)
		rt.Overrides = append(rt.Overrides, syncwire.Override{LimitID: v.Get("limit_id").Str, Node: v.Get("node").Str, Amount: n})
	}
	return rt, nil
}

// syncField is one member a synced object may carry and the kind it must
// have when present and not null: 's' string, 'b' boolean, 'i' integer
// (int64), 'o' object, 'l' list of strings, 'a' list.
type syncField struct {
	path string
	kind byte
}

var (
	keyShape      = []syncField{{"kid", 's'}, {"sha256", 's'}, {"owner", 's'}, {"revoked", 'b'}, {"name", 's'}, {"expires_at", 'i'}, {"prev_sha256", 's'}, {"prev_until", 'i'}, {"scopes", 'o'}, {"scopes.models", 'l'}, {"scopes.providers", 'l'}, {"scopes.endpoints", 'l'}, {"scopes.allow_passthrough", 'b'}, {"scopes.customers", 'l'}}
	runtimeShape  = []syncField{{"version", 's'}, {"nodes", 'l'}, {"overrides", 'a'}}
	overrideShape = []syncField{{"limit_id", 's'}, {"node", 's'}, {"amount", 'i'}}
	kindNames     = map[byte]string{'s': "a string", 'b': "true or false", 'i': "an integer", 'o': "an object", 'l': "a list of strings", 'a': "a list"}
)

// checkShape checks that v is an object whose fields have their kinds.
func checkShape(v gjson.Result, at string, fields []syncField) error {
	if !v.IsObject() {
		return shapeError(at, "an object", v)
	}
	for _, f := range fields {
		x := v.Get(f.path)
		bad := x
		ok := x.Type == gjson.Null
		switch f.kind {
		case 's':
			ok = ok || x.Type == gjson.String
		case 'b':
			ok = ok || x.Type == gjson.True || x.Type == gjson.False
		case 'i':
			_, err := strconv.ParseInt(x.Raw, 10, 64)
			ok = ok || x.Type == gjson.Number && err == nil
		case 'o':
			ok = ok || x.IsObject()
		case 'a':
			ok = ok || x.IsArray()
		case 'l':
			ok = ok || x.IsArray()
			if ok && x.IsArray() {
				x.ForEach(func(_, e gjson.Result) bool {
					if e.Type != gjson.String {
						ok, bad = false, e
					}
					return ok
				})
			}
		}
		if !ok {
			return shapeError(at+"."+f.path, kindNames[f.kind], bad)
		}
	}
	return nil
}

func shapeError(at, want string, got gjson.Result) error {
	return planError(at + ": expected " + want + ", got " + got.Type.String())
}

// stringList reads a list checkShape has checked: null or absent is nil,
// [] is empty.
func stringList(v gjson.Result) []string {
	if !v.IsArray() {
		return nil
	}
	out := []string{}
	v.ForEach(func(_, e gjson.Result) bool {
		out = append(out, e.Str)
		return true
	})
	return out
}

func runtimeOf(rt syncwire.Runtime) govern.Runtime {
	out := govern.Runtime{Nodes: rt.Nodes}
	for _, o := range rt.Overrides {
		out.Overrides = append(out.Overrides, govern.Override{LimitID: o.LimitID, Node: o.Node, Amount: o.Amount})
	}
	return out
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// poll asks the accountant for what changed, when this VM holds the sync
// lease and the interval has passed.
func (e *Engine) poll(now time.Time) {
	if e.host.Caller == nil || e.sync.polling || now.Before(e.sync.nextPoll) {
		return
	}
	e.sync.nextPoll = now.Add(e.syncEvery)
	if !e.takeSyncLease(now) {
		return
	}
	v, _ := decodeVersions(e.sync.raw)
	q := append(e.buf[:0], syncwire.SyncPath...)
	q = appendQuery(q, '?', "plan", v.plan)
	q = appendQuery(q, '&', "keys", v.keys)
	q = appendQuery(q, '&', "runtime", v.runtime)
	q = appendQuery(q, '&', "snapshot", v.snapshot)
	q = appendQuery(q, '&', "prices", v.prices)
	q = appendQuery(q, '&', "replica", e.replica)
	// The host's rows dropped on overflow, every VM's (the accountant
	// exports the count).
	q = appendQuery(q, '&', "dropped", itoa(e.bound(now).DroppedRows))
	e.buf = q
	e.sync.polling = true
	err := e.host.Caller.Call("GET", string(q), nil, nil, e.callTimeout(), func(status int, body []byte) {
		e.sync.polling = false
		t := e.host.Now()
		if status != 200 {
			e.host.Metrics.Add(MetricSyncFailed, 1)
			e.logf(LogWarn, "sync: the accountant answered %d%s; spend snapshots age until it answers", status, refusedToken(status))
			return
		}
		if err := e.applySync(body, v); err != nil {
			e.host.Metrics.Add(MetricSyncFailed, 1)
			e.logf(LogError, "sync: %v", err)
			return
		}
		e.host.Metrics.Add(MetricSyncOK, 1)
		e.refresh(t)
	})
	if err != nil {
		e.sync.polling = false
		e.host.Metrics.Add(MetricSyncFailed, 1)
		e.logf(LogWarn, "sync: calling the accountant: %v", err)
	}
}

// refusedToken explains a 401 from the accountant: it takes only callers
// with its internal token.
func refusedToken(status int) string {
	if status != 401 {
		return ""
	}
	return ": the accountant refused the internal token; set the plugin configuration's accountant.token (or token_env) to the accountant's TT_ACCOUNTANT_TOKEN"
}

// appendQuery appends sep, key, '=' and value percent-encoded (everything
// but unreserved characters).
func appendQuery(dst []byte, sep byte, key, value string) []byte {
	const hex = "0123456789ABCDEF"
	dst = append(dst, sep)
	dst = append(dst, key...)
	dst = append(dst, '=')
	for i := 0; i < len(value); i++ {
		c := value[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			dst = append(dst, c)
		} else {
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		}
	}
	return dst
}

func (e *Engine) callTimeout() time.Duration {
	if e.cfg.Accountant != nil && e.cfg.Accountant.TimeoutMS > 0 {
		return time.Duration(e.cfg.Accountant.TimeoutMS) * time.Millisecond
	}
	return 2 * time.Second
}

// takeSyncLease elects this VM to poll for one interval.
func (e *Engine) takeSyncLease(now time.Time) bool {
	v, cas, found, err := e.host.Store.Get(syncLeaseKey)
	if err != nil {
		return false
	}
	if found {
		holder, until := decodeLease(v)
		if holder != 0 && holder != e.vm && now.UnixNano() < until {
			return false
		}
	}
	until := now.Add(e.syncEvery + e.callTimeout()).UnixNano()
	ok, err := e.cells.setNew(syncLeaseKey, leaseValue(e.cells.scratch[:0], e.vm, until), cas, found)
	return err == nil && ok
}

// The sync lease cell holds the polling VM and when its lease ends:
//
//	vm u32 | until i64 unix ns
func leaseValue(dst []byte, vm uint32, until int64) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, vm)
	return binary.LittleEndian.AppendUint64(dst, uint64(until))
}

func decodeLease(b []byte) (vm uint32, until int64) {
	if len(b) != 12 {
		return 0, 0
	}
	return binary.LittleEndian.Uint32(b), int64(binary.LittleEndian.Uint64(b[4:]))
}

// applySync writes an accountant answer into shared data: each part that
// moved, then the version record that tells every VM to reload.
func (e *Engine) applySync(body []byte, sent syncVersions) error {
	if !gjson.ValidBytes(body) {
		return planError("the accountant's sync answer is not valid JSON")
	}
	r := gjson.ParseBytes(body)
	v := sent
	if p := r.Get("plan"); p.Exists() {
		v.plan = p.Get("version").String()
		if g := p.Get("governance"); g.Exists() {
			if err := e.setPart(syncPlanKey, []byte(g.Raw)); err != nil {
				return err
			}
		} else if v.plan != sent.plan {
			// A new version with no governance block: say so, or every VM
			// would wait for a part that never comes.
			if err := e.setPart(syncPlanKey, []byte("null")); err != nil {
				return err
			}
		}
	}
	if k := r.Get("keys"); k.Exists() {
		v.keys = k.Get("version").String()
		if items := k.Get("items"); items.Exists() || v.keys != sent.keys {
			raw := items.Raw
			if raw == "" {
				raw = "[]"
			}
			if err := e.setPart(syncKeysKey, []byte(raw)); err != nil {
				return err
			}
		}
	}
	if rt := r.Get("runtime"); rt.Exists() {
		v.runtime = rt.Get("version").String()
		if v.runtime != sent.runtime {
			if err := e.setPart(syncRTKey, []byte(rt.Raw)); err != nil {
				return err
			}
		}
	}
	if s := r.Get("snapshot"); s.Exists() {
		v.snapshot = s.Get("version").String()
		gen, err := time.Parse(time.RFC3339Nano, s.Get("generated_at").String())
		if err == nil {
			v.generatedAt = gen
		}
		if v.snapshot != sent.snapshot {
			b, err := encodeSnapshotPart(s, v.generatedAt)
			if err != nil {
				return err
			}
			if err := e.setPart(syncSnapKey, b); err != nil {
				return err
			}
		}
	}
	if p := r.Get("prices"); p.Exists() {
		v.prices = p.Get("version").String()
		if v.prices != sent.prices {
			raw := p.Get("models").Raw
			if raw == "" {
				raw = "{}"
			}
			if err := e.setPart(syncPricesKey, []byte(raw)); err != nil {
				return err
			}
		}
	}
	if n := r.Get("replicas").Int(); n > 0 {
		v.replicas = int(n)
	}
	v.redis = r.Get("redis").Bool()
	return e.cells.put(syncVerKey, v.append(nil))
}

func (e *Engine) setPart(key string, b []byte) error { return e.cells.put(key, b) }

func encodeSnapshotPart(s gjson.Result, generatedAt time.Time) ([]byte, error) {
	entries := s.Get("entries").Array()
	ids := make([]string, 0, len(entries))
	starts := make([]int64, 0, len(entries))
	values := make([]int64, 0, len(entries))
	for i, en := range entries {
		start, err := time.Parse(time.RFC3339Nano, en.Get("period_start").String())
		if err != nil {
			return nil, planError("snapshot entry " + strconv.Itoa(i) + ": period_start: " + err.Error())
		}
		ids = append(ids, en.Get("id").String())
		starts = append(starts, start.Unix())
		values = append(values, en.Get("value").Int())
	}
	return appendSnapshot(nil, generatedAt, s.Get("fleet").String(), ids, starts, values), nil
}

// decodePrices reads the accountant's price catalog: an object of model
// names and aliases (lowercase) to their rates in nanodollars per million
// tokens.
func decodePrices(b []byte) (map[string]pricing.Rates, error) {
	if !gjson.ValidBytes(b) {
		return nil, planError("the price catalog is not valid JSON")
	}
	r := gjson.ParseBytes(b)
	if !r.IsObject() {
		return nil, planError("the price catalog is not an object")
	}
	m := map[string]pricing.Rates{}
	var err error
	r.ForEach(func(k, v gjson.Result) bool {
		if !v.IsObject() {
			err = planError("the price of " + strconv.Quote(k.Str) + " is not an object")
			return false
		}
		r := pricing.Rates{Input: v.Get("input").Int(), Output: v.Get("output").Int(), Cached: v.Get("cached").Int()}
		if !v.Get("cached").Exists() {
			r.Cached = r.Input
		}
		m[k.Str] = r
		return true
	})
	return m, err
}
