package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
)

// Cluster settings. The node timeout bounds failure detection: a killed
// master's replica takes over about 2-3 node timeouts later (~4.6 s here).
const (
	// ClusterNodeTimeout is the cluster-node-timeout of every node.
	ClusterNodeTimeout = 2 * time.Second
	// clusterReadyTimeout bounds the wait for a new cluster to be usable.
	clusterReadyTimeout = 60 * time.Second
	// FailoverTimeout bounds WaitFailover.
	FailoverTimeout = 60 * time.Second
)

// CLISkipMessage is the reason given to t.Skip when redis-cli is missing.
const CLISkipMessage = "redis-cli not found on PATH: install it (apt-get install redis-tools, a dependency of redis-server) to run the Redis Cluster tests"

// binaries returns the paths of redis-server and redis-cli. It skips t when
// one is missing, or fails t when RequireEnv is set.
func binaries(t testing.TB) (server, cli string) {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, SkipMessage)
	}
	cli, err = exec.LookPath("redis-cli")
	if err != nil {
		missing(t, CLISkipMessage)
	}
	return server, cli
}

// Cluster is a Redis Cluster of three masters with one replica each, six
// redis-server processes on loopback ports, persistence off. Create one with
// StartCluster (its own, stopped in t.Cleanup) or SharedCluster (one per
// test binary). Masters and replicas change roles on failover: ask Masters,
// MasterFor and ReplicaOf after any fault. Its methods are safe for
// concurrent use.
type Cluster struct {
	cli   string
	dir   string
	nodes []*Server // in start order; each keeps its Addr across Restart

	closeOnce sync.Once
	removeDir bool // dir is ours to delete
}

// StartCluster starts a new cluster for this test: six nodes, then
// "redis-cli --cluster create ... --cluster-replicas 1", then waits until
// every node reports cluster_state:ok and every replica is in sync (about
// 2-3 s). It is stopped in t.Cleanup. Tests that kill or freeze nodes need
// their own cluster; tests that only use keys should share one
// (SharedCluster).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	server, cli := binaries(t)
	c, err := newCluster(server, cli, t.TempDir(), false)
	if err != nil {
		t.Fatalf("redistest: starting a Redis Cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

var shared struct {
	mu  sync.Mutex
	c   *Cluster
	err error
}

// SharedCluster returns the test binary's shared cluster, starting it on
// first use. Tests that share it must use unique keys (Name) and must not
// kill, freeze or reconfigure its nodes. The package's TestMain must stop
// it: goleak.VerifyTestMain(redistest.StopSharedAfter(m)).
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	server, cli := binaries(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.c == nil && shared.err == nil {
		dir, err := os.MkdirTemp("", "rlock-cluster-")
		if err == nil {
			shared.c, err = newCluster(server, cli, dir, true)
			if err != nil {
				_ = os.RemoveAll(dir)
			}
		}
		shared.err = err
	}
	if shared.err != nil {
		t.Fatalf("redistest: starting the shared Redis Cluster: %v", shared.err)
	}
	return shared.c
}

// StopShared stops the shared cluster if one was started. Call it after
// m.Run, before leak checks; StopSharedAfter does that.
func StopShared() {
	shared.mu.Lock()
	c := shared.c
	shared.c, shared.err = nil, nil
	shared.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// TestingM is what goleak.VerifyTestMain takes: *testing.M satisfies it.
type TestingM interface{ Run() int }

// StopSharedAfter wraps m so that Run stops the shared cluster after the
// tests: goleak.VerifyTestMain(redistest.StopSharedAfter(m)).
func StopSharedAfter(m TestingM) TestingM { return stopSharedAfter{m} }

type stopSharedAfter struct{ m TestingM }

func (s stopSharedAfter) Run() int {
	defer StopShared()
	return s.m.Run()
}

func newCluster(server, cli, dir string, removeDir bool) (*Cluster, error) {
	c := &Cluster{cli: cli, dir: dir, removeDir: removeDir}
	for i := range 6 {
		nd := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(nd, 0o755); err != nil {
			c.Close()
			return nil, err
		}
		s, err := startDetached(server, nd, "", "", func(port int) ([]string, error) {
			bus, err := freePort()
			if err != nil {
				return nil, err
			}
			if bus == port {
				return nil, fmt.Errorf("%w: bus port %d equals port", errBind, bus)
			}
			return []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", strconv.FormatInt(ClusterNodeTimeout.Milliseconds(), 10),
				"--cluster-port", strconv.Itoa(bus),
				"--repl-diskless-sync-delay", "0",
			}, nil
		})
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		c.nodes = append(c.nodes, s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	args := []string{"--cluster", "create"}
	for _, s := range c.nodes {
		args = append(args, s.Addr())
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitHealthy(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// startDetached starts a redis-server in dir that no test owns: the caller
// stops it (Server.stop). conf, if not empty, is a config file passed
// first; ready, if not empty, replaces the log line awaited at start
// ("Sentinel ID is" for a sentinel). extra returns the extra arguments for a given
// port; it is called again for every port tried.
func startDetached(bin, dir, conf, ready string, extra func(port int) ([]string, error)) (*Server, error) {
	s := &Server{
		bin:     bin,
		dir:     dir,
		logPath: filepath.Join(dir, "redis.log"),
		outPath: filepath.Join(dir, "redis.out"),
		conf:    conf,
		ready:   ready,
	}
	var lastErr error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("no free port: %w", err)
		}
		s.port = port
		if extra != nil {
			if s.extra, err = extra(port); err != nil {
				if errors.Is(err, errBind) {
					lastErr = err
					continue
				}
				return nil, err
			}
		}
		lastErr = s.start()
		if lastErr == nil {
			return s, nil
		}
		if !errors.Is(lastErr, errBind) {
			break
		}
	}
	return nil, fmt.Errorf("starting redis-server: %w\n%s", lastErr, s.diagnostics())
}

// Close stops every node and removes the shared cluster's directory. It is
// idempotent.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		for _, s := range c.nodes {
			s.stop()
		}
		if c.removeDir {
			_ = os.RemoveAll(c.dir)
		}
	})
}

// Nodes returns every node, in start order, running or not.
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// Addrs returns the addresses of every node: the seed list of a
// ClusterClient.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// node returns the node listening on addr, or nil.
func (c *Cluster) node(addr string) *Server {
	for _, s := range c.nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// NewClient returns a ClusterClient seeded with every node, closed in
// t.Cleanup. opts may change any option.
func (c *Cluster) NewClient(t testing.TB, opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	t.Helper()
	o := &redis.ClusterOptions{Addrs: c.Addrs()}
	for _, opt := range opts {
		opt(o)
	}
	cc := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// ClusterNode is one line of CLUSTER NODES as seen by a running node.
type ClusterNode struct {
	ID       string
	Addr     string // "127.0.0.1:PORT"
	Master   bool
	MasterID string // for a replica: its master's ID
	Failed   bool   // flagged fail or fail?
	Slots    [][2]int
}

// Topology returns the cluster's nodes as the first running node that
// answers sees them.
func (c *Cluster) Topology(t testing.TB) []ClusterNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := c.topology(ctx)
	if err != nil {
		t.Fatalf("redistest: cluster topology: %v", err)
	}
	return nodes
}

func (c *Cluster) topology(ctx context.Context) ([]ClusterNode, error) {
	var lastErr error = errors.New("no running node")
	for _, s := range c.nodes {
		if s.PID() == 0 {
			continue
		}
		var text string
		text, lastErr = query(ctx, s.Addr(), "cluster", "nodes")
		if lastErr == nil {
			return parseClusterNodes(text)
		}
	}
	return nil, lastErr
}

func parseClusterNodes(text string) ([]ClusterNode, error) {
	var nodes []ClusterNode
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("cannot parse CLUSTER NODES line %q", line)
		}
		n := ClusterNode{ID: f[0], MasterID: f[3]}
		addr, _, _ := strings.Cut(f[1], "@")
		n.Addr = addr
		for flag := range strings.SplitSeq(f[2], ",") {
			switch flag {
			case "master":
				n.Master = true
			case "fail", "fail?":
				n.Failed = true
			}
		}
		if n.MasterID == "-" {
			n.MasterID = ""
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") { // a slot being migrated
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				return nil, fmt.Errorf("cannot parse slot range %q", r)
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					return nil, fmt.Errorf("cannot parse slot range %q", r)
				}
			}
			n.Slots = append(n.Slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// Masters returns the nodes that serve slots now, ordered by their first
// slot (so Masters()[0] serves slot 0).
func (c *Cluster) Masters(t testing.TB) []*Server {
	t.Helper()
	var ms []ClusterNode
	for _, n := range c.Topology(t) {
		if n.Master && len(n.Slots) > 0 && !n.Failed {
			ms = append(ms, n)
		}
	}
	slices.SortFunc(ms, func(a, b ClusterNode) int { return a.Slots[0][0] - b.Slots[0][0] })
	out := make([]*Server, 0, len(ms))
	for _, n := range ms {
		out = append(out, c.node(n.Addr))
	}
	return out
}

// SlotRanges returns the slot ranges served by master (empty if it serves
// none).
func (c *Cluster) SlotRanges(t testing.TB, master *Server) [][2]int {
	t.Helper()
	for _, n := range c.Topology(t) {
		if n.Addr == master.Addr() && n.Master && !n.Failed {
			return n.Slots
		}
	}
	return nil
}

// MasterFor returns the master that serves slot now.
func (c *Cluster) MasterFor(t testing.TB, slot int) *Server {
	t.Helper()
	for _, n := range c.Topology(t) {
		if !n.Master || n.Failed {
			continue
		}
		for _, r := range n.Slots {
			if r[0] <= slot && slot <= r[1] {
				return c.node(n.Addr)
			}
		}
	}
	t.Fatalf("redistest: no master serves slot %d", slot)
	return nil
}

// ReplicaOf returns the (first) replica of master, or nil if it has none.
func (c *Cluster) ReplicaOf(t testing.TB, master *Server) *Server {
	t.Helper()
	nodes := c.Topology(t)
	var id string
	for _, n := range nodes {
		if n.Addr == master.Addr() {
			id = n.ID
		}
	}
	for _, n := range nodes {
		if id != "" && n.MasterID == id && !n.Failed {
			return c.node(n.Addr)
		}
	}
	return nil
}

// WaitHealthy waits until every running node reports cluster_state:ok and
// sees every slot served by a master that is not failed, and every running
// replica is connected to its master and done with the initial sync.
func (c *Cluster) WaitHealthy(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	if err := c.waitHealthy(ctx); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

func (c *Cluster) waitHealthy(ctx context.Context) error {
	return poll(ctx, func() error { return c.healthy(ctx) })
}

func (c *Cluster) healthy(ctx context.Context) error {
	views := make(map[string][]ClusterNode) // by the viewing node's address
	for _, s := range c.nodes {
		if s.PID() == 0 {
			continue
		}
		info, err := query(ctx, s.Addr(), "cluster", "info")
		if err != nil {
			return err
		}
		if infoField(info, "cluster_state") != "ok" {
			return fmt.Errorf("%s: cluster_state %q", s.Addr(), infoField(info, "cluster_state"))
		}
		text, err := query(ctx, s.Addr(), "cluster", "nodes")
		if err != nil {
			return err
		}
		nodes, err := parseClusterNodes(text)
		if err != nil {
			return err
		}
		if len(nodes) != len(c.nodes) {
			return fmt.Errorf("%s knows %d of %d nodes", s.Addr(), len(nodes), len(c.nodes))
		}
		covered := 0
		for _, n := range nodes {
			if n.Master && !n.Failed {
				for _, r := range n.Slots {
					covered += r[1] - r[0] + 1
				}
			}
		}
		if covered != base.SlotCount {
			return fmt.Errorf("%s sees %d of %d slots served", s.Addr(), covered, base.SlotCount)
		}
		if err := replicaSynced(ctx, s.Addr()); err != nil {
			return err
		}
		views[s.Addr()] = nodes
	}
	// Every running node's role, as it sees itself, is known to all.
	for self, view := range views {
		i := slices.IndexFunc(view, func(n ClusterNode) bool { return n.Addr == self })
		if i < 0 {
			return fmt.Errorf("%s does not list itself", self)
		}
		me := view[i]
		for other, ov := range views {
			j := slices.IndexFunc(ov, func(n ClusterNode) bool { return n.Addr == self })
			if j < 0 || ov[j].Failed || ov[j].Master != me.Master || ov[j].MasterID != me.MasterID {
				return fmt.Errorf("%s does not see %s as it sees itself yet", other, self)
			}
		}
	}
	return nil
}

// replicaSynced reports an error if the server at addr is a replica that is
// not connected to its master or still loading the initial sync.
func replicaSynced(ctx context.Context, addr string) error {
	info, err := query(ctx, addr, "info", "replication")
	if err != nil {
		return err
	}
	if infoField(info, "role") != "slave" {
		return nil
	}
	if st := infoField(info, "master_link_status"); st != "up" {
		return fmt.Errorf("replica %s: master link %q", addr, st)
	}
	if infoField(info, "master_sync_in_progress") != "0" {
		return fmt.Errorf("replica %s: initial sync in progress", addr)
	}
	return nil
}

// WaitFailover waits until the slots that dead served are served by
// another node (its replica, promoted), and the cluster is healthy again
// (WaitHealthy). It returns the new master. dead must have served slots
// when it was killed or frozen: call it with the master you took down.
func (c *Cluster) WaitFailover(t testing.TB, dead *Server, slot int) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), FailoverTimeout)
	defer cancel()
	var promoted *Server
	err := poll(ctx, func() error {
		nodes, err := c.topology(ctx)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if !n.Master || n.Failed || n.Addr == dead.Addr() {
				continue
			}
			for _, r := range n.Slots {
				if r[0] <= slot && slot <= r[1] {
					promoted = c.node(n.Addr)
					return c.healthy(ctx)
				}
			}
		}
		return fmt.Errorf("slot %d is not served by a new master yet", slot)
	})
	if err != nil {
		t.Fatalf("redistest: waiting for the failover of %s: %v", dead.Addr(), err)
	}
	return promoted
}

// poll calls f until it returns nil or ctx ends; it returns f's last error
// then.
func poll(ctx context.Context, f func() error) error {
	backoff := 5 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// query runs one command on addr on a fresh connection and returns its
// reply as a string.
func query(ctx context.Context, addr string, args ...any) (string, error) {
	c := redis.NewClient(&redis.Options{
		Addr:         addr,
		MaxRetries:   -1,
		DialTimeout:  time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: time.Second,
		PoolSize:     1,
		Protocol:     2,
	})
	defer c.Close()
	v, err := c.Do(ctx, args...).Text()
	if err != nil {
		return "", fmt.Errorf("%s: %v: %w", addr, args, err)
	}
	return v, nil
}

// infoField returns the value of field in an INFO (or CLUSTER INFO) reply.
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// Reroute makes cc route by the cluster's current slot map: it asks cc to
// reload its view (ClusterClient.ReloadState, which works in the
// background) and waits until cc names the current master of every master's
// first slot. A ClusterClient left alone keeps sending a dead master's slots
// to the dead address (connection refused) until a MOVED reply or its
// ClusterStateReloadInterval (60 s by default) makes it reload.
func (c *Cluster) Reroute(t testing.TB, cc *redis.ClusterClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), FailoverTimeout)
	defer cancel()
	masters := c.Masters(t)
	err := poll(ctx, func() error {
		cc.ReloadState(ctx)
		for _, m := range masters {
			slot := c.SlotRanges(t, m)[0][0]
			got, err := cc.MasterForKey(ctx, KeyInSlot("reroute", slot))
			if err != nil {
				return err
			}
			if got.Options().Addr != m.Addr() {
				return fmt.Errorf("client routes slot %d to %s, not %s", slot, got.Options().Addr, m.Addr())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: rerouting the cluster client: %v", err)
	}
}

// KeyInSlot returns a key that starts with prefix, has no hash tag, and
// hashes to slot.
func KeyInSlot(prefix string, slot int) string {
	for i := 0; ; i++ {
		k := prefix + "-" + strconv.Itoa(i)
		if base.Slot(k) == slot {
			return k
		}
	}
}

// Migration is a slot being moved from one master to another, as
// "redis-cli --cluster reshard" moves it: StartMigration marks it, MoveKeys
// moves its keys, Finish hands it over. Between StartMigration and Finish
// the slot is mid-migration: its old master answers ASK for a key it does
// not have (a client must then send ASKING and the command to the new
// master), either answers TRYAGAIN for a multi-key command whose keys are
// split between them, and the cluster's slot map still names the old
// master.
type Migration struct {
	c        *Cluster
	slot     int
	from, to ClusterNode
	finished bool
}

// StartMigration starts moving slot from its current master to the master
// to: CLUSTER SETSLOT slot IMPORTING on to, then MIGRATING on the old
// master. No key moves yet. If the test ends before Finish, the migration
// is finished in t.Cleanup (so a shared cluster is left whole).
func (c *Cluster) StartMigration(t testing.TB, slot int, to *Server) *Migration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	nodes := c.Topology(t)
	m := &Migration{c: c, slot: slot}
	for _, n := range nodes {
		if n.Addr == to.Addr() {
			m.to = n
		}
		for _, r := range n.Slots {
			if n.Master && !n.Failed && r[0] <= slot && slot <= r[1] {
				m.from = n
			}
		}
	}
	switch {
	case m.from.ID == "":
		t.Fatalf("redistest: no master serves slot %d", slot)
	case m.to.ID == "" || !m.to.Master || m.to.Failed:
		t.Fatalf("redistest: %s is not a running master", to.Addr())
	case m.to.ID == m.from.ID:
		t.Fatalf("redistest: slot %d is already served by %s", slot, to.Addr())
	}
	s := strconv.Itoa(slot)
	if _, err := query(ctx, m.to.Addr, "cluster", "setslot", s, "importing", m.from.ID); err != nil {
		t.Fatalf("redistest: starting the migration of slot %d: %v", slot, err)
	}
	if _, err := query(ctx, m.from.Addr, "cluster", "setslot", s, "migrating", m.to.ID); err != nil {
		t.Fatalf("redistest: starting the migration of slot %d: %v", slot, err)
	}
	t.Cleanup(func() {
		if !m.finished {
			m.Finish(t)
		}
	})
	return m
}

// From returns the address of the master the slot is moving from.
func (m *Migration) From() string { return m.from.Addr }

// To returns the address of the master the slot is moving to.
func (m *Migration) To() string { return m.to.Addr }

// MoveKeys moves every key of the slot that is still on the old master to
// the new one (CLUSTER GETKEYSINSLOT, then MIGRATE ... KEYS, which keeps
// their TTLs), and returns how many it moved. The slot stays
// mid-migration.
func (m *Migration) MoveKeys(t testing.TB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	n, err := m.moveKeys(ctx)
	if err != nil {
		t.Fatalf("redistest: moving the keys of slot %d: %v", m.slot, err)
	}
	return n
}

func (m *Migration) moveKeys(ctx context.Context) (int, error) {
	src := redis.NewClient(&redis.Options{Addr: m.from.Addr, MaxRetries: -1, Protocol: 2})
	defer src.Close()
	host, port, err := net.SplitHostPort(m.to.Addr)
	if err != nil {
		return 0, err
	}
	moved := 0
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, m.slot, 100).Result()
		if err != nil {
			return moved, err
		}
		if len(keys) == 0 {
			return moved, nil
		}
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
			// NOKEY: they expired or were deleted since GETKEYSINSLOT.
			if !redis.HasErrorPrefix(err, "NOKEY") {
				return moved, fmt.Errorf("MIGRATE to %s: %w", m.to.Addr, err)
			}
		}
		moved += len(keys)
	}
}

// Finish moves the keys left on the old master (MoveKeys), then assigns the
// slot to the new master on the new master, the old one and every other
// master (CLUSTER SETSLOT slot NODE), and waits until every running node
// names the new master as the slot's owner. A ClusterClient that has not
// reloaded its slot map still sends the slot to the old master, which
// answers MOVED.
func (m *Migration) Finish(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	if err := m.finish(ctx); err != nil {
		t.Fatalf("redistest: finishing the migration of slot %d: %v", m.slot, err)
	}
}

func (m *Migration) finish(ctx context.Context) error {
	m.finished = true
	if _, err := m.moveKeys(ctx); err != nil {
		return err
	}
	s := strconv.Itoa(m.slot)
	addrs := []string{m.to.Addr, m.from.Addr}
	nodes, err := m.c.topology(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Master && !n.Failed && n.Addr != m.to.Addr && n.Addr != m.from.Addr {
			addrs = append(addrs, n.Addr)
		}
	}
	for _, a := range addrs {
		if _, err := query(ctx, a, "cluster", "setslot", s, "node", m.to.ID); err != nil {
			return err
		}
	}
	return poll(ctx, func() error { return m.c.owns(ctx, m.to.Addr, m.slot) })
}

// owns reports an error unless every running node names addr as the
// master of slot, with no migration of it in progress.
func (c *Cluster) owns(ctx context.Context, addr string, slot int) error {
	for _, s := range c.nodes {
		if s.PID() == 0 {
			continue
		}
		text, err := query(ctx, s.Addr(), "cluster", "nodes")
		if err != nil {
			return err
		}
		if strings.Contains(text, "["+strconv.Itoa(slot)+"-") {
			return fmt.Errorf("%s still migrates slot %d", s.Addr(), slot)
		}
		nodes, err := parseClusterNodes(text)
		if err != nil {
			return err
		}
		owner := ""
		for _, n := range nodes {
			for _, r := range n.Slots {
				if n.Master && r[0] <= slot && slot <= r[1] {
					owner = n.Addr
				}
			}
		}
		if owner != addr {
			return fmt.Errorf("%s sees slot %d at %q, not %s", s.Addr(), slot, owner, addr)
		}
	}
	return nil
}

// MigrateSlot moves slot from its master to the master to, keys and all
// (StartMigration, then Finish), and returns once every node agrees.
func (c *Cluster) MigrateSlot(t testing.TB, slot int, to *Server) {
	t.Helper()
	c.StartMigration(t, slot, to).Finish(t)
}
