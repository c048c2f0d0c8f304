package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel settings: fast failure detection for tests.
const (
	// SentinelMasterName is the name the sentinels monitor the master under.
	SentinelMasterName = "rlock-master"
	// SentinelDownAfter is down-after-milliseconds: how long the master
	// must be unreachable before a sentinel considers it down.
	SentinelDownAfter = time.Second
	// sentinelFailoverTimeout is failover-timeout.
	sentinelFailoverTimeout = 5 * time.Second
)

// SentinelSetup is a master, one replica and three sentinels (quorum 2),
// all started for one test and stopped in t.Cleanup.
type SentinelSetup struct {
	Master    *Server // the master at start; roles change on failover
	Replica   *Server
	Sentinels []*Server
}

// StartSentinel starts a master, a replica and three sentinels
// ("redis-server <conf> --sentinel") monitoring it as SentinelMasterName
// with quorum 2, and waits until the replica is in sync and every sentinel
// knows the replica and the two other sentinels. It skips t when
// redis-server is missing (fails it when RequireEnv is set).
func StartSentinel(t testing.TB) *SentinelSetup {
	t.Helper()
	r := StartReplicatedDirect(t)
	s := &SentinelSetup{Master: r.Master, Replica: r.Replica}
	host, port := splitAddr(t, r.Master.Addr())
	for i := range 3 {
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %s %s %s 2\n"+
			"sentinel down-after-milliseconds %s %d\n"+
			"sentinel failover-timeout %s %d\n"+
			"sentinel parallel-syncs %s 1\n",
			SentinelMasterName, host, port,
			SentinelMasterName, SentinelDownAfter.Milliseconds(),
			SentinelMasterName, sentinelFailoverTimeout.Milliseconds(),
			SentinelMasterName)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatalf("redistest: writing %s: %v", conf, err)
		}
		sen, err := startDetached(r.Master.bin, dir, conf, "Sentinel ID is", func(int) ([]string, error) {
			return []string{"--sentinel"}, nil
		})
		if err != nil {
			t.Fatalf("redistest: starting sentinel %d: %v", i, err)
		}
		t.Cleanup(sen.stop)
		s.Sentinels = append(s.Sentinels, sen)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	err := poll(ctx, func() error {
		for _, sen := range s.Sentinels {
			m, err := sentinelMaster(ctx, sen.Addr())
			if err != nil {
				return err
			}
			if m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" {
				return fmt.Errorf("sentinel %s knows %s replicas and %s other sentinels", sen.Addr(), m["num-slaves"], m["num-other-sentinels"])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: waiting for the sentinels: %v", err)
	}
	return s
}

// StartReplicatedDirect is StartReplicated without the proxy: the replica
// connects to the master directly (what sentinels expect to see).
func StartReplicatedDirect(t testing.TB) *Replicated {
	t.Helper()
	master := StartServer(t, "--repl-diskless-sync-delay", "0")
	host, port := splitAddr(t, master.Addr())
	replica := StartServer(t, "--repl-diskless-sync-delay", "0", "--replicaof", host, port)
	r := &Replicated{Master: master, Replica: replica}
	r.WaitSynced(t)
	return r
}

// SentinelAddrs returns the sentinels' addresses.
func (s *SentinelSetup) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, sen := range s.Sentinels {
		addrs[i] = sen.Addr()
	}
	return addrs
}

// NewFailoverClient returns a go-redis failover client for the monitored
// master, closed in t.Cleanup. opts may change any option.
func (s *SentinelSetup) NewFailoverClient(t testing.TB, opts ...func(*redis.FailoverOptions)) *redis.Client {
	t.Helper()
	o := &redis.FailoverOptions{MasterName: SentinelMasterName, SentinelAddrs: s.SentinelAddrs()}
	for _, opt := range opts {
		opt(o)
	}
	c := redis.NewFailoverClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// WaitFailover waits until every sentinel names a master other than old,
// that server reports role:master, and (when it has one) its replica is in
// sync. It returns the new master.
func (s *SentinelSetup) WaitFailover(t testing.TB, old *Server) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), FailoverTimeout)
	defer cancel()
	var promoted string
	err := poll(ctx, func() error {
		promoted = ""
		for _, sen := range s.Sentinels {
			if sen.PID() == 0 {
				continue
			}
			m, err := sentinelMaster(ctx, sen.Addr())
			if err != nil {
				return err
			}
			addr := net.JoinHostPort(m["ip"], m["port"])
			if addr == old.Addr() {
				return fmt.Errorf("sentinel %s still names %s", sen.Addr(), addr)
			}
			if promoted != "" && promoted != addr {
				return fmt.Errorf("sentinels disagree: %s and %s", promoted, addr)
			}
			promoted = addr
		}
		info, err := query(ctx, promoted, "info", "replication")
		if err != nil {
			return err
		}
		if infoField(info, "role") != "master" {
			return fmt.Errorf("%s is not master yet", promoted)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: waiting for the sentinel failover from %s: %v", old.Addr(), err)
	}
	for _, srv := range []*Server{s.Master, s.Replica} {
		if srv.Addr() == promoted {
			return srv
		}
	}
	t.Fatalf("redistest: sentinels promoted %s, which is not part of the setup", promoted)
	return nil
}

// sentinelMaster returns SENTINEL MASTER <name> as a map.
func sentinelMaster(ctx context.Context, addr string) (map[string]string, error) {
	c := redis.NewSentinelClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: time.Second, PoolSize: 1,
	})
	defer c.Close()
	m, err := c.Master(ctx, SentinelMasterName).Result()
	if err != nil {
		return nil, fmt.Errorf("sentinel %s: %w", addr, err)
	}
	if _, err := strconv.Atoi(m["port"]); err != nil {
		return nil, fmt.Errorf("sentinel %s: bad master port %q", addr, m["port"])
	}
	return m, nil
}
