package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokentriage/tokentriage/shared/rate"
)

//go:embed ratelib.lua
var rateLib string

//go:embed rate.lua
var rateMain string

// rateScript runs by EVALSHA; go-redis sends the source with EVAL when the
// server answers NOSCRIPT (a restarted or flushed Redis), which loads it
// again.
var rateScript = redis.NewScript(rateLib + "\n" + rateMain)

// RateStep is one rate cell for the rate script: its counter identity, its
// algorithm (gcra, fixed_window or sliding_window) and numbers, and the
// cost to take (Take) or the signed correction to commit (Adjust).
type RateStep struct {
	ID     string
	Alg    rate.Algorithm
	Params rate.Params
	N      int64
}

// RateKey is the Redis key of a rate cell.
func (c *Client) RateKey(id string) string { return c.counterKey(id, "rate") }

// reconcileKey marks request rid's reconcile of the cell of id as done.
func (c *Client) reconcileKey(id, rid string) string { return c.counterKey(id, "rc:"+rid) }

// Take evaluates steps in order, as one script, and stops at the first
// that refuses: the results are those of the steps evaluated, the last one
// refused unless every step was admitted. The cells must share a slot on a
// Redis Cluster (one cell always does). now is the instant of the
// decision; the zero time means the Redis server's clock, which every
// accountant of a fleet then shares.
func (c *Client) Take(ctx context.Context, now time.Time, steps []RateStep) ([]rate.Result, error) {
	keys, args, err := c.rateArgs("take", now, "", steps)
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
// credits) without an admission decision, one script per cell in one
// pipelined round trip. timeout 0 is the request path's deadline.
func (c *Client) Adjust(ctx context.Context, now time.Time, steps []RateStep, timeout time.Duration) error {
	calls := make([]scriptCall, 0, len(steps))
	for _, st := range steps {
		keys, args, err := c.rateArgs("adjust", now, "", []RateStep{st})
		if err != nil {
			return err
		}
		calls = append(calls, scriptCall{rateScript, keys, args})
	}
	if len(calls) == 0 {
		return nil
	}
	return c.do(ctx, "rate_adjust", timeout, func(ctx context.Context) error {
		_, err := c.runPipelined(ctx, calls)
		return err
	})
}

func (c *Client) rateArgs(op string, now time.Time, rid string, steps []RateStep) ([]string, []any, error) {
	keys := make([]string, len(steps))
	args := make([]any, 0, 4+5*len(steps))
	args = append(args, op, instant(now), rid, "")
	for i, s := range steps {
		code, err := algCode(s)
		if err != nil {
			return nil, nil, err
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

// instant is a script's ARGV[2]: unix ns, or "" for the server's clock.
func instant(now time.Time) string {
	if now.IsZero() {
		return ""
	}
	return strconv.FormatInt(now.UnixNano(), 10)
}

// algCode is the scripts' number for a step's algorithm.
func algCode(s RateStep) (int, error) {
	switch s.Alg {
	case rate.GCRA:
		return 1, nil
	case rate.FixedWindow:
		return 2, nil
	case rate.SlidingWindow:
		return 3, nil
	}
	return 0, fmt.Errorf("redis: rate cell %s: algorithm %s runs on the local store only", s.ID, s.Alg)
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
			x, err := replyInt(v)
			if err != nil {
				return nil, fmt.Errorf("redis: rate script row %d field %d: %v", i, j, err)
			}
			n[j] = x
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

// replyInt reads an integer of a script's reply: an integer, or a decimal
// string.
func replyInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("%T is not a number", v)
}

// RowReconcile is the tpm reconciles of one ledger row, named by its
// request id.
type RowReconcile struct {
	RID   string
	Steps []RateStep
}

// Reconcile commits the tpm reconciles of rows, each row's correction of
// each cell once by its request id (a retry commits nothing twice: a
// marker in Redis, living as long as the window it corrects, says it was
// committed), in one pipelined round trip. It reports how many
// corrections it committed now.
func (c *Client) Reconcile(ctx context.Context, rows []RowReconcile, timeout time.Duration) (int, error) {
	var calls []scriptCall
	for _, r := range rows {
		if r.RID == "" {
			continue
		}
		for _, st := range r.Steps {
			keys, args, err := c.rateArgs("reconcile", time.Time{}, r.RID, []RateStep{st})
			if err != nil {
				return 0, err
			}
			keys = append(keys, c.reconcileKey(st.ID, r.RID))
			calls = append(calls, scriptCall{rateScript, keys, args})
		}
	}
	if len(calls) == 0 {
		return 0, nil
	}
	n := 0
	err := c.do(ctx, "rate_reconcile", timeout, func(ctx context.Context) error {
		cmds, err := c.runPipelined(ctx, calls)
		if err != nil {
			return err
		}
		n = 0
		for _, cmd := range cmds {
			if v, _ := cmd.Int64(); v >= 0 {
				n++
			}
		}
		return nil
	})
	return n, err
}

// scriptCall is one script run of a pipeline.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// runPipelined runs calls in one pipelined round trip (one per node of a
// cluster), by EVALSHA; when Redis no longer has a script (it restarted, or
// was flushed), it loads them and runs the calls again, once.
func (c *Client) runPipelined(ctx context.Context, calls []scriptCall) ([]*redis.Cmd, error) {
	for attempt := 0; ; attempt++ {
		cmds := make([]*redis.Cmd, len(calls))
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, cl := range calls {
				cmds[i] = cl.script.EvalSha(ctx, p, cl.keys, cl.args...)
			}
			return nil
		})
		if err != nil && attempt == 0 && noScript(cmds) {
			for _, sc := range scripts {
				if err := sc.Load(ctx, c.rdb).Err(); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err != nil {
			// A script's own error reply fails only its command: the
			// others stand.
			for _, cmd := range cmds {
				if e := cmd.Err(); e != nil && e != redis.Nil && !isScriptError(e) {
					return cmds, e
				}
			}
		}
		return cmds, nil
	}
}

// noScript reports whether a command of the pipeline failed on a script
// Redis no longer holds.
func noScript(cmds []*redis.Cmd) bool {
	for _, cmd := range cmds {
		if cmd != nil && cmd.Err() != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			return true
		}
	}
	return false
}

// isScriptError reports whether err is one of the scripts' own error
// replies (arguments they refuse), which fail that command alone; any
// other error (the connection, a server loading its data, a read-only
// replica) is the round trip's.
func isScriptError(err error) bool {
	return strings.HasPrefix(err.Error(), "tokentriage ")
}
