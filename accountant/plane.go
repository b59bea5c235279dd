package accountant

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"time"

	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// One runtime plane per fleet (RATIONALE.md#why-one-owner-and-mirrors): the
// accountant started without --control owns keys, nodes, overrides,
// delegated admins and the audit log; every accountant started with
// --control URL mirrors them by pulling PlanePath from the owner. A pull
// names the plane version the mirror holds and waits (a long poll) until
// the owner's moves, so a write reaches every mirror at once; it reports
// how far the mirror's own filters got (their live count and, per stored
// override, how many hold it), and the answer brings the whole fleet's, so
// an override reads in_force, on any accountant, only once every live
// replica of the fleet holds it.

// PlanePath is where an owner serves its runtime plane to mirrors. It takes
// the internal token, or the admin token.
const PlanePath = "/tt/internal/v1/plane"

// PlaneReloadPath is where a mirror sends the owner the audit entry of its
// own config reload (the audit log is the owner's). It takes the internal
// token, or the admin token.
const PlaneReloadPath = "/tt/internal/v1/plane/reload"

// mirrorReload is a mirror's config reload, as it sends it to the owner.
type mirrorReload struct {
	Mirror string               `json:"mirror"`
	Who    string               `json:"who"`
	At     time.Time            `json:"at"`
	Before runtime.ConfigReload `json:"before"`
	After  runtime.ConfigReload `json:"after"`
}

// Bounds of a mirror's reload report: its body, its fields, and how many
// the owner writes a minute (every accountant of a fleet holds the
// internal token, and the audit log is kept for good).
const (
	maxReloadBody      = 16 << 10
	maxReloadField     = 1024
	maxReloadError     = 2048
	MaxReloadsByMinute = 20
)

// serveMirrorReload writes a mirror's config reload to the audit log: the
// config is named as the mirror's (mirror:path), and the entry reaches
// every mirror with its next copy. The entry is the owner's own: who is
// the mirror (mirror:<name>) and the time the owner's clock; who the
// mirror says asked for the reload, and when, are kept in the entry as
// reported. Nothing a caller sends becomes an entry's who or time.
func (s *Server) serveMirrorReload(w http.ResponseWriter, r *http.Request) {
	if !s.auth.check(w, r, true) {
		return
	}
	if s.mirror != nil {
		writeError(w, http.StatusConflict, fmt.Sprintf("this accountant mirrors the runtime plane of %s, which keeps the audit log: point --control at it", s.mirror.owner))
		return
	}
	var rec mirrorReload
	err := readJSON(w, r, maxReloadBody, &rec)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("plane: a reload report is at most %d KiB", maxReloadBody>>10))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "plane: the reload is not a JSON body like {\"mirror\":\"host:port\",\"who\":\"admin\",\"at\":\"…\",\"before\":{…},\"after\":{…}}: "+err.Error())
		return
	case rec.Mirror == "" || len(rec.Mirror) > maxMemberName || rec.Who == "" || rec.At.IsZero():
		writeError(w, http.StatusBadRequest, fmt.Sprintf("plane: a reload names its mirror (1 to %d characters), who asked for it, and when", maxMemberName))
		return
	case !reloadFieldsOK(rec):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("plane: a reload's who, configs and plans are printable text of at most %d bytes, its results applied or rejected", maxReloadField))
		return
	}
	if !s.reloadAllowed() {
		w.Header().Set("Retry-After", "60")
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("plane: the owner writes at most %d mirror reloads a minute to the audit log; send it again in a minute", MaxReloadsByMinute))
		return
	}
	rec.Before.Config = rec.Mirror + ":" + rec.Before.Config
	rec.After.Config = rec.Mirror + ":" + rec.After.Config
	if len(rec.After.Error) > maxReloadError {
		rec.After.Error = rec.After.Error[:maxReloadError] + "…"
	}
	rec.Before.Error, rec.Before.ReportedBy, rec.Before.ReportedAt = "", "", ""
	rec.After.ReportedBy, rec.After.ReportedAt = rec.Who, rec.At.UTC().Format(time.RFC3339Nano)
	if err := s.db.RecordReload(runtime.Stamp{Who: "mirror:" + rec.Mirror, At: s.now()}, rec.Before, rec.After); err != nil {
		writeError(w, http.StatusServiceUnavailable, "plane: "+err.Error())
		return
	}
	s.wakePulls()
	w.WriteHeader(http.StatusNoContent)
}

// reloadFieldsOK checks a mirror reload's fields other than its error
// (which is cut to maxReloadError).
func reloadFieldsOK(rec mirrorReload) bool {
	for _, f := range []string{rec.Mirror, rec.Who, rec.Before.Config, rec.After.Config, rec.Before.Plan, rec.After.Plan} {
		if len(f) > maxReloadField {
			return false
		}
		for _, c := range f {
			if c < ' ' || c == 0x7f {
				return false
			}
		}
	}
	for _, r := range []string{rec.Before.Result, rec.After.Result} {
		if r != "" && r != runtime.ReloadApplied && r != runtime.ReloadRejected {
			return false
		}
	}
	return true
}

// reloadAllowed counts a mirror reload against MaxReloadsByMinute.
func (s *Server) reloadAllowed() bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.reloadWindow) >= time.Minute {
		s.reloadWindow, s.reloadCount = now, 0
	}
	if s.reloadCount >= MaxReloadsByMinute {
		return false
	}
	s.reloadCount++
	return true
}

// MaxPlaneWait bounds how long the owner holds a pull that is current.
const MaxPlaneWait = 10 * time.Second

// maxPullBytes bounds a pull's body (a report of overrides held).
const maxPullBytes = 8 << 20

// planePull is the body of a pull.
type planePull struct {
	// Mirror names the mirror (its host and accountant address); its
	// report replaces the one it sent before.
	Mirror string `json:"mirror"`
	// Accountant is the base URL the fleet's other accountants reach the
	// mirror at ("" when it has none to announce).
	Accountant string `json:"accountant,omitempty"`
	// Have is the plane version the mirror holds ("" for none).
	Have string `json:"have"`
	// HaveFeed is the mirror's cursor into the owner's change feed: a
	// copy then brings keys, nodes and overrides as the changes since
	// (runtime.Plane.Since). An owner of an earlier release ignores it and
	// sends every row.
	HaveFeed string `json:"have_feed,omitempty"`
	// WaitMS: when Have is current, answer when the plane moves, or after
	// this long (at most MaxPlaneWait).
	WaitMS int64 `json:"wait_ms"`
	// Rollout is how far the mirror's own filters got.
	Rollout rolloutReport `json:"rollout"`
	// Seen is the hash of the fleet rollout the mirror holds (the last
	// answer's): a pull answers at once when the fleet's differs.
	Seen string `json:"seen,omitempty"`
}

// rolloutReport says how many filter replicas are live and, per stored
// override (limit, node, amount), how many of them hold it.
type rolloutReport struct {
	Live    int            `json:"live"`
	Holding []heldOverride `json:"holding,omitempty"`
}

type heldOverride struct {
	LimitID  string `json:"limit_id"`
	Node     string `json:"node"`
	Amount   int64  `json:"amount"`
	Replicas int    `json:"replicas"`
}

// planeAnswer is the answer to a pull: the owner's plane version, a copy
// of the plane when the mirror's is not current, and the fleet's rollout.
type planeAnswer struct {
	Version string         `json:"version"`
	Plane   *runtime.Plane `json:"plane,omitempty"`
	Rollout rolloutReport  `json:"rollout"`
	// Accountants are the fleet's accountants: the owner and every one
	// that pulled within MemberMemory.
	Accountants []member `json:"accountants,omitempty"`
}

// mirrorSeen is what the owner keeps of a mirror: when it last pulled and
// the report it sent.
type mirrorSeen struct {
	seen    time.Time
	live    int
	holding map[heldKey]int
}

type heldKey struct {
	limit, node string
	amount      int64
}

// pullWatch returns a channel closed at the next change of the plane or of
// the fleet's rollout.
func (s *Server) pullWatch() <-chan struct{} {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.watch == nil {
		s.watch = make(chan struct{})
	}
	return s.watch
}

// wakePulls wakes the pulls waiting at this owner: the plane moved, or a
// replica or mirror reported holding other versions. Each compares what it
// holds with what is current and answers, or waits on.
func (s *Server) wakePulls() {
	s.watchMu.Lock()
	if s.watch != nil {
		close(s.watch)
		s.watch = nil
	}
	s.watchMu.Unlock()
}

// servePlane answers a mirror's pull (owner only).
func (s *Server) servePlane(w http.ResponseWriter, r *http.Request) {
	if !s.auth.check(w, r, true) {
		return
	}
	if s.mirror != nil {
		var pull planePull
		body, _ := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPullBytes))
		if json.Unmarshal(body, &pull) == nil && pull.Mirror == s.name {
			writeError(w, http.StatusConflict, fmt.Sprintf("--control %s names this accountant itself: a mirror's --control must name the owner of the runtime plane, the accountant started without --control (or start this one without --control to make it the owner)", s.mirror.owner))
			return
		}
		writeError(w, http.StatusConflict, fmt.Sprintf("this accountant mirrors the runtime plane of %s; a mirror pulls from the owner: point --control at %s (the accountant started without --control)", s.mirror.owner, s.mirror.owner))
		return
	}
	// Members this build does not know are ignored, so a mirror of a
	// newer release can pull from an older owner during an upgrade (the
	// copy itself is refused across schema versions).
	var pull planePull
	if err := readJSON(w, r, maxPullBytes, &pull); err != nil {
		writeError(w, http.StatusBadRequest, "plane: the pull is not a JSON body like {\"mirror\":\"host:port\",\"have\":\"\",\"wait_ms\":10000}: "+err.Error())
		return
	}
	if pull.Mirror == "" || len(pull.Mirror) > 256 {
		writeError(w, http.StatusBadRequest, "plane: mirror must name the pulling accountant (1 to 256 characters)")
		return
	}
	s.noteMirror(pull)
	wait := min(time.Duration(pull.WaitMS)*time.Millisecond, MaxPlaneWait)
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		moved := s.pullWatch() // before reading, so no change is missed
		version, err := s.db.PlaneVersion()
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "plane: "+err.Error())
			return
		}
		fleet := s.fleetReport()
		if version != pull.Have || fleet.hash() != pull.Seen || timer == nil {
			s.answerPlane(w, pull.Have, pull.HaveFeed, version, fleet)
			return
		}
		select {
		case <-moved:
		case <-timer:
			timer = nil
		case <-s.stopping:
			timer = nil
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) answerPlane(w http.ResponseWriter, have, haveFeed, version string, fleet rolloutReport) {
	ans := planeAnswer{Version: version, Rollout: fleet, Accountants: s.membersAnswer()}
	if have != version {
		p, err := s.db.PlaneSince(have, haveFeed)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "plane: "+err.Error())
			return
		}
		ans.Plane, ans.Version = &p, p.Version()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(ans)
}

// noteMirror records a mirror's pull and its report.
func (s *Server) noteMirror(p planePull) {
	m := mirrorSeen{seen: s.now(), live: max(p.Rollout.Live, 0), holding: map[heldKey]int{}}
	// An address that is not a base URL is listed as none (the report
	// then says the accountant announced none it can be reached at).
	addr, err := controlURL(p.Accountant)
	if err != nil || len(addr) > 1024 {
		addr = ""
	}
	if !s.members.note(member{Name: p.Mirror, Accountant: addr, Seen: m.seen}) {
		s.fleetFull(p.Mirror)
	}
	for _, h := range p.Rollout.Holding {
		m.holding[heldKey{h.LimitID, h.Node, h.Amount}] = max(h.Replicas, 0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, known := s.mirrors[p.Mirror]; !known || prev.live != m.live || !maps.Equal(prev.holding, m.holding) {
		defer s.wakePulls() // the fleet's rollout changed: the others hear of it now
	}
	if _, known := s.mirrors[p.Mirror]; !known && len(s.mirrors) >= MaxReplicas {
		var oldest string
		for id, o := range s.mirrors {
			if oldest == "" || o.seen.Before(s.mirrors[oldest].seen) {
				oldest = id
			}
		}
		delete(s.mirrors, oldest)
	}
	s.mirrors[p.Mirror] = m
}

// fleetReport is the fleet's rollout as the owner sees it: its own filters
// and every mirror that pulled within LivenessWindow, per stored override.
func (s *Server) fleetReport() rolloutReport { return s.heldReport(s.Rollout(), true) }

// hash identifies a report, so a mirror can say which it holds.
func (r rolloutReport) hash() string {
	b, _ := json.Marshal(r)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ownerStatus is the owner's line in /healthz: its plane version and the
// mirrors that pulled within LivenessWindow.
func (s *Server) ownerStatus() string {
	v, err := s.db.PlaneVersion()
	if err != nil {
		v = "unreadable (" + err.Error() + ")"
	}
	now := s.now()
	s.mu.Lock()
	n := 0
	for _, m := range s.mirrors {
		if now.Sub(m.seen) <= LivenessWindow {
			n++
		}
	}
	s.mu.Unlock()
	return fmt.Sprintf("runtime plane: owner; version %s; %d mirror(s) pulled within %s", v, n, LivenessWindow)
}

// mirrorsLocked sums the reports of the live mirrors; s.mu is held.
func (s *Server) mirrorsLocked(now time.Time) (live int, holding func(govern.Override) int) {
	var fresh []mirrorSeen
	for id, m := range s.mirrors {
		switch age := now.Sub(m.seen); {
		case age <= LivenessWindow:
			live += m.live
			fresh = append(fresh, m)
		case age > 10*LivenessWindow:
			delete(s.mirrors, id)
		}
	}
	return live, func(o govern.Override) int {
		n := 0
		for _, m := range fresh {
			n += m.holding[heldKey{o.LimitID, o.Node, o.Amount}]
		}
		return n
	}
}

// checkPlaneRole checks that governance.db fits the role the options give
// this accountant: a mirror's must be empty or a mirror already (mirroring
// replaces it), and an owner's must not be a mirror's copy unless
// Options.Promote says to take it over.
func (s *Server) checkPlaneRole(owner string) error {
	if owner != "" {
		err := s.db.CheckMirror()
		switch {
		case errors.Is(err, runtime.ErrOwnPlane):
			return fmt.Errorf("accountant: --control %s: %v (governance.db under %s); a mirror replaces it with the owner's copy: move governance.db aside, or start this accountant without --control as the owner of what it holds", owner, err, s.opts.DataDir)
		case err != nil:
			return fmt.Errorf("accountant: %w", err)
		}
		return nil
	}
	was, err := s.db.MirrorOf()
	if err != nil {
		return fmt.Errorf("accountant: %w", err)
	}
	if was == "" {
		return nil
	}
	if !s.opts.Promote {
		return fmt.Errorf("accountant: governance.db under %s mirrors another accountant's runtime plane (database %s); start with --control URL naming its owner to keep mirroring it, or with --promote to make this accountant the owner of the copy it holds", s.opts.DataDir, was)
	}
	if _, err := s.db.Promote(); err != nil {
		return fmt.Errorf("accountant: %w", err)
	}
	s.log.Warn("runtime plane: promoted: this accountant owns the copy it mirrored; its writes no longer reach the old owner, so point every mirror's --control here", "was_mirror_of", was)
	return nil
}
