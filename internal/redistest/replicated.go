package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Replicated is a master with one replica, both standalone redis-servers
// started for one test. The replica replicates through Link, a Proxy in
// front of the master, so a test can cut replication (Link.Blackhole)
// without touching client connections.
type Replicated struct {
	Master  *Server
	Replica *Server
	Link    *Proxy // the replica's connection to the master goes through it
}

// StartReplicated starts a master and a replica of it and waits until the
// replica has finished its initial sync. Both are stopped in t.Cleanup.
// It skips t when redis-server is missing (fails it when RequireEnv is set).
func StartReplicated(t testing.TB) *Replicated {
	t.Helper()
	master := StartServer(t, "--repl-diskless-sync-delay", "0")
	link := NewProxy(t, master.Addr())
	host, port := splitAddr(t, link.Addr())
	replica := StartServer(t, "--repl-diskless-sync-delay", "0", "--replicaof", host, port)
	r := &Replicated{Master: master, Replica: replica, Link: link}
	r.WaitSynced(t)
	return r
}

// WaitSynced waits until the replica is connected to the master, done with
// its initial sync, and listed by the master as an online replica.
func (r *Replicated) WaitSynced(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	err := poll(ctx, func() error {
		if err := replicaSynced(ctx, r.Replica.Addr()); err != nil {
			return err
		}
		return onlineReplicas(ctx, r.Master.Addr(), 1)
	})
	if err != nil {
		t.Fatalf("redistest: waiting for the replica %s to sync: %v", r.Replica.Addr(), err)
	}
}

// Promote turns the replica into a master (REPLICAOF NO ONE), as a failover
// would after the master died.
func (r *Replicated) Promote(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := query(ctx, r.Replica.Addr(), "replicaof", "no", "one"); err != nil {
		t.Fatalf("redistest: promoting %s: %v", r.Replica.Addr(), err)
	}
}

// onlineReplicas reports an error unless the master at addr lists at least
// n connected replicas, all in state online.
func onlineReplicas(ctx context.Context, addr string, n int) error {
	info, err := query(ctx, addr, "info", "replication")
	if err != nil {
		return err
	}
	got, _ := strconv.Atoi(infoField(info, "connected_slaves"))
	if got < n {
		return fmt.Errorf("master %s has %d connected replicas, want %d", addr, got, n)
	}
	for i := range got {
		if v := infoField(info, "slave"+strconv.Itoa(i)); !containsField(v, "state=online") {
			return fmt.Errorf("master %s: replica %d is %q", addr, i, v)
		}
	}
	return nil
}

func containsField(csv, want string) bool {
	return slices.Contains(strings.Split(csv, ","), want)
}

func splitAddr(t testing.TB, addr string) (host, port string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("redistest: bad address %q: %v", addr, err)
	}
	return host, port
}

// WaitReplicasCaughtUp waits until every replica connected to the master s
// has acknowledged the master's whole replication stream (each replica's
// offset in INFO replication equals master_repl_offset). After it, every
// write the master had accepted would survive the master's death. It fails
// t if s has no replica.
func (s *Server) WaitReplicasCaughtUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	err := poll(ctx, func() error {
		info, err := query(ctx, s.Addr(), "info", "replication")
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(infoField(info, "connected_slaves"))
		if n == 0 {
			return errors.New("no connected replica")
		}
		want := infoField(info, "master_repl_offset")
		for i := range n {
			fields := strings.Split(infoField(info, "slave"+strconv.Itoa(i)), ",")
			if !slices.Contains(fields, "offset="+want) {
				return fmt.Errorf("replica %d at %v, master at %s", i, fields, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: waiting for the replicas of %s: %v", s.Addr(), err)
	}
}
