package redisstore

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/rate"
)

//go:embed lease.lua
var leaseMain string

// leaseScript takes, gives back and restores leases (lease.lua).
var leaseScript = redis.NewScript(rateLib + "\n" + leaseMain)

// LeaseKind says what a lease is a slice of.
type LeaseKind uint8

const (
	// LeaseRate is units of a store: redis rpm or tpm cell, for its
	// window (fixed_window, sliding_window) or its hold (gcra).
	LeaseRate LeaseKind = iota + 1
	// LeaseRestore counts again, after Redis lost its data, units of a
	// rate cell a replica still holds.
	LeaseRestore
	// LeaseSpend is nanodollars of a budget, or tokens or requests of a
	// quota, in reserve mode, for its calendar period.
	LeaseSpend
	// LeaseSlots is slots of a concurrency limit under store: share.
	LeaseSlots
)

// LeaseOp is one lease operation on one counter.
type LeaseOp struct {
	Kind LeaseKind
	// ID is the counter identity.
	ID string
	// Alg and Params are a rate cell's (LeaseRate, LeaseRestore).
	Alg    rate.Algorithm
	Params rate.Params
	// Need is what the replica needs now (a request waits for it); Extra
	// what it would like ahead of need (a prefetch); Back what it gives
	// back of its lease. LeaseRestore: Need is the units to count again.
	Need, Extra, Back int64
	// Anchor names the lot Back (or LeaseRestore's units) came from, as
	// the lease that granted it answered.
	Anchor string
	// Hold is how long a gcra lot may be drawn on.
	Hold time.Duration
	// Replicas is the fleet's replica count: ahead of need, a lease grants
	// at most what is left over twice the replicas, so that near its end
	// an amount goes to the replicas that need it, not to one that asked
	// ahead.
	Replicas int
	// Ask names this ask for what it grants (LeaseRate, LeaseSpend,
	// LeaseSlots): the same ask again gets the grant recorded for it, not
	// a second one. "" records nothing.
	Ask string
	// Replica names the replica (LeaseSpend, LeaseSlots); Amount is the
	// limit's amount (LeaseSpend, LeaseSlots), Least a spend call's
	// least cost (its output maximum at one token), Granted the replica's
	// own count of what it was granted and not given back (LeaseSpend)
	// and Held what its calls in flight hold (LeaseSpend) or the slots it
	// holds (LeaseSlots).
	Replica              string
	Amount, Least        int64
	Granted, Held        int64
	Unit                 calendar.Unit // LeaseSpend's period
	Start                int64         // its start, unix s
	Free, HoldTTL, Slots time.Duration // how long a silent replica's free lease, its calls' holds and its slots count
}

// LeaseAnswer is one operation's answer.
type LeaseAnswer struct {
	// Allowed: all of Need was granted.
	Allowed bool
	// Granted is what the replica was granted now (Need, Need and extra,
	// or a part of Need).
	Granted int64
	// Result is a rate cell's state after the grant: Limit, Remaining,
	// RetryAfter (for all of Need, when not Allowed), ResetAfter,
	// Unfittable.
	Result rate.Result
	// Anchor names a rate lot; Valid is how long it may be drawn on.
	Anchor string
	Valid  time.Duration
	// Spent is a spend counter's fleet spend before the grant (every
	// accountant's total and every lease not yet spent), InFlight what of
	// it the calls in flight hold, Left what is left after it.
	Spent, InFlight, Left int64
	// Others are the slots the other replicas hold, Mine this replica's.
	Others, Mine int64
	// Err is this operation's own failure (the others stand).
	Err error
}

// LeaseKey is the Redis key of a spend counter's leases in a period.
func (c *Client) LeaseKey(unit calendar.Unit, start int64, id string) string {
	return c.counterKey(id, "lease:"+unit.String()+":"+strconv.FormatInt(start, 10))
}

// TotalKey is the Redis key of a counter's fleet total in a period: one
// field per accountant.
func (c *Client) TotalKey(unit calendar.Unit, start int64, id string) string {
	return c.counterKey(id, "total:"+unit.String()+":"+strconv.FormatInt(start, 10))
}

// SlotsKey is the Redis key of a concurrency limit's slots.
func (c *Client) SlotsKey(id string) string { return c.counterKey(id, "slots") }

// Epoch is the fleet's data set as one lease call found it: its name
// (made when Redis had none: a fresh Redis, or one that lost its data),
// and when it was made and the call ran, by Redis's clock.
type Epoch struct {
	Name            string
	Created, SeenAt time.Time
}

// Lease runs ops, each by one script, in one pipelined round trip (one per
// node of a cluster), after reading the fleet's epoch (made if Redis has
// none). timeout 0 is the request path's deadline. An error is the round
// trip's; an operation's own refusal is in its answer's Err.
func (c *Client) Lease(ctx context.Context, ops []LeaseOp, timeout time.Duration) (Epoch, []LeaseAnswer, error) {
	calls := make([]scriptCall, 0, 1+len(ops))
	calls = append(calls, c.fleetCall(nil, 0))
	for i := range ops {
		keys, args, err := c.leaseArgs(&ops[i])
		if err != nil {
			return Epoch{}, nil, err
		}
		calls = append(calls, scriptCall{leaseScript, keys, args})
	}
	var cmds []*redis.Cmd
	err := c.do(ctx, "lease", timeout, func(ctx context.Context) error {
		var err error
		cmds, err = c.runPipelined(ctx, calls)
		return err
	})
	if err != nil {
		return Epoch{}, nil, err
	}
	ep, _, err := parseFleet(cmds[0])
	if err != nil {
		return Epoch{}, nil, err
	}
	out := make([]LeaseAnswer, len(ops))
	for i := range ops {
		out[i] = parseLease(ops[i].Kind, cmds[1+i])
	}
	return ep, out, nil
}

func (c *Client) leaseArgs(op *LeaseOp) ([]string, []any, error) {
	d := func(n int64) string { return strconv.FormatInt(max(n, 0), 10) }
	switch op.Kind {
	case LeaseRate, LeaseRestore:
		code, err := algCode(RateStep{ID: op.ID, Alg: op.Alg})
		if err != nil {
			return nil, nil, err
		}
		args := []any{"rate", "", code, d(op.Params.Amount), d(int64(op.Params.Period)), d(op.Params.Burst)}
		if op.Kind == LeaseRestore {
			args[0] = "restore"
			args = append(args, d(op.Need), op.Anchor)
			return []string{c.RateKey(op.ID)}, args, nil
		}
		args = append(args, d(op.Need), d(op.Extra), d(op.Back), op.Anchor, d(op.Hold.Milliseconds()), d(int64(max(op.Replicas, 1))), op.Ask)
		return c.askKeys(op, c.RateKey(op.ID)), args, nil
	case LeaseSpend:
		if op.Replica == "" {
			return nil, nil, fmt.Errorf("redis: spend lease on %s: no replica", op.ID)
		}
		exp := calendar.End(op.Unit, time.Unix(op.Start, 0).UTC()).Add(keepAfterEnd).UnixMilli()
		return c.askKeys(op, c.TotalKey(op.Unit, op.Start, op.ID), c.LeaseKey(op.Unit, op.Start, op.ID)),
			[]any{"spend", "", op.Replica, d(op.Amount), d(op.Need), d(min(op.Least, op.Need)), d(op.Extra), d(op.Back),
				d(op.Granted), d(op.Held), d(op.Free.Milliseconds()), d(op.HoldTTL.Milliseconds()), strconv.FormatInt(exp, 10),
				d(int64(max(op.Replicas, 1))), op.Ask}, nil
	case LeaseSlots:
		if op.Replica == "" {
			return nil, nil, fmt.Errorf("redis: slots lease on %s: no replica", op.ID)
		}
		return c.askKeys(op, c.SlotsKey(op.ID)),
			[]any{"slots", "", op.Replica, d(op.Amount), d(op.Need), d(op.Extra), d(op.Back), d(op.Held), d(max(op.Slots.Milliseconds(), 1)),
				d(int64(max(op.Replicas, 1))), op.Ask}, nil
	}
	return nil, nil, fmt.Errorf("redis: lease on %s: unknown kind %d", op.ID, op.Kind)
}

// askKeys are keys, and the counter's record of grants when op names its
// ask.
func (c *Client) askKeys(op *LeaseOp, keys ...string) []string {
	if op.Ask != "" {
		keys = append(keys, c.counterKey(op.ID, "grants"))
	}
	return keys
}

// parseLease reads one lease script reply.
func parseLease(kind LeaseKind, cmd *redis.Cmd) LeaseAnswer {
	var a LeaseAnswer
	reply, err := cmd.Result()
	if err != nil {
		a.Err = err
		return a
	}
	if kind == LeaseRestore {
		return a
	}
	row, ok := reply.([]any)
	want := map[LeaseKind]int{LeaseRate: 9, LeaseSpend: 5, LeaseSlots: 4}[kind]
	if !ok || len(row) != want {
		a.Err = fmt.Errorf("redis: the lease script answered %v", reply)
		return a
	}
	n := make([]int64, len(row))
	for i, v := range row {
		if kind == LeaseRate && i == 7 {
			switch v := v.(type) {
			case string:
				a.Anchor = v
			case int64:
				a.Anchor = strconv.FormatInt(v, 10)
			}
			continue
		}
		x, err := replyInt(v)
		if err != nil {
			a.Err = fmt.Errorf("redis: the lease script's field %d: %v", i, err)
			return a
		}
		n[i] = x
	}
	a.Allowed, a.Granted = n[0] == 1, n[1]
	switch kind {
	case LeaseRate:
		a.Result = rate.Result{Allowed: a.Allowed, Limit: n[2], Remaining: n[3], RetryAfter: time.Duration(n[4]),
			ResetAfter: time.Duration(n[5]), Unfittable: n[6] == 1}
		a.Valid = time.Duration(n[8])
	case LeaseSpend:
		a.Spent, a.InFlight, a.Left = n[2], n[3], n[4]
	case LeaseSlots:
		a.Others, a.Mine = n[2], n[3]
	}
	return a
}

// The fleet-wide script: the epoch (made when Redis has none) and the
// replicas' heartbeats, both in the prefix's own slot.
//
//	KEYS   the epoch, the heartbeats (a sorted set: replica -> unix ms)
//	ARGV   a fresh epoch name, the liveness window (ms; 0: no heartbeat),
//	       then the replicas to heartbeat
//
// Reply {epoch, Redis's now in unix ms, live replicas}; an epoch is its name
// and, after a colon, when it was made (unix ms).
const fleetSource = `
local t = redis.call('TIME')
local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local e = redis.call('GET', KEYS[1])
if not e then
  e = ARGV[1] .. ':' .. string.format('%.0f', nowms)
  redis.call('SET', KEYS[1], e)
end
local window = tonumber(ARGV[2]) or 0
if window > 0 then
  for i = 3, #ARGV do
    redis.call('ZADD', KEYS[2], nowms, ARGV[i])
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%.0f', nowms - window))
  redis.call('PEXPIRE', KEYS[2], window * 2)
end
return { e, string.format('%.0f', nowms), redis.call('ZCARD', KEYS[2]) }
`

var epochScript = redis.NewScript(fleetSource)

// fleetCall is the fleet-wide script's call: heartbeats for ids (none with
// window 0).
func (c *Client) fleetCall(ids []string, window time.Duration) scriptCall {
	args := make([]any, 0, 2+len(ids))
	args = append(args, newEpoch(), strconv.FormatInt(window.Milliseconds(), 10))
	for _, id := range ids {
		args = append(args, id)
	}
	return scriptCall{epochScript, []string{c.globalKey("epoch"), c.globalKey("replicas")}, args}
}

// parseFleet reads the fleet-wide script's reply: the epoch and the live
// replicas.
func parseFleet(cmd *redis.Cmd) (Epoch, int, error) {
	reply, err := cmd.Result()
	if err != nil {
		return Epoch{}, 0, err
	}
	row, ok := reply.([]any)
	if !ok || len(row) != 3 {
		return Epoch{}, 0, fmt.Errorf("redis: the fleet script answered %v", reply)
	}
	name, _ := row[0].(string)
	nowms, err1 := replyInt(row[1])
	n, err2 := replyInt(row[2])
	if name == "" || errors.Join(err1, err2) != nil {
		return Epoch{}, 0, fmt.Errorf("redis: the fleet script answered %v", reply)
	}
	ep := Epoch{Name: name, SeenAt: time.UnixMilli(nowms)}
	if _, made, ok := strings.Cut(name, ":"); ok {
		if ms, err := strconv.ParseInt(made, 10, 64); err == nil {
			ep.Created = time.UnixMilli(ms)
		}
	}
	return ep, int(n), nil
}

func newEpoch() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
