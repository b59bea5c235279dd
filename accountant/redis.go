package accountant

import (
	"fmt"
	"os"

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
	s.log.Info("shared redis", "addr", r.Addr, "db", r.DB, "key_prefix", r.KeyPrefix, "timeout", plan.RedisTimeout().String())
	return nil
}
