package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/calendar"
)

// Fleet totals of the LedgerSettled counters (spend and quota). Each
// accountant folds only the rows of its own replica; the fleet's total of
// a counter in a period is the sum of every accountant's own total. So
// each accountant publishes its own totals into Redis, one hash per
// counter and period with one field per accountant, always by setting its
// field to its total, never by incrementing: a replayed row, a retried
// publish or a restart re-sends the same number, and nothing is counted
// twice. It reads the others' fields back and serves own + others in its
// snapshot.
//
//	{tt}:total:<unit>:<start>:<identity>   hash  accountant id → its total
//	{tt}:totals:<unit>:<start>             set   the identities published for the period
//	{tt}:epoch                             a value set once per data set
//
// An accountant's field only grows within its period (a publish never
// lowers it): a budget hold's release raises it with the call's cost in
// the same step as the hold leaves (ReleaseHolds), and a publish that read
// the counters just before must not take that back.
//
// Every key expires a day after its period ends. When Redis loses its data
// (a restart without persistence, a flush), the epoch disappears with it:
// the next reader sets a new one, and every accountant that sees the epoch
// change publishes all of its totals again from its own counters, which its
// ledger rebuilt. The ledgers stay the truth.

// Refresh and publish cadence. A row folded on one replica is published
// within publishEvery and read by every other accountant within
// refreshEvery, both well inside the snapshot heartbeat.
const (
	publishEvery = 100 * time.Millisecond
	refreshEvery = time.Second
	// fleetTimeout bounds a publish or a refresh (off the request path).
	fleetTimeout = 2 * time.Second
	// StaleAfter is how long the others' totals are trusted without a
	// successful refresh.
	StaleAfter   = 5 * time.Second
	keepAfterEnd = 24 * time.Hour
	// LivenessWindow is how long a replica's heartbeat counts it live
	// (the accountant's own window for the replicas that poll it).
	LivenessWindow = 30 * time.Second
)

const publishSource = `
local p, acct = ARGV[1], ARGV[2]
local i = 3
while i + 4 <= #ARGV do
  local unit, start, id, value, exp = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local h = p .. 'total:' .. unit .. ':' .. start .. ':' .. id
  local idx = p .. 'totals:' .. unit .. ':' .. start
  if value == '' then
    redis.call('HDEL', h, acct)
  else
    -- within a period an accountant's own total only grows: a publish
    -- that read its counters before a budget hold's release raised the
    -- field (ReleaseHolds) never lowers it back
    local cur = redis.call('HGET', h, acct)
    if not cur or #value > #cur or (#value == #cur and value > cur) then
      redis.call('HSET', h, acct, value)
    end
    redis.call('PEXPIREAT', h, exp)
    redis.call('SADD', idx, id)
    redis.call('PEXPIREAT', idx, exp)
  end
  i = i + 5
end
return 1
`

const totalsSource = `
local p, fresh, nowms, window, nids = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local epoch = redis.call('GET', p .. 'epoch')
if not epoch then
  redis.call('SET', p .. 'epoch', fresh)
  epoch = fresh
end
-- the replicas' heartbeats: a member per live replica, scored by when its
-- accountant last saw it
local hb = p .. 'replicas'
for i = 6, 5 + nids do
  redis.call('ZADD', hb, nowms, ARGV[i])
end
redis.call('ZREMRANGEBYSCORE', hb, '-inf', '(' .. (nowms - window))
redis.call('PEXPIRE', hb, window * 2)
local out = { epoch, redis.call('ZCARD', hb) }
for i = 6 + nids, #ARGV, 2 do
  local unit, start = ARGV[i], ARGV[i + 1]
  local ids = redis.call('SMEMBERS', p .. 'totals:' .. unit .. ':' .. start)
  for _, id in ipairs(ids) do
    out[#out + 1] = { unit, start, id, redis.call('HGETALL', p .. 'total:' .. unit .. ':' .. start .. ':' .. id) }
  end
end
return out
`

var (
	publishScript = redis.NewScript(publishSource)
	totalsScript  = redis.NewScript(totalsSource)
)

// Fleet is a store.Store whose counters are this accountant's own (a
// store.Local, rebuilt from its ledger) plus the others' totals read from
// Redis. Run publishes and refreshes in the background.
type Fleet struct {
	local *store.Local
	c     *Client
	acct  string
	now   func() time.Time

	mu     sync.Mutex
	others map[store.Key]int64 // Σ of the other accountants' totals
	// fields holds each other accountant's total of each counter as last
	// read: the highest read in its period, since a field never falls
	// within its period (a publish never lowers it). Redis losing its data
	// empties every field until its accountant publishes again; the reads
	// in between must not forget the others' spend, or every replica would
	// admit up to the budget again from what it spent itself.
	fields    map[store.Key]map[string]int64
	dirty     map[store.Key]struct{}
	full      bool                // publish every own counter
	published map[store.Key]int64 // what Redis holds of ours
	epoch     string
	lastRead  time.Time
	readErr   error
	onChange  func()
	// liveIDs names this accountant's live filter replicas (those that
	// polled it with the internal token); replicas counts the fleet's.
	liveIDs  func() []string
	replicas int
}

var _ store.Store = (*Fleet)(nil)

// NewFleet returns the fleet store of the accountant named acct (stable
// across its restarts: its totals replace themselves). onChange is called
// (from Run's goroutine) when the others' totals, or whether they can be
// trusted, change, so the snapshot is rebuilt.
func NewFleet(c *Client, acct string, now func() time.Time, onChange func()) *Fleet {
	if now == nil {
		now = time.Now
	}
	if onChange == nil {
		onChange = func() {}
	}
	f := &Fleet{
		local: store.NewLocal(), c: c, acct: acct, now: now,
		others: map[store.Key]int64{}, fields: map[store.Key]map[string]int64{}, dirty: map[store.Key]struct{}{},
		published: map[store.Key]int64{}, full: true, onChange: onChange,
	}
	c.OnUp(func() {
		f.mu.Lock()
		f.full = true // Redis may have lost what we published
		f.mu.Unlock()
	})
	return f
}

// Add implements store.Store: the batch goes to this accountant's own
// counters at once (the ledger made it durable) and is published next; the
// values returned are the fleet's as this accountant knows them.
func (f *Fleet) Add(ctx context.Context, deltas []store.Delta, out []int64) ([]int64, error) {
	base := len(out)
	out, err := f.local.Add(ctx, deltas, out)
	if err != nil {
		return out, err
	}
	f.mu.Lock()
	for i, d := range deltas {
		f.dirty[d.Key] = struct{}{}
		out[base+i] = addSat(out[base+i], f.others[d.Key])
	}
	f.mu.Unlock()
	return out, nil
}

// Current implements store.Store: own plus others, for the current periods.
func (f *Fleet) Current(ctx context.Context, now time.Time) ([]store.Counter, error) {
	own, err := f.local.Current(ctx, now)
	if err != nil {
		return nil, err
	}
	starts := currentStarts(now)
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := make(map[store.Key]bool, len(own))
	for i := range own {
		k := own[i].Key
		seen[k] = true
		own[i].Value = addSat(own[i].Value, f.others[k])
	}
	for k, v := range f.others {
		if !seen[k] && v != 0 && int(k.Unit) < len(starts) && starts[k.Unit] == k.Start {
			own = append(own, store.Counter{Key: k, Value: v})
		}
	}
	return own, nil
}

// Replace implements store.Store: the own counters are rebuilt, and all of
// them are published again.
func (f *Fleet) Replace(ctx context.Context, counters []store.Counter) error {
	if err := f.local.Replace(ctx, counters); err != nil {
		return err
	}
	f.mu.Lock()
	f.full = true
	f.mu.Unlock()
	return nil
}

// Expire implements store.Store.
func (f *Fleet) Expire(ctx context.Context, t time.Time) error {
	if err := f.local.Expire(ctx, t); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range []map[store.Key]int64{f.others, f.published} {
		for k := range m {
			if !calendar.End(k.Unit, k.PeriodStart()).After(t) {
				delete(m, k)
			}
		}
	}
	for k := range f.dirty {
		if !calendar.End(k.Unit, k.PeriodStart()).After(t) {
			delete(f.dirty, k)
		}
	}
	for k := range f.fields {
		if !calendar.End(k.Unit, k.PeriodStart()).After(t) {
			delete(f.fields, k)
		}
	}
	return nil
}

// CountReplicas makes the fleet store heartbeat this accountant's live
// replicas, named by ids, into Redis at every refresh, and count the
// fleet's (store: share divides by it).
func (f *Fleet) CountReplicas(ids func() []string) {
	f.mu.Lock()
	f.liveIDs = ids
	f.mu.Unlock()
}

// Replicas is the fleet's live replica count as last read from Redis (the
// heartbeats of every accountant's authenticated replicas within
// LivenessWindow), 0 before the first read.
func (f *Fleet) Replicas() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.replicas
}

// Stale says why the others' totals cannot be trusted now (Redis down, or
// no successful read for StaleAfter), or "" when they can.
func (f *Fleet) Stale() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.staleLocked(f.now())
}

func (f *Fleet) staleLocked(now time.Time) string {
	if f.lastRead.IsZero() {
		if f.readErr != nil {
			return "the other replicas' spend has not been read from the shared Redis yet: " + f.readErr.Error()
		}
		return "the other replicas' spend has not been read from the shared Redis yet"
	}
	if age := now.Sub(f.lastRead); age > StaleAfter {
		why := "unreachable"
		if f.readErr != nil {
			why = f.readErr.Error()
		}
		return fmt.Sprintf("the other replicas' spend is %s old: the shared Redis could not be read (%s)", age.Round(time.Second), why)
	}
	return ""
}

// Run publishes and refreshes until ctx ends.
func (f *Fleet) Run(ctx context.Context) {
	pub := time.NewTicker(publishEvery)
	defer pub.Stop()
	var nextRead time.Time
	wasStale := f.Stale()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pub.C:
		}
		f.publish(ctx)
		if now := f.now(); !now.Before(nextRead) {
			nextRead = now.Add(refreshEvery)
			changed := f.refresh(ctx)
			stale := f.Stale()
			if changed || (stale == "") != (wasStale == "") {
				f.onChange()
			}
			wasStale = stale
		}
	}
}

// Publish sends what changed at once (tests; Run does it on its tick).
func (f *Fleet) Publish(ctx context.Context) error { return f.publish(ctx) }

// Refresh reads the others' totals at once (tests; Run does it on its
// tick) and reports whether they changed.
func (f *Fleet) Refresh(ctx context.Context) bool { return f.refresh(ctx) }

func (f *Fleet) publish(ctx context.Context) error {
	now := f.now()
	f.mu.Lock()
	full := f.full
	var keys []store.Key
	if !full {
		if len(f.dirty) == 0 {
			f.mu.Unlock()
			return nil
		}
		keys = make([]store.Key, 0, len(f.dirty))
		for k := range f.dirty {
			keys = append(keys, k)
		}
	}
	f.full = false
	clear(f.dirty)
	f.mu.Unlock()

	own, err := f.local.Current(ctx, now)
	if err != nil {
		return err
	}
	values := make(map[store.Key]int64, len(own))
	for _, c := range own {
		values[c.Key] = c.Value
	}
	f.mu.Lock()
	if full {
		keys = keys[:0]
		for k := range values {
			keys = append(keys, k)
		}
		for k := range f.published {
			if _, ok := values[k]; !ok {
				keys = append(keys, k) // no longer ours: take our field out
			}
		}
	}
	f.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	args := make([]any, 0, 2+5*len(keys))
	args = append(args, f.c.prefix, f.acct)
	for _, k := range keys {
		v, ok := values[k]
		val := ""
		if ok {
			val = strconv.FormatInt(v, 10)
		}
		exp := calendar.End(k.Unit, k.PeriodStart()).Add(keepAfterEnd).UnixMilli()
		args = append(args, k.Unit.String(), strconv.FormatInt(k.Start, 10), k.ID, val, strconv.FormatInt(exp, 10))
	}
	err = f.c.do(ctx, "publish_totals", fleetTimeout, func(ctx context.Context) error {
		return publishScript.Run(ctx, f.c.rdb, nil, args...).Err()
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		// Send them again next time: a set is idempotent.
		if full {
			f.full = true
		}
		for _, k := range keys {
			f.dirty[k] = struct{}{}
		}
		return err
	}
	for _, k := range keys {
		if v, ok := values[k]; ok {
			f.published[k] = v
		} else {
			delete(f.published, k)
		}
	}
	return nil
}

func (f *Fleet) refresh(ctx context.Context) bool {
	now := f.now()
	starts := currentStarts(now)
	f.mu.Lock()
	liveIDs := f.liveIDs
	f.mu.Unlock()
	var ids []string
	if liveIDs != nil {
		ids = liveIDs() // outside f.mu: it takes the server's lock
	}
	args := []any{f.c.prefix, newEpoch(), strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(LivenessWindow.Milliseconds(), 10), strconv.Itoa(len(ids))}
	for _, id := range ids {
		args = append(args, id)
	}
	for _, u := range []calendar.Unit{calendar.Day, calendar.Week, calendar.Month} {
		args = append(args, u.String(), strconv.FormatInt(starts[u], 10))
	}
	var reply any
	err := f.c.do(ctx, "read_totals", fleetTimeout, func(ctx context.Context) error {
		var err error
		reply, err = totalsScript.Run(ctx, f.c.rdb, nil, args...).Result()
		return err
	})
	var epoch string
	var replicas int
	read := map[store.Key]map[string]int64{}
	if err == nil {
		epoch, replicas, err = f.parseTotals(reply, read)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.readErr = err
		return false
	}
	f.readErr = nil
	f.lastRead = now
	changedReplicas := replicas != f.replicas
	f.replicas = replicas
	if epoch != f.epoch {
		// A new data set (Redis lost its data, or this is the first
		// read): everything we published may be gone.
		f.epoch = epoch
		f.full = true
		clear(f.published)
	}
	changed := false
	for k, accts := range read {
		known := f.fields[k]
		if known == nil {
			known = make(map[string]int64, len(accts))
			f.fields[k] = known
		}
		raised := false
		for acct, v := range accts {
			if cur, ok := known[acct]; !ok || v > cur {
				known[acct] = v
				raised = true
			}
		}
		if !raised {
			continue
		}
		sum := int64(0)
		for _, v := range known {
			sum = addSat(sum, v)
		}
		if f.others[k] != sum {
			f.others[k] = sum
			changed = true
		}
	}
	return changed || changedReplicas
}

// parseTotals reads the totals script's answer into fields: per counter,
// every accountant's field but this one's.
func (f *Fleet) parseTotals(reply any, fields map[store.Key]map[string]int64) (string, int, error) {
	rows, ok := reply.([]any)
	if !ok || len(rows) < 2 {
		return "", 0, fmt.Errorf("redis: the totals script answered %T", reply)
	}
	epoch, _ := rows[0].(string)
	replicas, _ := rows[1].(int64)
	for _, r := range rows[2:] {
		row, ok := r.([]any)
		if !ok || len(row) != 4 {
			return "", 0, fmt.Errorf("redis: a totals row is %v", r)
		}
		unitName, _ := row[0].(string)
		startS, _ := row[1].(string)
		id, _ := row[2].(string)
		hash, _ := row[3].([]any)
		unit, ok := calendar.ParseUnit(unitName)
		start, err := strconv.ParseInt(startS, 10, 64)
		if !ok || err != nil {
			return "", 0, fmt.Errorf("redis: a totals row names period %q %q", unitName, startS)
		}
		k := store.Key{ID: id, Unit: unit, Start: start}
		for i := 0; i+1 < len(hash); i += 2 {
			acct, _ := hash[i].(string)
			if acct == f.acct {
				continue
			}
			vs, _ := hash[i+1].(string)
			v, err := strconv.ParseInt(vs, 10, 64)
			if err != nil || v <= 0 {
				continue // nothing counted, or not a total any accountant writes
			}
			if fields[k] == nil {
				fields[k] = map[string]int64{}
			}
			fields[k][acct] = v
		}
	}
	return epoch, int(replicas), nil
}

func newEpoch() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// currentStarts returns the start of the period containing now for each
// calendar unit, indexed by unit.
func currentStarts(now time.Time) [calendar.Month + 1]int64 {
	var s [calendar.Month + 1]int64
	for _, u := range []calendar.Unit{calendar.Day, calendar.Week, calendar.Month} {
		s[u] = calendar.Start(u, now).Unix()
	}
	return s
}

// addSat is a + b saturating at the int64 bounds.
func addSat(a, b int64) int64 {
	if s := a + b; (s > a) == (b > 0) {
		return s
	}
	if b > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}

// ReleaseHolds releases the budget holds of calls whose rows this
// accountant just recorded (each hold once, by request id) and, in the
// same script, raises this accountant's published total of each held
// counter to its own total, which counts the call now, so the fleet never
// sees the call's cost in neither (see Client.ReleaseHolds). The own
// totals are read here; the caller leaves Own unset.
func (f *Fleet) ReleaseHolds(ctx context.Context, rels []HoldRelease, timeout time.Duration) (int, error) {
	for i := range rels {
		v, ok := f.local.Value(store.Key{ID: rels[i].ID, Unit: rels[i].Unit, Start: rels[i].Start})
		rels[i].Own = -1
		if ok {
			rels[i].Own = v
		}
	}
	return f.c.ReleaseHolds(ctx, f.acct, rels, timeout)
}
