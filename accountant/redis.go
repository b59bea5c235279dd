package accountant

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/tokentriage/tokentriage/accountant/redisstore"
	"github.com/tokentriage/tokentriage/shared/config"
	"github.com/tokentriage/tokentriage/shared/govern"
)

// openRedis connects to the plan's shared Redis, if it names one. It does
// not wait for Redis: until it answers, every Redis-backed limit answers
// inside its lease and its share and says suspended. A reload that names
// another Redis takes a restart, which the reload's log line says.
func (s *Server) openRedis(plan *govern.Plan) error {
	if plan.SharedState == nil || plan.SharedState.Redis == nil {
		return nil
	}
	r := plan.SharedState.Redis
	const p = "accountant: governance.shared_state.redis"
	secret := func(field, env string) (string, error) {
		if env == "" {
			return "", nil
		}
		v := os.Getenv(env)
		if v == "" {
			return "", fmt.Errorf("%s.%s names %s, which is not set; set it, or remove %s for a Redis without a password", p, field, env, field)
		}
		return v, nil
	}
	password, err := secret("password_env", r.PasswordEnv)
	if err != nil {
		return err
	}
	sentinelPassword, err := secret("sentinel_password_env", r.SentinelPasswordEnv)
	if err != nil {
		return err
	}
	tlsConf, err := redisTLS(r)
	if err != nil {
		return err
	}
	c, err := redisstore.New(redisstore.Options{
		Addr:             r.Addr,
		Addrs:            r.Addrs,
		Cluster:          r.Cluster,
		MasterName:       r.SentinelMaster,
		SentinelUsername: r.SentinelUsername,
		SentinelPassword: sentinelPassword,
		Username:         r.Username,
		Password:         password,
		DB:               r.DB,
		TLS:              tlsConf,
		Prefix:           r.KeyPrefix,
		Timeout:          plan.RedisTimeout(),
		Logger:           s.log,
		Registerer:       s.metrics.reg,
	})
	if err != nil {
		return fmt.Errorf("accountant: %w", err)
	}
	s.redis = c
	c.OnUp(s.warmLeases)
	s.log.Info("shared redis", "addr", c.Addr(), "cluster", r.Cluster, "tls", tlsConf != nil || strings.HasPrefix(r.Addr, "rediss://"),
		"db", r.DB, "key_prefix", r.KeyPrefix, "timeout", plan.RedisTimeout().String())
	return nil
}

// redisTLS is the TLS configuration shared_state.redis asks for: nil
// without tls (a rediss:// address then brings its own, on the system's
// roots), else one that checks the server against tls_ca_file (or the
// system's roots) and presents tls_cert_file when set.
func redisTLS(r *config.Redis) (*tls.Config, error) {
	if !r.TLS && !(strings.HasPrefix(r.Addr, "rediss://") && (r.TLSCAFile != "" || r.TLSCertFile != "" || r.TLSServerName != "")) {
		return nil, nil
	}
	const p = "accountant: governance.shared_state.redis"
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.TLSServerName}
	if r.TLSCAFile != "" {
		pem, err := os.ReadFile(r.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.tls_ca_file: %w", p, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.tls_ca_file: %s holds no PEM certificate", p, r.TLSCAFile)
		}
		conf.RootCAs = pool
	}
	if r.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(r.TLSCertFile, r.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.tls_cert_file: %w", p, err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	if conf.ServerName == "" {
		// The host of the address (or of the first seed), as a browser
		// checks it; go-redis would otherwise leave it to each dial.
		host := r.Addr
		if len(r.Addrs) > 0 {
			host = r.Addrs[0]
		}
		if _, rest, ok := strings.Cut(host, "://"); ok {
			host = rest
			if at := strings.LastIndex(host, "@"); at >= 0 {
				host = host[at+1:]
			}
			host, _, _ = strings.Cut(host, "/")
		}
		if h, _, err := net.SplitHostPort(host); err == nil {
			conf.ServerName = h
		}
	}
	return conf, nil
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
	st := s.loadFleetState()
	s.lastReplicas.Store(int64(st.Replicas))
	f.KnowEpoch(st.Epoch, func(epoch string) { s.saveFleetState(epoch, -1) })
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

// fleetStateFile keeps, in the data directory, what the accountant last
// knew of the fleet: the epoch of Redis's data set (a different one later
// means Redis lost its data meanwhile) and the live replica count (a
// replica's share of a limit while Redis is away, also after a restart
// during the outage).
const fleetStateFile = "fleet.json"

type fleetState struct {
	Epoch    string `json:"epoch"`
	Replicas int    `json:"replicas"`
}

func (s *Server) loadFleetState() fleetState {
	var st fleetState
	b, err := os.ReadFile(filepath.Join(s.opts.DataDir, fleetStateFile))
	if err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			s.log.Warn("fleet: "+fleetStateFile+" is unreadable; starting without the fleet's last replica count and epoch", "err", err.Error())
			st = fleetState{}
		}
	}
	return st
}

// saveFleetState writes the epoch ("": unchanged) and the replica count
// (negative: unchanged), atomically (a new file renamed over the old).
func (s *Server) saveFleetState(epoch string, replicas int) {
	s.fleetStateMu.Lock()
	defer s.fleetStateMu.Unlock()
	st := s.loadFleetState()
	if epoch != "" {
		st.Epoch = epoch
	}
	if replicas >= 0 {
		st.Replicas = replicas
	}
	b, _ := json.Marshal(st)
	p := filepath.Join(s.opts.DataDir, fleetStateFile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		s.log.Warn("fleet: writing "+fleetStateFile, "err", err.Error())
		return
	}
	if err := os.Rename(tmp, p); err != nil {
		s.log.Warn("fleet: writing "+fleetStateFile, "err", err.Error())
	}
}
