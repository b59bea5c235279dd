package spend

import (
	"fmt"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/sat"
)

// Plausibility is what a fleet report holds another accountant's share
// to, beyond its shape. A share comes from whoever holds the internal
// token and announced an address: it adds into the fleet's figures, so a
// share that holds what its accountant cannot have recorded is left out
// of the report (listed as not answering, with the reason), never added.
// See RATIONALE.md#why-does-a-fleet-report-check-the-shares-it-adds.
type Plausibility struct {
	// KnownNode reports whether a node is in the fleet's tenancy tree (the
	// config's nodes and the runtime plane's). Nil: not checked. A node
	// the asker's own share holds is plausible too (a runtime node deleted
	// since its rows were recorded).
	KnownNode func(node string) bool
	// MaxNanosPerToken is the dearest rate of the asker's price catalog,
	// in nanodollars per token, rounded up: a cell's dollars cannot pass
	// its tokens at PriceSlack times that. 0: not checked.
	MaxNanosPerToken int64
	// OnRefused, when set, is told of each share left out as
	// implausible.
	OnRefused func(accountant string, err error)
}

// PriceSlack is how far past the asker's dearest rate a share's dollars
// per token may go: the accountants of a fleet may price with catalogs a
// release or a pricing file apart.
const PriceSlack = 4

// maxFuture is how far past the asker's clock a share's last row may end
// (clocks of a fleet drift).
const maxFuture = 5 * time.Minute

// nodeDim reports whether d's values are tree nodes.
func nodeDim(d Dim) bool { return d == DimOrg || d == DimTeam || d == DimUser || d == DimNode }

// shareCheck holds one share to what its accountant can have recorded.
type shareCheck struct {
	pl      Plausibility
	q       *Query
	scope   string
	now     time.Time
	buckets []time.Time
	// own are the node values of the asker's own share, by group_by
	// position: plausible whatever the tree says.
	own map[string]bool
}

// keys checks a share's group keys: node values in the tree (or the
// asker's own share) and in the caller's scope.
func (c *shareCheck) keys(p *Partial) error {
	for _, k := range p.Keys {
		for i, d := range c.q.GroupBy {
			if i >= len(k) || !nodeDim(d) || k[i] == "" {
				continue
			}
			v := k[i]
			if c.scope != "" && !runtime.InSubtree(c.scope, v) && !runtime.InSubtree(v, c.scope) {
				return fmt.Errorf("its answer holds rows of node %q, outside the subtree %s it was asked about", v, c.scope)
			}
			if c.pl.KnownNode != nil && !c.pl.KnownNode(v) && !c.own[v] {
				return fmt.Errorf("its answer holds rows of node %q, which is no node of the fleet's tenancy tree", v)
			}
		}
	}
	return nil
}

// period checks that a share's rows lie where it says its ledger does, and
// not in the future.
func (c *shareCheck) period(p *Partial) error {
	if p.Last != nil && p.Last.After(c.now.Add(maxFuture)) {
		return fmt.Errorf("its answer says its last row ended at %s, after now (%s)", p.Last.UTC().Format(time.RFC3339), c.now.UTC().Format(time.RFC3339))
	}
	if p.First != nil && p.Last != nil && p.First.After(*p.Last) {
		return fmt.Errorf("its answer says its rows begin at %s, after they end at %s", p.First.UTC().Format(time.RFC3339), p.Last.UTC().Format(time.RFC3339))
	}
	return nil
}

// cells checks a share's table: no row in a bucket that begins after now
// or after the share's last row, or that ends before its first row;
// splits within their requests; dollars within the tokens at the dearest
// rate. Its requests are not held to its ledger's rows: a summary row
// stands for many requests (ledger.KindSummary).
func (c *shareCheck) cells(p *Partial) error {
	for _, cells := range p.Table {
		for _, cell := range cells {
			b := int(cell[0])
			start := c.buckets[b]
			end := c.q.To
			if b+1 < len(c.buckets) {
				end = c.buckets[b+1]
			}
			switch {
			case start.After(c.now.Add(maxFuture)):
				return fmt.Errorf("its answer has rows in the bucket of %s, which has not begun", start.UTC().Format(time.RFC3339))
			case p.Last != nil && start.After(*p.Last):
				return fmt.Errorf("its answer has rows in the bucket of %s, after its last row (%s)", start.UTC().Format(time.RFC3339), p.Last.UTC().Format(time.RFC3339))
			case p.First != nil && !end.After(*p.First):
				return fmt.Errorf("its answer has rows in the bucket of %s, before its first row (%s)", start.UTC().Format(time.RFC3339), p.First.UTC().Format(time.RFC3339))
			}
			var a acc
			copy(a[:fNone], cell[1:])
			if err := c.acc(&a); err != nil {
				return err
			}
		}
	}
	return nil
}

// acc checks one cell's figures against each other.
func (c *shareCheck) acc(a *acc) error {
	req := a[fRequests]
	if sat.Add(sat.Add(a[fAdmitted], a[fRefused]), sat.Add(a[fShadow], a[fSoft])) > req ||
		sat.Add(sat.Add(a[fPricedReq], a[fEstReq]), a[fUnpricedReq]) > req {
		return fmt.Errorf("its answer splits %d requests into more than that", req)
	}
	if a[fUnpricedTok] > sat.Add(a[fInput], a[fOutput]) {
		return fmt.Errorf("its answer holds %d UNPRICED tokens of %d tokens", a[fUnpricedTok], sat.Add(a[fInput], a[fOutput]))
	}
	if m := c.pl.MaxNanosPerToken; m > 0 {
		tokens := sat.Add(a[fInput], a[fOutput])
		per := m * PriceSlack // a catalog rate per token: far from overflowing
		dollars := sat.Add(a[fPricedNanos], a[fEstNanos])
		if need := dollars/per + min(dollars%per, 1); need > tokens {
			return fmt.Errorf("its answer holds $%s for %d tokens, more than any model of the catalog costs", config.USD{Nanos: dollars}, tokens)
		}
	}
	return nil
}

// ownNodes collects the node values of the asker's own share.
func (c *shareCheck) ownNodes(p *Partial) {
	for _, k := range p.Keys {
		for i, d := range c.q.GroupBy {
			if i < len(k) && nodeDim(d) {
				c.own[k[i]] = true
			}
		}
	}
}
