package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of masters on this machine, each its own
// redis-server, made with `redis-cli --cluster create`.
type Cluster struct {
	Nodes []*Server
	// Addrs are the masters' addresses (a client's seeds).
	Addrs []string
}

// StartCluster starts masters redis-servers in cluster mode, joins them
// into one cluster with every slot covered, and waits until every node
// says the cluster is ok.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	c := &Cluster{}
	for i := 0; i < masters; i++ {
		s := StartWith(t, Options{Args: []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000"}})
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redistest: redis-cli is not installed (apt-get install redis-tools): %v", err)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, s := range c.Nodes {
		for {
			info, err := s.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: the cluster node %s never said cluster_state:ok: %q %v", s.Addr, info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

// SlotOf returns the hash slot of key, as the node at a answers it.
func (c *Cluster) SlotOf(key string) (int, error) {
	v, err := c.Nodes[0].Do("CLUSTER", "KEYSLOT", key)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}

// Keys returns every key of every node matching pattern.
func (c *Cluster) Keys(pattern string) ([]string, error) {
	var out []string
	for _, s := range c.Nodes {
		v, err := s.Do("KEYS", pattern)
		if err != nil {
			return nil, err
		}
		out = append(out, strings.Fields(v)...)
	}
	return out, nil
}

// Sentinel is a master, a replica of it, and one Sentinel watching them
// under the name Name, each its own process.
type Sentinel struct {
	Master, Replica *Server
	// Addr is the Sentinel's address; Name the master's name it knows.
	Addr, Name string
	dir        string
	cmd        *exec.Cmd
	done       chan struct{}
}

// StartSentinel starts a master, a replica that follows it (waited for
// until its link is up) and a Sentinel that fails over to the replica when
// the master has not answered for a second.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s := &Sentinel{Name: "mymaster", Master: Start(t)}
	host, port, _ := strings.Cut(s.Master.Addr, ":")
	s.Replica = StartWith(t, Options{Args: []string{"--replicaof", host, port}})
	deadline := time.Now().Add(60 * time.Second)
	for {
		info, err := s.Replica.Do("INFO", "replication")
		if err == nil && strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the replica never synced: %q %v", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	sport, err := freePort()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s.Addr = "127.0.0.1:" + strconv.Itoa(sport)
	s.dir = filepath.Join(t.TempDir(), "sentinel")
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(s.dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\nsentinel monitor %s %s %s 1\n"+
		"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\n",
		sport, s.dir, filepath.Join(s.dir, "sentinel.log"), s.Name, host, port, s.Name, s.Name)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(binary(), conf, "--sentinel")
	s.cmd.Dir = s.dir
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("redistest: starting the Sentinel: %v", err)
	}
	s.done = make(chan struct{})
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.cmd.Process.Kill(); <-s.done })
	for {
		v, err := do(s.Addr, nil, "", "", "SENTINEL", "get-master-addr-by-name", s.Name)
		if err == nil && strings.Contains(v, port) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the Sentinel never named the master: %q %v", v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// MasterAddr is the master's address as the Sentinel names it now.
func (s *Sentinel) MasterAddr() (string, error) {
	v, err := do(s.Addr, nil, "", "", "SENTINEL", "get-master-addr-by-name", s.Name)
	if err != nil {
		return "", err
	}
	f := strings.Fields(v)
	if len(f) != 2 {
		return "", fmt.Errorf("the Sentinel answered %q", v)
	}
	return f[0] + ":" + f[1], nil
}
