package ledger

import "unicode/utf8"

// What one row may hold. A row is a few hundred bytes; these bounds only
// keep a hostile or broken caller (a 7.8 MB model name, a header of
// megabytes) from making one row, and so the batch that carries it, too
// large for any accountant to take: the batch would be refused whole and
// sent again forever, and every later row of its VM with it.
const (
	// MaxFieldBytes is the most bytes of one string member (the model,
	// the endpoint, a key id, a limit id...) a row keeps, and of each
	// string in its lists.
	MaxFieldBytes = 1024
	// MaxListItems is the most entries a list member keeps.
	MaxListItems = 64
	// MaxRowBytes is the most bytes a row's JSON takes once Bound has run
	// (newline not included).
	MaxRowBytes = 64 << 10
)

// Bound holds the row to MaxRowBytes: each string member to MaxFieldBytes
// (cut at a UTF-8 boundary), each list to MaxListItems entries, and then,
// while the row's JSON is still longer than MaxRowBytes, the longest list
// to half its length. Every member it shortened is named in Cut (once, in
// row order). It reports whether it cut anything. Request ids and times
// are never cut: ParseRow refuses a row whose are malformed.
func (r *Row) Bound() bool {
	if r.fits() {
		return false
	}
	r.cutString("kid", &r.KID)
	r.cutString("node", &r.Node)
	r.cutString("endpoint", &r.Endpoint)
	r.cutString("provider", &r.Provider)
	r.cutString("model", &r.Model)
	r.cutString("model_served", &r.Served)
	r.cutString("error_type", &r.ErrorType)
	if f := r.RefusedBy; f != nil && !refFits(f, MaxFieldBytes) {
		c := *f // it may be the caller's
		r.cutRef("refused_by", &c)
		r.RefusedBy = &c
	}
	r.Shadow = r.cutRefs("shadow", r.Shadow)
	r.Breached = r.cutRefs("breached", r.Breached)
	r.Suspended = r.cutStrings("suspended", r.Suspended)
	r.cutString("replica", &r.Replica)
	r.Reconcile = r.cutStrings("reconcile", r.Reconcile)
	r.Holds = r.cutStrings("holds", r.Holds)
	r.cutString("customer", &r.Customer)
	r.Tags = r.cutStrings("tags", r.Tags)
	r.Overflow = r.cutStrings("overflow", r.Overflow)
	if f := r.Fallback; f != nil && max(len(f.LimitID), len(f.Model)) > MaxFieldBytes {
		c := *f // it may be the caller's
		r.cutString("fallback.limit_id", &c.LimitID)
		r.cutString("fallback.model", &c.Model)
		r.Fallback = &c
	}
	var scratch []byte
	for {
		scratch = r.AppendJSON(scratch[:0])
		if len(scratch) <= MaxRowBytes || !r.halveLongestList() {
			break // without lists a row is under 16 KiB
		}
	}
	return len(r.Cut) > 0
}

// short is the longest string fits lets pass: escaped at most 6×
// (\u00XX), 768 bytes.
const short = 128

// fits reports, cheaply, that the row is within every bound as it is:
// short strings and few list entries (most rows), which cannot add up to
// MaxRowBytes however they escape (8 strings and 8 refs of 3 strings,
// each 770 bytes escaped and quoted, and 2 KiB of everything else: 26 KiB).
func (r *Row) fits() bool {
	if max(len(r.KID), len(r.Node), len(r.Endpoint), len(r.Provider), len(r.Model), len(r.Served), len(r.ErrorType), len(r.Replica), len(r.Customer)) > short ||
		len(r.Shadow)+len(r.Breached)+len(r.Suspended)+len(r.Reconcile)+len(r.Holds)+len(r.Tags)+len(r.Overflow) > 7 ||
		r.Fallback != nil && max(len(r.Fallback.LimitID), len(r.Fallback.Model)) > short ||
		r.RefusedBy != nil && !refFits(r.RefusedBy, short) {
		return false
	}
	return stringsFit(r.Suspended, short) && stringsFit(r.Reconcile, short) && stringsFit(r.Holds, short) &&
		stringsFit(r.Tags, short) && stringsFit(r.Overflow, short) &&
		refsFit(r.Shadow, short) && refsFit(r.Breached, short)
}

func refFits(f *Ref, n int) bool { return max(len(f.LimitID), len(f.LimitType), len(f.Node)) <= n }

func refsFit(l []Ref, n int) bool {
	for i := range l {
		if !refFits(&l[i], n) {
			return false
		}
	}
	return true
}

func stringsFit(l []string, n int) bool {
	for _, s := range l {
		if len(s) > n {
			return false
		}
	}
	return true
}

func (r *Row) noteCut(name string) {
	for _, c := range r.Cut {
		if c == name {
			return
		}
	}
	r.Cut = append(r.Cut, name)
}

// cutString cuts *s to MaxFieldBytes at a UTF-8 boundary, noting name when
// it was longer.
func (r *Row) cutString(name string, s *string) {
	if len(*s) > MaxFieldBytes {
		*s = CutField(*s)
		r.noteCut(name)
	}
}

// CutField returns s cut to MaxFieldBytes at a UTF-8 boundary.
func CutField(s string) string {
	if len(s) <= MaxFieldBytes {
		return s
	}
	n := MaxFieldBytes
	for n > MaxFieldBytes-utf8.UTFMax && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (r *Row) cutRef(name string, f *Ref) {
	r.cutString(name, &f.LimitID)
	r.cutString(name, &f.LimitType)
	r.cutString(name, &f.Node)
}

// cutRefs and cutStrings shorten a list, copying it first when an entry
// is cut: the row's lists may share memory with whoever filled them.
func (r *Row) cutRefs(name string, l []Ref) []Ref {
	return cutList(r, name, l, refsFit, (*Row).cutRef)
}

func (r *Row) cutStrings(name string, l []string) []string {
	return cutList(r, name, l, stringsFit, (*Row).cutString)
}

func cutList[T any](r *Row, name string, l []T, fit func([]T, int) bool, cut func(*Row, string, *T)) []T {
	if len(l) > MaxListItems {
		l = l[:MaxListItems:MaxListItems]
		r.noteCut(name)
	}
	if fit(l, MaxFieldBytes) {
		return l
	}
	l = append([]T(nil), l...)
	for i := range l {
		cut(r, name, &l[i])
	}
	return l
}

// halveLongestList cuts the list member with the most entries to half of
// them; false when every list is empty.
func (r *Row) halveLongestList() bool {
	n := max(len(r.Shadow), len(r.Breached), len(r.Suspended), len(r.Reconcile), len(r.Holds))
	switch {
	case n == 0:
		return false
	case len(r.Shadow) == n:
		halve(r, "shadow", &r.Shadow)
	case len(r.Breached) == n:
		halve(r, "breached", &r.Breached)
	case len(r.Suspended) == n:
		halve(r, "suspended", &r.Suspended)
	case len(r.Reconcile) == n:
		halve(r, "reconcile", &r.Reconcile)
	default:
		halve(r, "holds", &r.Holds)
	}
	return true
}

func halve[T any](r *Row, name string, l *[]T) {
	*l = (*l)[:len(*l)/2]
	r.noteCut(name)
}
