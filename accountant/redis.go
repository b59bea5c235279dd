package accountant

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tokentriage/tokentriage/accountant/redisstore"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// openRedis connects to the plan's shared Redis, if it names one. It does
// not wait for Redis: until it answers, every Redis-backed limit answers
// locally and says suspended. A reload that names another Redis takes a
// restart, which the reload's log line says.
func (s *Server) openRedis(plan *govern.Plan) error {
	if plan.SharedState == nil || plan.SharedState.Redis == nil {
		return nil
	}
	r := plan.SharedState.Redis
	password := ""
	if r.PasswordEnv != "" {
		password = os.Getenv(r.PasswordEnv)
		if password == "" {
			return fmt.Errorf("accountant: governance.shared_state.redis.password_env names %s, which is not set; set it, or remove password_env for a Redis without a password", r.PasswordEnv)
		}
	}
	c, err := redisstore.New(redisstore.Options{
		Addr:       r.Addr,
		Username:   r.Username,
		Password:   password,
		DB:         r.DB,
		Prefix:     r.KeyPrefix,
		Timeout:    plan.RedisTimeout(),
		Logger:     s.log,
		Registerer: s.metrics.reg,
	})
	if err != nil {
		return fmt.Errorf("accountant: %w", err)
	}
	s.redis = c
	c.OnUp(s.warmAdmit)
	s.log.Info("shared redis", "addr", r.Addr, "db", r.DB, "key_prefix", r.KeyPrefix, "timeout", plan.RedisTimeout().String())
	return nil
}

// idFile holds the accountant's fleet identity in its data directory.
const idFile = "accountant.id"

// accountantID is the accountant's name in the fleet: the id of its data
// directory, made once, so a restart publishes under the same name and
// replaces its own totals instead of adding to them.
func accountantID(dir string) (string, error) {
	p := filepath.Join(dir, idFile)
	b, err := os.ReadFile(p)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("accountant: reading its fleet identity: %w", err)
	}
	var raw [12]byte
	rand.Read(raw[:])
	id := "a-" + hex.EncodeToString(raw[:])
	if err := os.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("accountant: writing its fleet identity: %w", err)
	}
	return id, nil
}

// openFleet makes the counter store that publishes this accountant's own
// spend and quota totals to the shared Redis and reads the fleet's back,
// and starts its publishing.
func (s *Server) openFleet() (*redisstore.Fleet, error) {
	id, err := accountantID(s.opts.DataDir)
	if err != nil {
		return nil, err
	}
	f := redisstore.NewFleet(s.redis, id, s.now, func() {
		s.mu.Lock()
		if s.core != nil {
			s.core.Touch(s.now())
		}
		s.mu.Unlock()
	})
	f.CountReplicas(s.liveReplicaIDs)
	ctx, cancel := context.WithCancel(context.Background())
	s.fleet, s.fleetStop = f, cancel
	go f.Run(ctx)
	s.log.Info("fleet totals: publishing this accountant's spend and quota to the shared redis", "accountant", id)
	return f, nil
}

// fleetStale says why the snapshot's fleet totals cannot be trusted now,
// or "" (also without a shared Redis).
func (s *Server) fleetStale() string {
	if s.fleet == nil {
		return ""
	}
	return s.fleet.Stale()
}
