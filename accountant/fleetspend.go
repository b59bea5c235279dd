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

func (f *fleetMembers) note(m member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.members == nil {
		f.members = map[string]member{}
	}
	if _, known := f.members[m.Name]; !known && len(f.members) >= MaxReplicas {
		var oldest string
		for n, o := range f.members {
			if oldest == "" || o.Seen.Before(f.members[oldest].Seen) {
				oldest = n
			}
		}
		delete(f.members, oldest)
	}
	f.members[m.Name] = m
}

func (f *fleetMembers) replace(ms []member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = map[string]member{}
	for i, m := range ms {
		if i >= MaxReplicas {
			break
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
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusBadRequest:
		return nil, &spend.QueryError{Problems: []string{errorMessage(b)}}
	default:
		return nil, fmt.Errorf("it answered %d: %s", resp.StatusCode, errorMessage(b))
	}
	var p spend.Partial
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("its answer is not a share of a report: %w", err)
	}
	return &p, nil
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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPartialRequest))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
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
