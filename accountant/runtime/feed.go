package runtime

import (
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/tokentriage/tokentriage/shared/syncwire"
)

// The runtime plane's change feed (syncwire.Page): the changes table holds
// one row per key, node and override that was ever written, with the
// sequence number of its last change, so the feed is compacted by
// construction: a filter that replays it from any cursor reads each item
// once, in its current state, and one that replays it from 0 reads the
// whole plane. Every write records its changes in the same transaction as
// the write and its audit entry (recordChanges derives them from the audit
// entries: every write of the plane is audited). Deleted nodes and
// overrides keep their row, which the feed sends as gone; they are as many
// as the plane's deletions (one row each, smaller than the audit entry
// each already leaves), and they let a filter's cursor never be too old,
// so only another database (another id) makes a filter start over.
//
// The kinds and ids:
//
//	k  a key: id is its kid, node its owner
//	n  a node: id is the node id (a node written, and each node above it)
//	o  an override: id is limit_id@node, node its node
const (
	changeKey      = "k"
	changeNode     = "n"
	changeOverride = "o"
)

// changesMigration creates the changes table and records every key, node
// and override the database already holds, in that order.
const changesMigration = `CREATE TABLE changes (
		kind TEXT NOT NULL,
		id   TEXT NOT NULL,
		node TEXT NOT NULL,
		seq  INTEGER NOT NULL,
		PRIMARY KEY (kind, id)
	);
	CREATE INDEX changes_seq ON changes (seq);
	INSERT INTO changes (kind, id, node, seq)
		SELECT 'k', kid, owner, ROW_NUMBER() OVER (ORDER BY kid) FROM keys;
	INSERT INTO changes (kind, id, node, seq)
		SELECT 'n', id, id, (SELECT COUNT(*) FROM keys) + ROW_NUMBER() OVER (ORDER BY id) FROM nodes;
	INSERT INTO changes (kind, id, node, seq)
		SELECT 'o', limit_id || '@' || node, node,
			(SELECT COUNT(*) FROM keys) + (SELECT COUNT(*) FROM nodes) + ROW_NUMBER() OVER (ORDER BY limit_id, node) FROM overrides;`

// recordChanges records in tx the items the audited writes changed, each
// with the next sequence number. An action of the key., node. or
// override. family names its item as Target (an override's as
// limit_id@node, with its Node); other actions (admins, reloads) change
// nothing a filter holds.
func recordChanges(tx *sql.Tx, audits []audit) error {
	for _, a := range audits {
		family, _, _ := strings.Cut(a.Action, ".")
		var err error
		switch family {
		case "key":
			err = recordChange(tx, changeKey, a.Target, a.Node)
		case "node":
			// Each node above the node, then the node: a node the config
			// no longer declares is in the tree only while a runtime node
			// hangs under it, and the filter learns of that from here.
			for i := 0; i <= len(a.Target) && err == nil; i++ {
				if i == len(a.Target) || a.Target[i] == '/' {
					err = recordChange(tx, changeNode, a.Target[:i], a.Target[:i])
				}
			}
		case "override":
			err = recordChange(tx, changeOverride, a.Target, a.Node)
		}
		if err != nil {
			return fmt.Errorf("runtime: recording the change of %s %s: %w", a.Action, a.Target, err)
		}
	}
	return nil
}

func recordChange(tx *sql.Tx, kind, id, node string) error {
	_, err := tx.Exec(`INSERT INTO changes (kind, id, node, seq) VALUES (?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM changes))
		ON CONFLICT (kind, id) DO UPDATE SET node = excluded.node, seq = excluded.seq`, kind, id, node)
	return err
}

// The feed's id is the plane's identity (the owner's database id on a
// mirror), and the epoch the changes table holds (kind "~", numbered 0, so
// no page carries it): a rollback accepted at start (OpenOptions.
// AcceptRollback) draws a new epoch, so that every filter, whose cursor
// may count changes the database no longer has, starts over instead of
// going on from numbers the next writes reuse. The epoch row is copied to
// mirrors with the table.
const changeEpoch = "~"

func (db *DB) feedID(tx *sql.Tx) (string, error) {
	id, err := db.identity(tx)
	if err != nil {
		return "", err
	}
	var epoch string
	switch err := tx.QueryRow(`SELECT node FROM changes WHERE kind = ? AND id = 'epoch'`, changeEpoch).Scan(&epoch); {
	case errors.Is(err, sql.ErrNoRows):
		return id, nil
	case err != nil:
		return "", err
	}
	return id + "-" + epoch, nil
}

// newFeedEpoch draws a new epoch for the feed (see feedID).
func (db *DB) newFeedEpoch() error {
	epoch, err := newDBID(rand.Reader)
	if err != nil {
		return err
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	_, err = db.sql.Exec(`INSERT INTO changes (kind, id, node, seq) VALUES (?, 'epoch', ?, 0)
		ON CONFLICT (kind, id) DO UPDATE SET node = excluded.node`, changeEpoch, epoch)
	if err != nil {
		return fmt.Errorf("runtime: a new epoch for the change feed: %w", err)
	}
	return nil
}

// FeedCursor returns the cursor of the feed's last change: what a filter
// that holds everything reports.
func (db *DB) FeedCursor() (string, error) {
	var c string
	err := db.read(func(tx *sql.Tx) (err error) {
		c, err = db.feedCursor(tx)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("runtime: read the feed position: %w", err)
	}
	return c, nil
}

func (db *DB) feedCursor(tx *sql.Tx) (string, error) {
	id, err := db.feedID(tx)
	if err != nil {
		return "", err
	}
	last, err := lastChange(tx)
	return syncwire.FormatCursor(id, last), err
}

// A mirror copies keys, nodes and overrides as the changes since the
// feed position it holds (Plane.Since): the rows of the items changed
// since, the changes rows, and the key columns of the items changed since
// that are gone. feedTables names the tables so copied, with the kind of
// their items and the columns that name a row.
var feedTables = map[string]struct {
	kind string
	key  []string
	// join is the condition that a row of the table is change row c's item.
	join string
}{
	"keys":      {changeKey, []string{"kid"}, "t.kid = c.id"},
	"nodes":     {changeNode, []string{"id"}, "t.id = c.id"},
	"overrides": {changeOverride, []string{"limit_id", "node"}, "t.node = c.node AND t.limit_id = substr(c.id, 1, length(c.id) - length(c.node) - 1)"},
}

func feedTable(name string) bool { _, ok := feedTables[name]; return ok || name == "changes" }

// feedSince is the position a mirror's feed cursor holds, when it is one
// of this feed's positions; 0 otherwise (the copy is then whole).
func (db *DB) feedSince(tx *sql.Tx, cursor string) (uint64, error) {
	id, seq, ok := syncwire.ParseCursor(cursor)
	if !ok || seq == 0 {
		return 0, nil
	}
	fid, err := db.feedID(tx)
	if err != nil {
		return 0, err
	}
	last, err := lastChange(tx)
	if err != nil || id != fid || seq > last {
		return 0, err
	}
	return seq, nil
}

// changedRows fills the copy of table name with what changed after since,
// when it is a table the feed follows (ok).
func changedRows(tx *sql.Tx, p *Plane, name string, columns []string, since uint64) (ok bool, err error) {
	if name == "changes" {
		p.Tables[name], err = selectRows(tx, `SELECT `+strings.Join(columns, ", ")+` FROM changes WHERE seq > ? ORDER BY seq`, len(columns), int64(since))
		return true, err
	}
	ft, ok := feedTables[name]
	if !ok {
		return false, nil
	}
	cols := make([]string, len(columns))
	for i, c := range columns {
		cols[i] = "t." + c
	}
	p.Tables[name], err = selectRows(tx, `SELECT `+strings.Join(cols, ", ")+` FROM changes c JOIN `+name+` t ON `+ft.join+
		` WHERE c.kind = ? AND c.seq > ?`, len(cols), ft.kind, int64(since))
	if err != nil {
		return true, err
	}
	keys := make([]string, len(ft.key))
	for i, k := range ft.key {
		keys[i] = "c.id"
		if k == "node" {
			keys[i] = "c.node"
		} else if name == "overrides" {
			keys[i] = "substr(c.id, 1, length(c.id) - length(c.node) - 1)"
		}
	}
	gone, err := selectRows(tx, `SELECT `+strings.Join(keys, ", ")+` FROM changes c WHERE c.kind = ? AND c.seq > ?
		AND NOT EXISTS (SELECT 1 FROM `+name+` t WHERE `+ft.join+`)`, len(keys), ft.kind, int64(since))
	if len(gone) > 0 {
		if p.Removed == nil {
			p.Removed = map[string]Rows{}
		}
		p.Removed[name] = gone
	}
	return true, err
}

// applyChanged applies a table's changes to a mirror: rows written (a
// changed row replaces the one held under its name) and rows removed.
func applyChanged(tx *sql.Tx, name string, columns []string, rows, removed Rows) error {
	if ft, ok := feedTables[name]; ok && len(removed) > 0 {
		conds := make([]string, len(ft.key))
		for i, k := range ft.key {
			conds[i] = k + " = ?"
		}
		stmt, err := tx.Prepare(`DELETE FROM ` + name + ` WHERE ` + strings.Join(conds, " AND "))
		if err != nil {
			return fmt.Errorf("runtime: apply the plane: %s: %w", name, err)
		}
		defer stmt.Close()
		for i, row := range removed {
			if len(row) != len(ft.key) {
				return fmt.Errorf("runtime: the plane copy's %s removal %d has %d columns, want %d", name, i, len(row), len(ft.key))
			}
			args := make([]any, len(row))
			for j, v := range row {
				if v == nil {
					return fmt.Errorf("runtime: the plane copy's %s removal %d has a null", name, i)
				}
				args[j] = *v
			}
			if _, err := stmt.Exec(args...); err != nil {
				return fmt.Errorf("runtime: apply the plane: %s removal %d: %w", name, i, err)
			}
		}
	}
	return upsertRows(tx, name, columns, rows)
}

func lastChange(tx *sql.Tx) (uint64, error) {
	var n int64
	err := tx.QueryRow(`SELECT COALESCE(MAX(seq), 0) FROM changes`).Scan(&n)
	return uint64(n), err
}

// feedBatch is how many changes one query of a page reads.
const feedBatch = 512

// Feed returns the page of the runtime plane's feed after cursor: the
// keys, nodes and overrides whose last change is after it, in sequence
// order, in their current state, until their JSON reaches maxBytes (at
// least one item). A cursor of another database, one ahead of the feed
// (a database restored from a backup) or none starts the feed over
// (Reset). Skipped says which items could not be read and were sent as
// gone (a key whose stored scopes do not decode: refused, never widened).
func (db *DB) Feed(cursor string, maxBytes int) (page syncwire.RuntimePage, skipped []string, err error) {
	err = db.read(func(tx *sql.Tx) error {
		id, err := db.feedID(tx)
		if err != nil {
			return err
		}
		last, err := lastChange(tx)
		if err != nil {
			return err
		}
		cid, after, ok := syncwire.ParseCursor(cursor)
		if !ok || cid != id || after > last {
			after, page.Reset = 0, true
		}
		size := 0
		// A cursor at the feed's last change has nothing after it: no
		// page query (most polls, once a second per replica).
		for size < maxBytes && after < last {
			n, err := db.feedBatch(tx, &page, &after, &size, maxBytes, &skipped)
			if err != nil {
				return err
			}
			if n < feedBatch {
				break
			}
		}
		page.Cursor = syncwire.FormatCursor(id, after)
		page.More = after < last
		return nil
	})
	if err != nil {
		return syncwire.RuntimePage{}, nil, fmt.Errorf("runtime: read the change feed: %w", err)
	}
	return page, skipped, nil
}

// feedBatch appends to page the changes after *after, up to feedBatch of
// them or until *size reaches maxBytes, advancing both. It returns how
// many changes the query returned.
func (db *DB) feedBatch(tx *sql.Tx, page *syncwire.RuntimePage, after *uint64, size *int, maxBytes int, skipped *[]string) (int, error) {
	rows, err := tx.Query(`SELECT c.seq, c.kind, c.id, c.node,
			k.sha256, k.owner, k.scopes, k.revoked_at IS NOT NULL, k.name, k.expires_at, k.prev_sha256, k.prev_until,
			c.kind = 'n' AND (EXISTS (SELECT 1 FROM nodes WHERE id = c.id)
				OR EXISTS (SELECT 1 FROM nodes WHERE id >= c.id || '/' AND id < c.id || '0')),
			o.amount
		FROM changes c
		LEFT JOIN keys k ON c.kind = 'k' AND k.kid = c.id
		LEFT JOIN overrides o ON c.kind = 'o' AND o.node = c.node AND o.limit_id = substr(c.id, 1, length(c.id) - length(c.node) - 1)
		WHERE c.seq > ? ORDER BY c.seq LIMIT ?`, int64(*after), feedBatch)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
		var seq int64
		var kind, id, node string
		var sha, owner, scopes, name, expires, prev, prevUntil sql.NullString
		var revoked, tree sql.NullBool
		var amount sql.NullInt64
		if err := rows.Scan(&seq, &kind, &id, &node, &sha, &owner, &scopes, &revoked, &name, &expires, &prev, &prevUntil, &tree, &amount); err != nil {
			return n, err
		}
		// The bytes each item takes in the answer's JSON, near enough to
		// bound a page (the members' names and punctuation, and the values).
		switch kind {
		case changeKey:
			k := syncwire.Key{KID: id, Gone: !sha.Valid}
			if sha.Valid {
				var err error
				if k, err = feedKey(id, sha, owner, scopes, revoked, name, expires, prev, prevUntil); err != nil {
					// Never sent with fewer restrictions than it has, nor
					// past an expiry it cannot read.
					*skipped = append(*skipped, "key "+id+": "+err.Error())
					k = syncwire.Key{KID: id, Gone: true}
				}
			}
			page.Keys = append(page.Keys, k)
			*size += 64 + len(k.KID) + len(k.SHA256) + len(k.Owner) + len(k.Name) + len(k.PrevSHA256) + len(scopes.String)
		case changeNode:
			nd := syncwire.Node{ID: id, Tree: tree.Bool}
			page.Nodes = append(page.Nodes, nd)
			*size += 24 + len(nd.ID)
		case changeOverride:
			limit, _ := strings.CutSuffix(id, "@"+node)
			o := syncwire.Override{LimitID: limit, Node: node, Amount: amount.Int64, Gone: !amount.Valid}
			page.Overrides = append(page.Overrides, o)
			*size += 64 + len(o.LimitID) + len(o.Node)
		default:
			*skipped = append(*skipped, fmt.Sprintf("change %d: unknown kind %q", seq, kind))
		}
		*after = uint64(seq)
		if *size >= maxBytes {
			return n, rows.Err()
		}
	}
	return n, rows.Err()
}

// feedKey is a key as the feed sends it, from its stored columns.
func feedKey(kid string, sha, owner, scopes sql.NullString, revoked sql.NullBool, name, expires, prev, prevUntil sql.NullString) (syncwire.Key, error) {
	k := syncwire.Key{KID: kid, SHA256: sha.String, Owner: owner.String, Revoked: revoked.Bool, Name: name.String}
	var err error
	if k.Scopes, err = decodeScopes(scopes.String); err != nil {
		return k, err
	}
	if k.ExpiresAt, err = unixOf(expires); err != nil {
		return k, fmt.Errorf("expires_at: %w", err)
	}
	if prev.Valid {
		if k.PrevUntil, err = unixOf(prevUntil); err != nil {
			return k, fmt.Errorf("prev_until: %w", err)
		}
		k.PrevSHA256 = prev.String
	}
	return k, nil
}

// KeyOwners returns the distinct owners of the keys that are not revoked,
// in lexical order: as many as the nodes keys hang from, however many
// keys there are.
func (db *DB) KeyOwners() ([]string, error) {
	return readAll(db, "list key owners", scanString, `SELECT DISTINCT owner FROM keys WHERE revoked_at IS NULL ORDER BY owner`)
}

// LiveKIDs returns up to limit kids of the keys owned by owner that are
// not revoked, in lexical order, and how many there are.
func (db *DB) LiveKIDs(owner string, limit int) (kids []string, total int, err error) {
	err = db.read(func(tx *sql.Tx) error {
		if err := tx.QueryRow(`SELECT COUNT(*) FROM keys WHERE owner = ? AND revoked_at IS NULL`, owner).Scan(&total); err != nil {
			return err
		}
		kids, err = queryAll(tx, scanString, `SELECT kid FROM keys WHERE owner = ? AND revoked_at IS NULL ORDER BY kid LIMIT ?`, owner, limit)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("runtime: list the keys of %s: %w", owner, err)
	}
	return kids, total, nil
}
