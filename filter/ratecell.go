package filter

import (
	"time"

	"github.com/tokentriage/tokentriage/shared/rate"
)

// rateTake runs one algorithm step of cost against the cell at key. A
// refused step writes nothing; an admitted one is a compare-and-swap (a
// creating set for a cell nobody has written yet), so racing VMs never
// admit more than the algorithm allows. Uncontended it is one get and one
// set, the first request of a cell included.
func (c *cells) rateTake(key string, alg rate.Algorithm, now time.Time, cost int64, p rate.Params) (rate.Result, error) {
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		v, cas, found, err := c.store.Get(key)
		if err != nil {
			return rate.Result{}, err
		}
		var st rate.State
		if found {
			st = decodeRate(v, alg)
		}
		res, next := rate.Take(alg, st, now, cost, p)
		if !res.Allowed {
			return res, nil
		}
		c.scratch = next.AppendBinary(c.scratch[:0])
		swapped, err := c.setNew(key, c.scratch, cas, found)
		if err != nil {
			return rate.Result{}, err
		}
		if swapped {
			return res, nil
		}
		c.retries++
	}
	return rate.Result{}, errContention
}

// rateAdjust commits a signed correction to the cell (the tpm reconcile):
// unconditional, no admission decision attached.
func (c *cells) rateAdjust(key string, alg rate.Algorithm, now time.Time, delta int64, p rate.Params) error {
	if delta == 0 {
		return nil
	}
	for attempt := 0; attempt < maxCASRetries; attempt++ {
		v, cas, found, err := c.store.Get(key)
		if err != nil {
			return err
		}
		var st rate.State
		if found {
			st = decodeRate(v, alg)
		}
		next := rate.Adjust(alg, st, now, delta, p)
		c.scratch = next.AppendBinary(c.scratch[:0])
		swapped, err := c.setNew(key, c.scratch, cas, found)
		if err != nil {
			return err
		}
		if swapped {
			return nil
		}
		c.retries++
	}
	return errContention
}

// rateWouldTake is what rateTake would decide now, without writing the
// cell.
func (c *cells) rateWouldTake(key string, alg rate.Algorithm, now time.Time, cost int64, p rate.Params) (rate.Result, error) {
	v, _, found, err := c.store.Get(key)
	if err != nil {
		return rate.Result{}, err
	}
	var st rate.State
	if found {
		st = decodeRate(v, alg)
	}
	res, _ := rate.Take(alg, st, now, cost, p)
	return res, nil
}

// ratePeek reads the cell without changing it: what a probe of cost 0
// sees, and how long until one more unit (a request, a token) would be
// admitted, 0 when one would be now.
func (c *cells) ratePeek(key string, alg rate.Algorithm, now time.Time, p rate.Params) (rate.Result, time.Duration, error) {
	res, next, _, err := c.ratePeekFound(key, alg, now, p)
	return res, next, err
}

// ratePeekFound is ratePeek, and whether the cell was ever written.
func (c *cells) ratePeekFound(key string, alg rate.Algorithm, now time.Time, p rate.Params) (rate.Result, time.Duration, bool, error) {
	v, _, found, err := c.store.Get(key)
	if err != nil {
		return rate.Result{}, 0, false, err
	}
	var st rate.State
	if found {
		st = decodeRate(v, alg)
	}
	res := rate.Peek(alg, st, now, p)
	var next time.Duration
	if res.Remaining <= 0 {
		one, _ := rate.Take(alg, st, now, 1, p) // a refused step changes nothing
		next = one.RetryAfter
	}
	return res, next, found, nil
}

// decodeRate reads a cell's state; an unreadable cell, or one written for
// another algorithm, starts fresh rather than failing the request.
func decodeRate(v []byte, alg rate.Algorithm) rate.State {
	st, err := rate.DecodeState(v)
	if err != nil || (!st.IsZero() && st.Algorithm() != alg) {
		return rate.State{}
	}
	return st
}
