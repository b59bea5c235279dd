package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokentriage/tokentriage/shared/calendar"
	"github.com/tokentriage/tokentriage/shared/rate"
)

//go:embed rate.lua
var rateSource string

// rateScript runs by EVALSHA; go-redis sends the source with EVAL when the
// server answers NOSCRIPT (a restarted or flushed Redis), which loads it
// again.
var rateScript = redis.NewScript(rateSource)

// RateStep is one instance for the rate script: its counter identity, its
// algorithm (gcra, fixed_window or sliding_window) and numbers, and the
// cost to take (Take) or the signed correction to commit (Adjust).
type RateStep struct {
	ID     string
	Alg    rate.Algorithm
	Params rate.Params
	N      int64
	// Hold, when set, makes the step a budget hold (reserve: true) instead
	// of a rate cell: ID, N (the dearest cost) and the hold's numbers.
	Hold *Hold
}

// Hold is a budget reserve-mode step: the budget's amount (nanodollars),
// the calendar period it counts, the least cost the call can be lowered
// to (its output maximum at one token), and how long the hold lives
// unless released (seed 003: 15 minutes).
type Hold struct {
	Amount int64
	Unit   calendar.Unit
	Start  int64 // unix seconds
	Least  int64
	Lease  time.Duration
}

// HoldKey is the Redis key of the holds on a budget counter in a period.
func (c *Client) HoldKey(unit calendar.Unit, start int64, id string) string {
	return c.key("hold:" + unit.String() + ":" + strconv.FormatInt(start, 10) + ":" + id)
}

// RateKey is the Redis key of a rate cell: the hash tag, then the counter
// identity.
func (c *Client) RateKey(id string) string { return c.key("rate:" + id) }

// Take evaluates steps in order, as one script, and stops at the first
// that refuses: the results are those of the steps evaluated, the last one
// refused unless every step was admitted. now is the instant of the
// decision; the zero time means the Redis server's clock, which every
// accountant of a fleet then shares. rid is the request's id, which names
// its budget holds (a hold's result: Limit is what it holds, Remaining
// what the fleet had spent and held before it, ResetAfter, in nanodollars,
// how much of that the live holds of calls in flight held).
func (c *Client) Take(ctx context.Context, now time.Time, rid string, steps []RateStep) ([]rate.Result, error) {
	keys, args, err := c.rateArgs("take", now, rid, steps)
	if err != nil {
		return nil, err
	}
	var reply any
	err = c.do(ctx, "rate_take", 0, func(ctx context.Context) error {
		var err error
		reply, err = rateScript.Run(ctx, c.rdb, keys, args...).Result()
		return err
	})
	if err != nil {
		return nil, err
	}
	return parseTake(reply, len(steps))
}

// Adjust commits each step's signed correction (N > 0 debits, N < 0
// credits) without an admission decision, as one script: the tpm
// reconcile. timeout 0 is the request path's deadline.
func (c *Client) Adjust(ctx context.Context, now time.Time, steps []RateStep, timeout time.Duration) error {
	keys, args, err := c.rateArgs("adjust", now, "", steps)
	if err != nil {
		return err
	}
	return c.do(ctx, "rate_adjust", timeout, func(ctx context.Context) error {
		return rateScript.Run(ctx, c.rdb, keys, args...).Err()
	})
}

func (c *Client) rateArgs(op string, now time.Time, rid string, steps []RateStep) ([]string, []any, error) {
	keys := make([]string, len(steps))
	args := make([]any, 0, 4+5*len(steps))
	at := ""
	if !now.IsZero() {
		at = strconv.FormatInt(now.UnixNano(), 10)
	}
	args = append(args, op, at, rid, c.prefix)
	for i, s := range steps {
		if h := s.Hold; h != nil {
			if rid == "" && op == "take" {
				return nil, nil, fmt.Errorf("redis: budget hold on %s: no request id to name it", s.ID)
			}
			keys[i] = c.HoldKey(h.Unit, h.Start, s.ID)
			args = append(args, 4, strconv.FormatInt(max(s.N, 0), 10),
				strconv.FormatInt(max(h.Amount, 0), 10),
				strconv.FormatInt(min(max(h.Least, 0), max(s.N, 0)), 10),
				strconv.FormatInt(max(h.Lease.Milliseconds(), 1), 10))
			continue
		}
		code := 0
		switch s.Alg {
		case rate.GCRA:
			code = 1
		case rate.FixedWindow:
			code = 2
		case rate.SlidingWindow:
			code = 3
		default:
			return nil, nil, fmt.Errorf("redis: rate cell %s: algorithm %s runs on the local store only", s.ID, s.Alg)
		}
		keys[i] = c.RateKey(s.ID)
		n := s.N
		if op == "take" && n < 0 {
			n = 0
		}
		args = append(args, code, strconv.FormatInt(n, 10),
			strconv.FormatInt(max(s.Params.Amount, 0), 10),
			strconv.FormatInt(max(int64(s.Params.Period), 0), 10),
			strconv.FormatInt(max(s.Params.Burst, 0), 10))
	}
	return keys, args, nil
}

// parseTake reads the take reply: one row per step evaluated.
func parseTake(reply any, steps int) ([]rate.Result, error) {
	rows, ok := reply.([]any)
	if !ok || len(rows) == 0 || len(rows) > steps {
		return nil, fmt.Errorf("redis: rate script answered %T with %d rows for %d steps", reply, len(rows), steps)
	}
	out := make([]rate.Result, len(rows))
	for i, r := range rows {
		f, ok := r.([]any)
		if !ok || len(f) != 6 {
			return nil, fmt.Errorf("redis: rate script row %d is %v", i, r)
		}
		var n [6]int64
		for j, v := range f {
			switch v := v.(type) {
			case int64:
				n[j] = v
			case string:
				x, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("redis: rate script row %d field %d: %v", i, j, err)
				}
				n[j] = x
			default:
				return nil, fmt.Errorf("redis: rate script row %d field %d is %T", i, j, v)
			}
		}
		out[i] = rate.Result{
			Allowed:    n[0] == 1,
			Limit:      n[1],
			Remaining:  n[2],
			RetryAfter: time.Duration(n[3]),
			ResetAfter: time.Duration(n[4]),
			Unfittable: n[5] == 1,
		}
	}
	if !out[len(out)-1].Allowed || len(out) == steps {
		return out, nil
	}
	return nil, fmt.Errorf("redis: rate script stopped after %d of %d steps without a refusal", len(out), steps)
}

// HoldRelease is one budget hold to release when its call's row is
// recorded: the counter and period it holds on, the request, and Own, the
// recording accountant's own total of that counter now that it counts the
// call (-1: none to raise).
type HoldRelease struct {
	Unit  calendar.Unit
	Start int64
	ID    string
	RID   string
	Own   int64
}

// ReleaseHolds releases the holds, as one script, each at most once, and
// raises acct's field of each counter's fleet total to its Own in the same
// step, so a call's cost is always in its hold or in the total. It reports
// how many holds it found. timeout 0 is the request path's deadline.
func (c *Client) ReleaseHolds(ctx context.Context, acct string, rels []HoldRelease, timeout time.Duration) (int, error) {
	if len(rels) == 0 {
		return 0, nil
	}
	keys := make([]string, len(rels))
	args := make([]any, 0, 4+5*len(rels))
	args = append(args, "release", "", "", c.prefix)
	for i, r := range rels {
		keys[i] = c.HoldKey(r.Unit, r.Start, r.ID)
		own, exp := "", ""
		if r.Own >= 0 {
			own = strconv.FormatInt(r.Own, 10)
			exp = strconv.FormatInt(calendar.End(r.Unit, time.Unix(r.Start, 0).UTC()).Add(keepAfterEnd).UnixMilli(), 10)
		}
		args = append(args, r.RID, acct, own, exp, "")
	}
	var n int64
	err := c.do(ctx, "release_holds", timeout, func(ctx context.Context) error {
		var err error
		n, err = rateScript.Run(ctx, c.rdb, keys, args...).Int64()
		return err
	})
	return int(n), err
}

// RowReconcile is the tpm reconciles of one ledger row, named by its
// request id.
type RowReconcile struct {
	RID   string
	Steps []RateStep
}

// Reconcile commits the tpm reconciles of rows, each row once by its
// request id (a retry commits nothing twice: a marker in Redis, living as
// long as the longest window it corrects, says it was committed), in one
// pipelined round trip. It reports how many rows it committed now.
func (c *Client) Reconcile(ctx context.Context, rows []RowReconcile, timeout time.Duration) (int, error) {
	type call struct {
		keys []string
		args []any
	}
	calls := make([]call, 0, len(rows))
	for _, r := range rows {
		if r.RID == "" || len(r.Steps) == 0 {
			continue
		}
		keys, args, err := c.rateArgs("reconcile", time.Time{}, r.RID, r.Steps)
		if err != nil {
			return 0, err
		}
		calls = append(calls, call{keys, args})
	}
	if len(calls) == 0 {
		return 0, nil
	}
	n := 0
	err := c.do(ctx, "rate_reconcile", timeout, func(ctx context.Context) error {
		n = 0
		for attempt := 0; ; attempt++ {
			cmds, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, cl := range calls {
					rateScript.EvalSha(ctx, p, cl.keys, cl.args...)
				}
				return nil
			})
			if err != nil && attempt == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
				if err := rateScript.Load(ctx, c.rdb).Err(); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			for _, cmd := range cmds {
				if v, _ := cmd.(*redis.Cmd).Int64(); v >= 0 {
					n++
				}
			}
			return nil
		}
	})
	return n, err
}
