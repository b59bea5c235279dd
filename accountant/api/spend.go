package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/spend"
)

// SpendLimits answers GET spend/limits: every budget and quota instance
// the caller's subtree holds, in the current period, with its live
// counter, fullest first.
type SpendLimits struct {
	// GeneratedAt is when the counters were published (the snapshot the
	// gateways read); ReadAt when this answer was made.
	GeneratedAt time.Time           `json:"generated_at"`
	ReadAt      time.Time           `json:"read_at"`
	Limits      []spend.LimitStatus `json:"limits"`
}

// NotReadyError is an answer the accountant cannot give yet: What is
// still being read from the ledger, Done of Total bytes so far.
type NotReadyError struct {
	What        string
	Done, Total int64
}

func (e *NotReadyError) Error() string {
	pct := 0
	if e.Total > 0 {
		pct = int(e.Done * 100 / e.Total)
	}
	return fmt.Sprintf("%s is being read from the ledger since the accountant started (%d%% of %d MiB); try again in a few seconds", e.What, pct, e.Total>>20)
}

// getSpend serves GET spend: the spend report of spend.ParseQuery's
// parameters, as JSON, or as CSV when the request asks for text/csv
// (Accept, or format=csv). A delegated admin's report covers its subtree
// only: node= defaults to its scope, and a node outside it is refused.
func (h *handler) getSpend(w http.ResponseWriter, r *http.Request, p principal) {
	if h.Spend == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this accountant keeps no spend rollup")
		return
	}
	v := r.URL.Query()
	csv, ok := wantsCSV(w, r, v)
	if !ok {
		return
	}
	q, err := spend.ParseQuery(v, h.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "%v", err)
		return
	}
	if q.Node != "" && !p.owns(q.Node) {
		forbidNode(w, p, "node", q.Node, false)
		return
	}
	rep, err := h.Spend(q, p.scope)
	if err != nil {
		h.spendError(w, r, p, err)
		return
	}
	if err := h.nameKeys(rep); err != nil {
		h.internal(w, r, err)
		return
	}
	if rep.Partial {
		// Said in the headers too, for a CSV reader.
		var missing []string
		for _, a := range rep.Source.Replicas {
			if !a.Answered {
				missing = append(missing, a.Accountant)
			}
		}
		w.Header().Set("X-Tt-Spend-Partial", fmt.Sprintf("%d of %d accountants did not answer: %s", len(missing), len(rep.Source.Replicas), strings.Join(missing, " ")))
	}
	if !csv {
		writeJSON(w, http.StatusOK, rep)
		return
	}
	var b bytes.Buffer
	if err := spend.WriteCSV(&b, rep); err != nil {
		h.internal(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8; header=present")
	w.Header().Set("Content-Disposition", `attachment; filename="spend.csv"`)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(b.Bytes())
}

// wantsCSV reads format= and the Accept header: CSV for format=csv or an
// Accept that prefers text/csv to JSON; JSON otherwise. An unknown
// format= is answered 400 (ok false).
func wantsCSV(w http.ResponseWriter, r *http.Request, v url.Values) (csv, ok bool) {
	switch f := v.Get("format"); f {
	case "csv":
		return true, true
	case "json":
		return false, true
	case "":
	default:
		writeError(w, http.StatusBadRequest, "invalid_request", "format %q is not one of json, csv", f)
		return false, false
	}
	best, bestQ := "", -1.0
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if s, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				q = f
			}
		}
		if (mt == "text/csv" || mt == "application/json") && q > bestQ {
			best, bestQ = mt, q
		}
	}
	return best == "text/csv", true
}

func (h *handler) spendError(w http.ResponseWriter, r *http.Request, p principal, err error) {
	var nr *NotReadyError
	var se *spend.ScopeError
	var qe *spend.QueryError
	switch {
	case errors.As(err, &nr):
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "not_ready", "%v", nr)
	case errors.As(err, &se):
		forbidNode(w, p, "node", se.Node, false)
	case errors.As(err, &qe):
		writeError(w, http.StatusBadRequest, "invalid_request", "%v", qe)
	default:
		h.internal(w, r, err)
	}
}

// getSpendLimits serves GET spend/limits.
func (h *handler) getSpendLimits(w http.ResponseWriter, r *http.Request, p principal) {
	if h.SpendLimits == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", "this accountant does not publish its counters")
		return
	}
	if len(r.URL.Query()) > 0 {
		writeError(w, http.StatusBadRequest, "invalid_request", "spend/limits takes no parameters; it lists every budget and quota of the subtree the token may see")
		return
	}
	l, err := h.SpendLimits(p.scope)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// Spend reads a spend report.
func (c *Client) Spend(ctx context.Context, q url.Values) (*spend.Report, error) {
	var out spend.Report
	err := c.do(ctx, http.MethodGet, "spend", q, nil, &out)
	if err == nil && out.GeneratedAt.IsZero() {
		err = c.notAnAnswer(http.MethodGet, "spend", "it has no generated_at")
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// nameKeys fills a report grouped by key with the names of its keys.
func (h *handler) nameKeys(rep *spend.Report) error {
	if !slices.Contains(rep.GroupBy, "key") {
		return nil
	}
	var kids []string
	for _, g := range rep.Groups {
		if k := g.Key["key"]; k != "" && !g.Other {
			kids = append(kids, k)
		}
	}
	names, err := h.DB.KeyNames(kids)
	if err != nil {
		return err
	}
	rep.KeyNames = names
	return nil
}
