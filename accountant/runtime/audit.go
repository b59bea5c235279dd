package runtime

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tokentriage/tokentriage/shared/govern"
)

// AuditEntry is one write, as the audit log keeps it. Before and After are
// the JSON views of the target (null when it did not exist before, or no
// longer exists after). Node is the tree node the write concerns (the node
// itself, a key's owner, an override's node, an admin's scope), so a
// delegated admin can read the log of their own subtree.
type AuditEntry struct {
	Seq    int64           `json:"seq"`
	At     time.Time       `json:"at"`
	Who    string          `json:"who"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Node   string          `json:"node"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// The audit actions.
const (
	ActionNodeCreate     = "node.create"
	ActionNodeDelete     = "node.delete"
	ActionKeyMint        = "key.mint"
	ActionKeyRevoke      = "key.revoke"
	ActionKeyRotate      = "key.rotate"
	ActionOverridePut    = "override.put"
	ActionOverrideDelete = "override.delete"
	ActionAdminCreate    = "admin.create"
	ActionAdminRevoke    = "admin.revoke"
	ActionConfigReload   = "config.reload"
	// ActionAPIRefused is a management API call refused 401 or 403.
	ActionAPIRefused    = "api.refused"
	ActionCounterReset  = "counter.reset"
	ActionCounterCredit = "counter.credit"
)

// WhoSignal is the Who of a config reload a signal (SIGHUP) asked for.
const WhoSignal = "signal"

// The results of a config reload.
const (
	ReloadApplied  = "applied"
	ReloadRejected = "rejected"
)

// ConfigReload is the before or after view of a config reload in the audit
// log: the config file and the hash of the plan armed from it; after also
// holds the result and, when the config was rejected, why.
type ConfigReload struct {
	Config string `json:"config"`
	Plan   string `json:"plan"`
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
	// ReportedBy and ReportedAt are, for a mirror's reload written by the
	// owner (whose entry names the mirror as who, and its own clock), who
	// the mirror says asked for it and when, as the mirror reported them.
	ReportedBy string `json:"reported_by,omitempty"`
	ReportedAt string `json:"reported_at,omitempty"`
}

// RecordReload writes a config reload, applied or rejected, to the audit
// log under the __global node (the reload changes every limit, so only an
// admin of the whole tree sees it). before holds the plan hash in force
// before, after the one in force after (the same hash when rejected).
func (db *DB) RecordReload(s Stamp, before, after ConfigReload) error {
	return db.write(func(*sql.Tx) (audit, []group, error) {
		return audit{Stamp: s, Action: ActionConfigReload, Target: before.Config, Node: govern.Global, Before: before, After: after}, nil, nil
	})
}

// Refusal is the after view of a refused management API call in the
// audit log.
type Refusal struct {
	Status int    `json:"status"`
	Reason string `json:"reason"`
	Remote string `json:"remote,omitempty"`
	// Token is a fingerprint of a bearer token that opened nothing
	// (sha256: and 8 hex digits of its hash), never the token.
	Token string `json:"token,omitempty"`
}

// RecordRefusal writes a refused management API call to the audit log:
// who made it ("unauthenticated" when its token opened nothing), the
// route as target, under node (a delegated admin's scope, or __global).
// A mirror, whose audit log is its owner's copy, answers ErrMirror.
func (db *DB) RecordRefusal(s Stamp, target, node string, r Refusal) error {
	return db.write(func(*sql.Tx) (audit, []group, error) {
		return audit{Stamp: s, Action: ActionAPIRefused, Target: target, Node: node, After: r}, nil, nil
	})
}

// audit is the audit row a write produces.
type audit struct {
	Stamp
	Action, Target, Node string
	Before, After        any // nil for none
}

func (a audit) insert(tx *sql.Tx) error {
	before, err := jsonOrNull(a.Before)
	if err != nil {
		return fmt.Errorf("runtime: audit %s %s: %w", a.Action, a.Target, err)
	}
	after, err := jsonOrNull(a.After)
	if err != nil {
		return fmt.Errorf("runtime: audit %s %s: %w", a.Action, a.Target, err)
	}
	_, err = tx.Exec(`INSERT INTO audit (at, who, action, target, node, before, after) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		fmtTime(a.At), a.Who, a.Action, a.Target, a.Node, before, after)
	if err != nil {
		return fmt.Errorf("runtime: audit %s %s: %w", a.Action, a.Target, err)
	}
	return nil
}

func jsonOrNull(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// MaxAuditPage is the largest page Audit returns.
const MaxAuditPage = 1000

// Audit returns up to limit entries with a sequence number above after, in
// order. With a non-empty scope only the entries whose node is scope or
// below it are returned. limit is clamped to [1, MaxAuditPage].
func (db *DB) Audit(after int64, limit int, scope string) ([]AuditEntry, error) {
	return db.AuditQuery(AuditQuery{After: after, Limit: limit, Scope: scope})
}

// AuditQuery selects audit entries. Scope and Node keep the entries whose
// node is that node or below it (Scope is the caller's subtree, Node the
// one asked for); Action keeps one action ("key.mint") or, ending in a
// dot, a family ("key."); Who one principal. Entries come in sequence
// order after After, or, with Desc, newest first before Before (0: from
// the newest). Limit is clamped to [1, MaxAuditPage].
type AuditQuery struct {
	After, Before            int64
	Desc                     bool
	Limit                    int
	Scope, Node, Action, Who string
}

// AuditQuery returns the entries q selects.
func (db *DB) AuditQuery(q AuditQuery) ([]AuditEntry, error) {
	if q.Limit <= 0 || q.Limit > MaxAuditPage {
		q.Limit = MaxAuditPage
	}
	where := []string{"1"}
	var args []any
	for _, root := range []string{q.Scope, q.Node} {
		if root != "" {
			where = append(where, "(node = ? OR substr(node, 1, ?) = ?)")
			args = append(args, root, len(root)+1, root+"/")
		}
	}
	switch {
	case strings.HasSuffix(q.Action, "."):
		where = append(where, "substr(action, 1, ?) = ?")
		args = append(args, len(q.Action), q.Action)
	case q.Action != "":
		where = append(where, "action = ?")
		args = append(args, q.Action)
	}
	if q.Who != "" {
		where = append(where, "who = ?")
		args = append(args, q.Who)
	}
	order := "ASC"
	if q.Desc {
		order = "DESC"
		if q.Before > 0 {
			where = append(where, "seq < ?")
			args = append(args, q.Before)
		}
	} else {
		where = append(where, "seq > ?")
		args = append(args, q.After)
	}
	args = append(args, q.Limit)
	return readAll(db, "read audit log", scanAuditEntry, `SELECT seq, at, who, action, target, node, before, after FROM audit
		WHERE `+strings.Join(where, " AND ")+` ORDER BY seq `+order+` LIMIT ?`, args...)
}

func scanAuditEntry(r scanner) (AuditEntry, error) {
	var e AuditEntry
	var at string
	var before, after sql.NullString
	if err := r.Scan(&e.Seq, &at, &e.Who, &e.Action, &e.Target, &e.Node, &before, &after); err != nil {
		return AuditEntry{}, err
	}
	var err error
	if e.At, err = parseTime(at); err != nil {
		return AuditEntry{}, err
	}
	e.Before, e.After = rawOrNull(before), rawOrNull(after)
	return e, nil
}

func rawOrNull(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return json.RawMessage("null")
	}
	return json.RawMessage(s.String)
}
