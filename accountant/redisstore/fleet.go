package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokentriage/tokentriage/accountant/store"
	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/sat"
	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// Fleet totals of the LedgerSettled counters (spend and quota). Each
// accountant folds only the rows of its own replicas; the fleet's total of
// a counter in a period is the sum of every accountant's own total. So
// each accountant publishes its own totals into Redis, one hash per
// counter and period with one field per accountant, always by setting its
// field to its total, never by incrementing: a replayed row, a retried
// publish or a restart re-sends the same number, and nothing is counted
// twice. It reads the others' fields back and serves own + others in its
// snapshot.
//
//	<p>:{<identity>}:total:<unit>:<start>    hash  accountant id -> its total
//	<p>:{<identity>}:lease:<unit>:<start>    hash  s:<replica> -> that replica's spend (reserve mode)
//	<p>:{<p>}:totals:<unit>:<start>          set   the identities published for the period
//	<p>:{<p>}:epoch                          a value set once per data set
//
// A reserve-mode counter's leases (lease.lua) need each replica's own
// spend beside what it was granted, so the accountant publishes, in the
// same script as its total, its replicas' companion counters
// (syncwire.ReplicaSuffix) into the lease hash: a call's cost moves from
// the replica's lease to the accountant's total in one step. An
// accountant's field, and a replica's, only grows within its period (a
// publish never lowers it).
//
// Every key expires a day after its period ends. When Redis loses its data
// (a restart without persistence, a flush), the epoch disappears with it:
// the next reader sets a new one, and every accountant that sees the epoch
// change publishes all of its totals again from its own counters, which its
// ledger rebuilt; the replicas count their leases again (Lease,
// LeaseRestore) from what they hold. Until every accountant has had the
// time to do so (RebuildGrace), the leases it grants answer as rebuilding
// and each replica decides within its own share. The ledgers stay the
// truth.

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
	// RebuildGrace is how long after Redis lost its data (a new epoch
	// replaced one an accountant knew) every accountant has seen it and
	// published its totals again (refreshEvery and publishEvery), and
	// every replica has counted its leases again (its lease renewal, once
	// a second), with a margin for a busy machine.
	RebuildGrace = 3 * time.Second
)

// publishSource sets an accountant's own totals of one counter (and its
// companions) and its replicas' spend in the counter's lease hash, each
// only upward.
//
//	KEYS   the counter's lease hash, then its total hashes
//	ARGV   accountant id, expiry (unix ms), one total per total hash ("":
//	       drop the field), then pairs: replica, its spend
const publishSource = `
local acct, exp = ARGV[1], ARGV[2]
local function grows(cur, v)
  return not cur or #v > #cur or (#v == #cur and v > cur)
end
for i = 2, #KEYS do
  local v = ARGV[1 + i]
  if v == '' then
    redis.call('HDEL', KEYS[i], acct)
  else
    if grows(redis.call('HGET', KEYS[i], acct), v) then
      redis.call('HSET', KEYS[i], acct, v)
    end
    redis.call('PEXPIREAT', KEYS[i], exp)
  end
end
for j = #KEYS + 2, #ARGV, 2 do
  local f, v = 's:' .. ARGV[j], ARGV[j + 1]
  if grows(redis.call('HGET', KEYS[1], f), v) then
    redis.call('HSET', KEYS[1], f, v)
    redis.call('PEXPIREAT', KEYS[1], exp)
  end
end
return 1
`

var publishScript = redis.NewScript(publishSource)

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
	// rebuildUntil: Redis lost its data (a new epoch replaced the one this
	// accountant knew) and the fleet's leases are being counted again
	// until then (RebuildGrace); lease grants answer as rebuilding.
	rebuildUntil time.Time
	// onEpoch is told each epoch adopted (the accountant keeps it in its
	// data directory, so a restart knows the data set it last saw).
	onEpoch  func(string)
	lastRead time.Time
	readErr  error
	onChange func()
	// liveIDs names this accountant's live filter replicas (those that
	// polled it with the internal token); replicas counts the fleet's.
	liveIDs  func() []string
	replicas int
	// periods are the plan's periods beyond the UTC day, week and month
	// (store.Periods), whose totals the refresh reads too.
	periods []store.Key
}

var _ store.Periods = (*Fleet)(nil)

// SetPeriods implements store.Periods.
func (f *Fleet) SetPeriods(periods []store.Key) {
	f.mu.Lock()
	f.periods = append(f.periods[:0], periods...)
	f.mu.Unlock()
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
		out[base+i] = sat.Add(out[base+i], f.others[d.Key])
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
		own[i].Value = sat.Add(own[i].Value, f.others[k])
	}
	for k, v := range f.others {
		if !seen[k] && v != 0 && k.IsCurrent(now, starts) {
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
			if !k.PeriodEnd().After(t) {
				delete(m, k)
			}
		}
	}
	for k := range f.dirty {
		if !k.PeriodEnd().After(t) {
			delete(f.dirty, k)
		}
	}
	for k := range f.fields {
		if !k.PeriodEnd().After(t) {
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
	calls := f.publishCalls(keys, values)
	err = f.c.do(ctx, "publish_totals", fleetTimeout, func(ctx context.Context) error {
		cmds, err := f.c.runPipelined(ctx, calls)
		if err != nil {
			return err
		}
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil {
				return e
			}
		}
		return nil
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

// publishCalls groups the counters keys by the counter they belong to (a
// companion belongs to its counter) and period: one publish script per
// group, whose keys share a slot, and the period's index beside it.
func (f *Fleet) publishCalls(keys []store.Key, values map[store.Key]int64) []scriptCall {
	type group struct {
		base  string
		unit  string // store.Key.UnitName
		start int64
		end   time.Time
	}
	type parts struct {
		totals   []store.Key
		replicas []store.Key
	}
	groups := map[group]*parts{}
	var order []group
	for _, k := range keys {
		base, _, _ := strings.Cut(k.ID, "#")
		g := group{base, k.UnitName(), k.Start, k.PeriodEnd()}
		p := groups[g]
		if p == nil {
			p = &parts{}
			groups[g] = p
			order = append(order, g)
		}
		if strings.Contains(k.ID, syncwire.ReplicaSuffix) {
			p.replicas = append(p.replicas, k)
		} else {
			p.totals = append(p.totals, k)
		}
	}
	calls := make([]scriptCall, 0, 2*len(order))
	for _, g := range order {
		p := groups[g]
		exp := strconv.FormatInt(g.end.Add(keepAfterEnd).UnixMilli(), 10)
		keys := []string{f.c.periodKey(g.base, "lease", g.unit, g.start)}
		args := []any{f.acct, exp}
		for _, k := range p.totals {
			keys = append(keys, f.c.periodKey(k.ID, "total", g.unit, k.Start))
			val := ""
			if v, ok := values[k]; ok {
				val = strconv.FormatInt(v, 10)
			}
			args = append(args, val)
		}
		for _, k := range p.replicas {
			v, ok := values[k]
			_, rep, _ := strings.Cut(k.ID, syncwire.ReplicaSuffix)
			if ok && rep != "" {
				args = append(args, rep, strconv.FormatInt(v, 10))
			}
		}
		calls = append(calls, scriptCall{publishScript, keys, args})
		if len(p.totals) > 0 {
			members := make([]any, 0, len(p.totals))
			for _, k := range p.totals {
				if _, ok := values[k]; ok {
					members = append(members, k.ID)
				}
			}
			idx := f.c.totalsIndex(g.unit, g.start)
			if len(members) > 0 {
				calls = append(calls, scriptCall{indexScript, []string{idx}, append([]any{exp}, members...)})
			}
		}
	}
	return calls
}

// indexSource adds counters to a period's index of totals (SADD, with the
// index's expiry), as a script so a pipeline holds only scripts.
const indexSource = `
redis.call('SADD', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return 1
`

var indexScript = redis.NewScript(indexSource)

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
	// The UTC day, week and month, and the plan's other current periods
	// (an hour, a quarter, a zone's day, a rolling window's day buckets).
	periods := []store.Key{{Unit: calendar.Day, Start: starts[calendar.Day]}, {Unit: calendar.Week, Start: starts[calendar.Week]}, {Unit: calendar.Month, Start: starts[calendar.Month]}}
	f.mu.Lock()
	for _, k := range f.periods {
		if k.IsCurrent(now, starts) {
			periods = append(periods, k)
		}
	}
	f.mu.Unlock()
	var ep Epoch
	var replicas int
	read := map[store.Key]map[string]int64{}
	err := f.c.do(ctx, "read_totals", fleetTimeout, func(ctx context.Context) error {
		var fleetCmd *redis.Cmd
		members := make([]*redis.StringSliceCmd, len(periods))
		_, err := f.c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			fc := f.c.fleetCall(ids, LivenessWindow)
			fleetCmd = fc.script.Run(ctx, p, fc.keys, fc.args...)
			for i, pk := range periods {
				members[i] = p.SMembers(ctx, f.c.totalsIndex(pk.UnitName(), pk.Start))
			}
			return nil
		})
		if err != nil && noScript([]*redis.Cmd{fleetCmd}) {
			if err := epochScript.Load(ctx, f.c.rdb).Err(); err != nil {
				return err
			}
			return errors.New("the fleet script was not in Redis's script cache; loaded it for the next read")
		}
		if err != nil && err != redis.Nil {
			return err
		}
		if ep, replicas, err = parseFleet(fleetCmd); err != nil {
			return err
		}
		var keys []store.Key
		var hashes []*redis.MapStringStringCmd
		_, err = f.c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, pk := range periods {
				for _, id := range members[i].Val() {
					k := pk
					k.ID = id
					keys = append(keys, k)
					hashes = append(hashes, p.HGetAll(ctx, f.c.periodKey(id, "total", k.UnitName(), k.Start)))
				}
			}
			return nil
		})
		if err != nil && err != redis.Nil {
			return err
		}
		for i, k := range keys {
			for acct, vs := range hashes[i].Val() {
				if acct == f.acct {
					continue
				}
				v, err := strconv.ParseInt(vs, 10, 64)
				if err != nil || v <= 0 {
					continue // nothing counted, or not a total any accountant writes
				}
				if read[k] == nil {
					read[k] = map[string]int64{}
				}
				read[k][acct] = v
			}
		}
		return nil
	})
	if err == nil {
		f.NoteEpoch(ep)
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
			sum = sat.Add(sum, v)
		}
		if f.others[k] != sum {
			f.others[k] = sum
			changed = true
		}
	}
	return changed || changedReplicas
}

// KnowEpoch tells the store the epoch this accountant last saw (kept in its
// data directory), before its first read: a different one read from Redis
// then means Redis lost its data while the accountant was away.
func (f *Fleet) KnowEpoch(name string, onEpoch func(string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.epoch == "" {
		f.epoch = name
	}
	f.onEpoch = onEpoch
}

// NoteEpoch takes the epoch a Redis call read (a refresh, a lease). A new
// one replacing one this accountant knew means Redis lost its data: every
// own total is published again, and until RebuildGrace after the epoch
// was made (by Redis's clock) Rebuilding reports it. The first epoch an
// accountant ever sees is adopted as it is: a fresh fleet on a fresh Redis
// has nothing to rebuild.
func (f *Fleet) NoteEpoch(ep Epoch) {
	if ep.Name == "" {
		return
	}
	f.mu.Lock()
	if ep.Name == f.epoch {
		f.mu.Unlock()
		return
	}
	knew := f.epoch != ""
	f.epoch = ep.Name
	f.full = true
	clear(f.published)
	if knew {
		left := RebuildGrace
		if !ep.Created.IsZero() && !ep.SeenAt.IsZero() {
			left = ep.Created.Add(RebuildGrace).Sub(ep.SeenAt)
		}
		if until := f.now().Add(left); until.After(f.rebuildUntil) {
			f.rebuildUntil = until
		}
	}
	onEpoch := f.onEpoch
	f.mu.Unlock()
	if onEpoch != nil {
		onEpoch(ep.Name)
	}
}

// Rebuilding says, while Redis's data is being counted again after it
// lost it, until when; the zero time otherwise.
func (f *Fleet) Rebuilding() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.now().Before(f.rebuildUntil) {
		return f.rebuildUntil
	}
	return time.Time{}
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

// periodKey is the Redis key of a counter's kind ("total", "lease") in a
// period named by store.Key.UnitName: TotalKey and LeaseKey for a UTC
// day, week or month, and the same with the period's end for the others.
func (c *Client) periodKey(id, kind, unit string, start int64) string {
	return c.counterKey(id, kind+":"+unit+":"+strconv.FormatInt(start, 10))
}

// totalsIndex is the Redis key of the set of counters published for a
// period (store.Key.UnitName and start).
func (c *Client) totalsIndex(unit string, start int64) string {
	return c.globalKey("totals:" + unit + ":" + strconv.FormatInt(start, 10))
}
