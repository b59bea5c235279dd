package accountant

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/accountant/api"
	"github.com/tokentriage/tokentriage/accountant/runtime"
	"github.com/tokentriage/tokentriage/internal/configfile"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// compile loads and compiles the config file, returning every problem. A
// limit pinned at a node of the runtime plane alone is named as such.
func (s *Server) compile() (*govern.Plan, error) {
	p, err := CompileFileRedis(s.opts.ConfigPath, s.opts.Redis)
	var ce *ConfigError
	if errors.As(err, &ce) {
		s.mu.Lock()
		nodes := s.rt.Nodes
		s.mu.Unlock()
		for i, pr := range ce.Problems {
			if pr.Node != "" && slices.Contains(nodes, pr.Node) {
				ce.Problems[i].Message += "; it is a runtime node (created with POST " + api.Prefix + "nodes), and a limit is pinned only at a node declared in governance.tenants " +
					"(the plan compiles from the config alone, in the accountant and in every filter): declare it there, and the declaration stands for the runtime node"
			}
		}
	}
	return p, err
}

// CompileFile loads and compiles a config file. The error lists every
// problem, one per line, each with its config path; a config that decodes
// but does not compile, or does not decode, is a *ConfigError.
func CompileFile(path string) (*govern.Plan, error) { return CompileFileRedis(path, "") }

// CompileFileRedis is CompileFile with the shared Redis at redisAddr
// (--redis HOST:PORT, a redis:// or rediss:// URL, or several HOST:PORT
// separated by commas: the seeds of a cluster or the Sentinels the config
// names) when it is not empty: it replaces shared_state.redis.addr (and
// addrs), or adds shared_state.redis with that address when the file has
// none, before the compile, so the plan every filter syncs says the same.
func CompileFileRedis(path, redisAddr string) (*govern.Plan, error) {
	if path == "" {
		return nil, errors.New("accountant: no config file; pass -c FILE")
	}
	f, err := configfile.Load(path)
	if err != nil {
		var re *configfile.ReadError
		if errors.As(err, &re) {
			return nil, err // it names the file
		}
		var cp config.Problems
		if errors.As(err, &cp) {
			return nil, &ConfigError{Path: path, Problems: govern.FromConfig(cp)}
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if redisAddr != "" && f.Governance != nil {
		g := *f.Governance
		ss := config.SharedState{}
		if g.SharedState != nil {
			ss = *g.SharedState
		}
		r := config.Redis{}
		if ss.Redis != nil {
			r = *ss.Redis
		}
		r.Addr, r.Addrs = redisAddr, nil
		if strings.Contains(redisAddr, ",") {
			r.Addr, r.Addrs = "", strings.Split(redisAddr, ",")
		}
		ss.Redis = &r
		g.SharedState = &ss
		f.Governance = &g
	}
	p, err := govern.Compile(f.Governance)
	if err != nil {
		var gp govern.Problems
		if errors.As(err, &gp) {
			return nil, &ConfigError{Path: path, Compile: true, Problems: gp}
		}
		return nil, fmt.Errorf("%s: governance: compile: %w", path, err)
	}
	return p, nil
}

// noteOrphanKeysLocked logs each live key whose owner is not a node of the
// armed tree (a reload dropped it from tenants, or a runtime node under it
// was deleted): the key still authenticates, and its chain meets only the
// limits of the nodes above it that are still in the tree, so a template
// at the owner's level no longer binds it. The owners are read from
// governance.db (as many as the nodes keys hang from), and at most
// maxOrphanLines keys are named per owner. The set is logged when it
// changes, not at every re-arm. s.mu is held.
func (s *Server) noteOrphanKeysLocked() {
	owners, err := s.db.KeyOwners()
	if err != nil {
		s.log.Error("listing the owners of live keys", "err", err)
		return
	}
	var orphans []string
	for _, o := range owners {
		if o != "" && !s.armed.HasNode(o) {
			orphans = append(orphans, o)
		}
	}
	sig := strings.Join(orphans, "\n")
	if sig == s.orphanKeys {
		return
	}
	s.orphanKeys = sig
	for _, owner := range orphans {
		kids, total, err := s.db.LiveKIDs(owner, maxOrphanLines)
		if err != nil {
			s.log.Error("listing the keys of a node no longer in the tree", "owner", owner, "err", err)
			continue
		}
		for _, kid := range kids {
			s.log.Warn(fmt.Sprintf("key %s is owned by %s, which is no longer a node of the tenancy tree: it still authenticates, and limits templated at that node's level do not bind it; declare the node again in tenants (or create it with POST %snodes), or revoke the key", kid, owner, api.Prefix),
				"kid", kid, "owner", owner)
		}
		if total > len(kids) {
			s.log.Warn(fmt.Sprintf("%d more keys are owned by %s, which is no longer a node of the tenancy tree (GET %skeys?owner=%s lists them)", total-len(kids), owner, api.Prefix, owner),
				"owner", owner, "keys", total)
		}
	}
}

// maxOrphanLines bounds the keys named per owner that left the tree.
const maxOrphanLines = 20

// ConfigError is a config file that does not decode (Compile false) or
// does not compile: every problem, each with its config path. A boot
// failure prints each problem on a line of its own, as the seeds show it:
//
//	Error: governance: compile limits: govern: limit "team_tpm": tpm limit ...
type ConfigError struct {
	Path     string
	Compile  bool
	Problems govern.Problems
}

// Error renders the file, the stage and every problem, one per line.
func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	stage := ""
	if e.Compile {
		stage = "governance: compile: "
	}
	return fmt.Sprintf("%s: %s%d problem(s):\n  %s", e.Path, stage, len(lines), strings.Join(lines, "\n  "))
}

// Armed returns the plan armed now with the runtime plane.
func (s *Server) Armed() *govern.Armed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.armed
}

func (s *Server) planHash() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.plan.Hash
}

// Reload is ReloadBy(runtime.WhoSignal): the reload SIGHUP asks for.
func (s *Server) Reload() error { return s.ReloadBy(runtime.WhoSignal) }

// ReloadBy re-reads and compiles the config file for who (an admin of the
// management API, or runtime.WhoSignal). On success the new plan is armed,
// counters are re-derived, and filters pick the plan up at their next sync.
// On failure every problem is logged and returned, and the plan in force
// stays. Either way the reload is written to the audit log with who, the
// plan hash before and after, and the result.
func (s *Server) ReloadBy(who string) error {
	old := s.planHash()
	p, err := s.compile()
	if err != nil {
		s.metrics.reloads.WithLabelValues("rejected").Inc()
		s.log.Error("config reload rejected; the plan in force stays", "config", s.opts.ConfigPath, "who", who, "err", err.Error())
		s.auditReload(who, old, old, runtime.ReloadRejected, err.Error())
		return err
	}
	now := s.now()
	s.mu.Lock()
	old = s.plan.Hash
	s.plan = p
	alerts := s.armLocked(now, true)
	s.mu.Unlock()
	s.metrics.reloads.WithLabelValues("applied").Inc()
	s.log.Info("config reloaded", "config", s.opts.ConfigPath, "who", who, "plan", p.Hash, "previous", old, "limits", len(p.Limits))
	s.auditReload(who, old, p.Hash, runtime.ReloadApplied, "")
	s.alerts.emit(alerts)
	return nil
}

// auditReload writes a reload to the audit log; a failed write is logged
// and does not undo the reload.
func (s *Server) auditReload(who, before, after, result, problem string) {
	stamp := runtime.Stamp{Who: who, At: s.now()}
	b := runtime.ConfigReload{Config: s.opts.ConfigPath, Plan: before}
	a := runtime.ConfigReload{Config: s.opts.ConfigPath, Plan: after, Result: result, Error: problem}
	if s.mirror != nil {
		// The audit log is the owner's: the mirror sends it the entry.
		s.mirror.recordReload(mirrorReload{Who: stamp.Who, At: stamp.At, Before: b, After: a})
		return
	}
	defer s.wakePulls()
	err := s.db.RecordReload(stamp, b, a)
	if err != nil {
		s.log.Error("writing the config reload to the audit log", "err", err)
	}
}

// Changed is called after a runtime-plane write (the management API): the
// runtime plane is re-read, the plan re-armed, counters re-derived, and the
// new keys and runtime versions are served at the next sync.
func (s *Server) Changed() {
	defer s.wakePulls()
	if err := s.refreshRuntime(); err != nil {
		s.log.Error("reading the runtime plane after a write", "err", err)
		return
	}
	now := s.now()
	s.mu.Lock()
	alerts := s.armLocked(now, true)
	s.mu.Unlock()
	s.alerts.emit(alerts)
}

// refreshRuntime reads the runtime plane (the nodes and overrides the
// accountant arms with) and the position of its change feed from
// governance.db; the key table stays there (the sync feed and the API read
// it a page or a key at a time).
func (s *Server) refreshRuntime() error {
	_, rt, err := s.db.Runtime()
	if err != nil {
		return fmt.Errorf("accountant: %w", err)
	}
	feed, err := s.db.FeedCursor()
	if err != nil {
		return fmt.Errorf("accountant: %w", err)
	}
	adjs, err := s.db.Adjustments(s.now())
	if err != nil {
		return fmt.Errorf("accountant: %w", err)
	}
	s.adjust.set(s.localResets(adjs))
	s.mu.Lock()
	s.feed = feed
	s.rt = rt
	s.mu.Unlock()
	return nil
}

// armLocked arms the current plan with the current runtime plane and
// re-derives the counters; s.mu is held. Problems of the runtime plane
// (a colliding node, a dropped override) are logged, each with its reason.
func (s *Server) armLocked(now time.Time, live bool) []coreAlert {
	armed, probs := s.plan.Arm(s.rt)
	for _, p := range probs {
		s.log.Warn("runtime plane: "+p.Message, "path", p.Path)
	}
	s.armed = armed
	s.noteArmedLocked()
	s.noteOrphanKeysLocked()
	alerts, err := s.core.Arm(now, armed)
	if err != nil {
		s.log.Error("re-deriving counters after arming", "err", err)
	}
	if s.core.NeedsHistory() {
		// A period in a time zone new to the aggregates, or one reaching
		// further back than they do: the ledger brings the rows.
		if err := s.backfillLocked(now); err != nil {
			s.log.Error("reading the ledger for the plan's new periods; their counters count from the rows the accountant kept", "err", err)
		}
		if alerts, err = s.core.Arm(now, armed); err != nil {
			s.log.Error("re-deriving counters after arming", "err", err)
		}
	}
	if !live {
		return nil
	}
	return alerts
}
