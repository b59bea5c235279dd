package accountant

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tokentriage/tokentriage/accountant/spend"
)

// A fleet's spend report (RATIONALE.md, "Why does a fleet report add up
// partial reports?"): every accountant announces the address the others
// reach it at (Options.Advertise) with its pulls of the runtime plane,
// authenticated by the internal token; the owner lists every accountant
// that announced itself in its answers, so each accountant of the fleet
// knows the others. A report asks each for its share over
// SpendPartialPath, with the internal token, and adds them up.

// SpendPartialPath is where an accountant answers its share of a fleet's
// spend report.
const SpendPartialPath = "/tt/internal/v1/spend/partial"

// MemberMemory is how long the owner lists an accountant after its last
// pull: a fleet report names it as not answering until then.
const MemberMemory = 24 * time.Hour

// spendPeerTimeout bounds one round of a fleet report per accountant.
const spendPeerTimeout = 15 * time.Second

// maxPartialRequest bounds the body of a share's request (the kept keys of
// a top= report).
const maxPartialRequest = 8 << 20

// MaxPartialAnswer bounds another accountant's share of a report as it is
// read: past it the share is left out, named as too large (a report that
// large is narrowed with top=, fewer group_by dims or a shorter range).
const MaxPartialAnswer = 64 << 20

// MaxFleetAccountants bounds the accountants the owner lists (each pull
// announces one, with the internal token). Past it an accountant not yet
// listed is not, until a listed one has gone MemberMemory unheard: those
// listed are never pushed out by new names.
const MaxFleetAccountants = 256

// maxMemberName bounds an announced accountant name.
const maxMemberName = 256

// member is an accountant of the fleet as the owner lists it.
type member struct {
	// Name is the accountant's name (its host and listen address);
	// Accountant the base URL it announced, "" when it announced none.
	Name       string    `json:"name"`
	Accountant string    `json:"accountant,omitempty"`
	Seen       time.Time `json:"seen"`
	// Owner marks the owner itself.
	Owner bool `json:"owner,omitempty"`
}

// fleetMembers is what an accountant knows of the others: on the owner,
// every mirror that pulled within MemberMemory; on a mirror, the owner's
// last list.
type fleetMembers struct {
	mu      sync.Mutex
	members map[string]member // by name
}

// note lists m, or reports false when the list is full (MaxFleetAccountants
// heard from within MemberMemory) and m is not on it, or m's name is not
// one (empty or past maxMemberName bytes).
func (f *fleetMembers) note(m member) bool {
	if m.Name == "" || len(m.Name) > maxMemberName {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.members == nil {
		f.members = map[string]member{}
	}
	if _, known := f.members[m.Name]; !known && len(f.members) >= MaxFleetAccountants {
		for n, o := range f.members {
			if m.Seen.Sub(o.Seen) > MemberMemory {
				delete(f.members, n)
			}
		}
		if len(f.members) >= MaxFleetAccountants {
			return false
		}
	}
	f.members[m.Name] = m
	return true
}

func (f *fleetMembers) replace(ms []member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = map[string]member{}
	for i, m := range ms {
		if i > MaxFleetAccountants {
			break // the owner, and the most it lists
		}
		f.members[m.Name] = m
	}
}

// list is the members heard from within MemberMemory of now, by name.
func (f *fleetMembers) list(now time.Time) []member {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]member, 0, len(f.members))
	for n, m := range f.members {
		if now.Sub(m.Seen) > MemberMemory {
			delete(f.members, n)
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// advertiseURL is the base URL this accountant announces: Options.Advertise,
// or http:// and the listen address when it names a host (not a wildcard).
func advertiseURL(opts Options) (string, error) {
	if opts.Advertise != "" {
		u, err := url.Parse(opts.Advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
			return "", fmt.Errorf("accountant: --advertise %q is not this accountant's base URL as the fleet's other accountants reach it, like http://10.0.0.6:8791", opts.Advertise)
		}
		return strings.TrimRight(u.String(), "/"), nil
	}
	host, _, err := net.SplitHostPort(opts.Listen)
	if err != nil || host == "" {
		return "", nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "", nil
	}
	return "http://" + opts.Listen, nil
}

// newInstanceID names this accountant process in its shares, so a fleet
// report counts an accountant reached under two addresses once.
func newInstanceID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ownName is this accountant's name in the owner's list.
func (s *Server) ownName() string {
	if s.mirror != nil {
		return s.mirror.name
	}
	return s.name
}

// membersAnswer is the owner's list for a pull's answer: itself and every
// accountant that pulled within MemberMemory.
func (s *Server) membersAnswer() []member {
	now := s.now()
	out := []member{{Name: s.name, Accountant: s.advertise, Seen: now, Owner: true}}
	return append(out, s.members.list(now)...)
}

// spendPeers are the accountants a fleet report asks: this one, and every
// other the fleet knows of. A single accountant has no others.
func (s *Server) spendPeers() []spend.Peer {
	self := spend.Peer{Accountant: s.advertise, Self: true, Ask: func(_ context.Context, req spend.PartialRequest) (*spend.Partial, error) {
		return s.spendPartial(req)
	}}
	if self.Accountant == "" {
		self.Accountant = s.ownName()
	}
	peers := []spend.Peer{self}
	seen := map[string]bool{s.ownName(): true}
	if s.advertise != "" {
		seen[s.advertise] = true
	}
	add := func(m member, addr string) {
		if seen[m.Name] {
			return
		}
		seen[m.Name] = true
		p := spend.Peer{Accountant: addr, LastSeen: m.Seen}
		if addr == "" {
			p.Accountant = m.Name
			p.Ask = func(context.Context, spend.PartialRequest) (*spend.Partial, error) {
				return nil, errors.New("it announced no address the others can reach it at; start it with --advertise URL (or a --listen/--accountant-listen naming its host)")
			}
		} else {
			if seen[addr] {
				// Another accountant announced this address too (a
				// loopback address on separate hosts, say): listed under
				// its name, and the answer says who is really there.
				p.Accountant = m.Name
			}
			seen[addr] = true
			want := m.Name
			if m.Seen.IsZero() {
				want = "" // the owner before its first list: no name to check
			}
			p.Ask = func(ctx context.Context, req spend.PartialRequest) (*spend.Partial, error) {
				part, err := s.askPartial(ctx, addr, req)
				if err == nil && want != "" && part.Name != want {
					return nil, fmt.Errorf("it announced %s, where accountant %q answers, not it (a loopback address on separate hosts, or an address another accountant announced too?); start it with --advertise URL naming its own host", addr, part.Name)
				}
				return part, err
			}
		}
		peers = append(peers, p)
	}
	now := s.now()
	if s.mirror != nil {
		// The owner, at the address this accountant pulls from, whatever
		// it announced.
		var owner member
		for _, m := range s.members.list(now) {
			if m.Owner {
				owner = m
			}
		}
		if owner.Name == "" {
			owner.Name = "owner" // no list from it yet: asked without a name check
		}
		add(owner, s.mirror.owner)
		seen[owner.Accountant] = true
	}
	for _, m := range s.members.list(now) {
		if !m.Owner {
			add(m, m.Accountant)
		}
	}
	return peers
}

// askPartial asks the accountant at base for its share.
func (s *Server) askPartial(ctx context.Context, base string, preq spend.PartialRequest) (*spend.Partial, error) {
	body, err := json.Marshal(preq)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, spendPeerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+SpendPartialPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.opts.InternalToken)
	resp, err := s.peerClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode == http.StatusBadRequest {
			return nil, &spend.QueryError{Problems: []string{errorMessage(b)}}
		}
		return nil, fmt.Errorf("it answered %d: %s", resp.StatusCode, errorMessage(b))
	}
	// Decoded as it arrives, never past MaxPartialAnswer: a share is
	// held once, not as bytes and again as values.
	in := &capReader{r: resp.Body, left: MaxPartialAnswer}
	var p spend.Partial
	if err := json.NewDecoder(in).Decode(&p); err != nil {
		if in.over {
			s.metrics.shareRefused.Inc()
			return nil, fmt.Errorf("its answer is larger than %d MiB, the most a share may be; narrow the report (top=, fewer group_by dims, a shorter range)", MaxPartialAnswer>>20)
		}
		return nil, fmt.Errorf("its answer is not a share of a report: %w", err)
	}
	return &p, nil
}

// capReader reads at most left bytes from r, then fails, noting over.
type capReader struct {
	r    io.Reader
	left int64
	over bool
}

func (c *capReader) Read(b []byte) (int, error) {
	if c.left <= 0 {
		c.over = true
		return 0, errors.New("answer too large")
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, err
}

// fleetFull says, at most once a minute, that the owner's list of
// accountants is full and name was not listed.
func (s *Server) fleetFull(name string) {
	s.metrics.fleetRefused.Inc()
	now := s.now()
	s.mu.Lock()
	due := now.Sub(s.fleetFullLogged) >= time.Minute
	if due {
		s.fleetFullLogged = now
	}
	s.mu.Unlock()
	if due {
		s.log.Warn("fleet: an accountant announced itself, but the owner lists the most it does (MaxFleetAccountants, each heard from within a day); it is left out of fleet spend reports until one goes quiet. A flood of made-up names is someone holding the internal token",
			"name", truncateName(name), "max", MaxFleetAccountants)
	}
}

func truncateName(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// plausibility is what a fleet report holds the other accountants' shares
// to: nodes of the armed tree, dollars within the catalog's dearest rate.
func (s *Server) plausibility() spend.Plausibility {
	armed := s.Armed()
	var most int64
	for _, m := range s.pricing.Models() {
		most = max(most, m.Rates.Input, m.Rates.Output, m.Rates.Cached)
	}
	return spend.Plausibility{
		KnownNode: func(node string) bool {
			return armed != nil && armed.HasNode(node)
		},
		MaxNanosPerToken: (most + 999_999) / 1_000_000,
		OnRefused: func(accountant string, err error) {
			s.metrics.shareRefused.Inc()
			s.log.Warn("fleet spend report: another accountant's share was left out; someone holding the internal token may be announcing it", "accountant", accountant, "err", err)
		},
	}
}

// spendPartial is this accountant's share of a fleet report.
func (s *Server) spendPartial(req spend.PartialRequest) (*spend.Partial, error) {
	if err := s.spendNotReady(); err != nil {
		return nil, err
	}
	p, err := s.spend.Partial(req)
	if err != nil {
		return nil, err
	}
	p.Instance, p.Name = s.instance, s.ownName()
	return p, nil
}

// servePartial answers POST SpendPartialPath (internal token): this
// accountant's share of a report another accountant of the fleet makes.
// The scope in the request confines the share to the caller's subtree,
// as the asking accountant authenticated it.
func (s *Server) servePartial(w http.ResponseWriter, r *http.Request) {
	var req spend.PartialRequest
	if err := readJSON(w, r, maxPartialRequest, &req); err != nil {
		writeError(w, http.StatusBadRequest, "spend: the request is not a share request: "+err.Error())
		return
	}
	p, err := s.spendPartial(req)
	if err != nil {
		if spend.IsQueryError(err) {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		var se *spend.ScopeError
		if errors.As(err, &se) {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(p)
}
