package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

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
}

// RateKey is the Redis key of a rate cell: the hash tag, then the counter
// identity.
func (c *Client) RateKey(id string) string { return c.key("rate:" + id) }

// Take evaluates steps in order, as one script, and stops at the first
// that refuses: the results are those of the steps evaluated, the last one
// refused unless every step was admitted. now is the instant of the
// decision; the zero time means the Redis server's clock, which every
// accountant of a fleet then shares.
func (c *Client) Take(ctx context.Context, now time.Time, steps []RateStep) ([]rate.Result, error) {
	keys, args, err := c.rateArgs("take", now, steps)
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
	keys, args, err := c.rateArgs("adjust", now, steps)
	if err != nil {
		return err
	}
	return c.do(ctx, "rate_adjust", timeout, func(ctx context.Context) error {
		return rateScript.Run(ctx, c.rdb, keys, args...).Err()
	})
}

func (c *Client) rateArgs(op string, now time.Time, steps []RateStep) ([]string, []any, error) {
	keys := make([]string, len(steps))
	args := make([]any, 0, 2+5*len(steps))
	at := ""
	if !now.IsZero() {
		at = strconv.FormatInt(now.UnixNano(), 10)
	}
	args = append(args, op, at)
	for i, s := range steps {
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
