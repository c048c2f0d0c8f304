package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// node is one Redis server the comparison runs against: a redis-server
// process it started itself on a free loopback port, or an embedded
// miniredis. It never connects to a server it did not start.
type node struct {
	addr  string
	mini  *miniredis.Miniredis
	cmd   *exec.Cmd
	done  chan struct{} // closed when the redis-server process has exited
	dir   string
	admin *redis.Client // for INFO, never used by a contender
}

// startNodes starts n servers: redis-server processes unless useMini, or
// miniredis instances.
func startNodes(n int, useMini bool) ([]*node, error) {
	var nodes []*node
	for range n {
		var nd *node
		var err error
		if useMini {
			nd, err = startMini()
		} else {
			nd, err = startRedis(nil)
		}
		if err != nil {
			stopNodes(nodes)
			return nil, err
		}
		nd.admin = redis.NewClient(&redis.Options{Addr: nd.addr})
		nodes = append(nodes, nd)
	}
	return nodes, nil
}

func stopNodes(nodes []*node) {
	for _, nd := range nodes {
		nd.stop()
	}
}

func startMini() (*node, error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, err
	}
	m.ClockTTL(true) // keys expire on the real clock, as on a real server
	return &node{addr: m.Addr(), mini: m}, nil
}

// startRedis starts a redis-server without persistence on a free loopback
// port, in a temporary directory, and waits until it answers as itself.
// extra, if not nil, returns more arguments for the port being tried.
func startRedis(extra func(port int) ([]string, error)) (*node, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 { // a port that looked free may be taken before redis binds it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		args := []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no",
		}
		if extra != nil {
			more, err := extra(port)
			if err != nil {
				return nil, err
			}
			args = append(args, more...)
		}
		dir, err := os.MkdirTemp("", "rlock-bench-redis-")
		if err != nil {
			return nil, err
		}
		nd := &node{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, done: make(chan struct{})}
		nd.cmd = exec.Command(bin, append(args, "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))...)
		nd.cmd.Dir = dir
		// The server dies with the benchmark even if it is killed.
		nd.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := nd.cmd.Start(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		go func() { _ = nd.cmd.Wait(); close(nd.done) }()
		if lastErr = nd.waitReady(); lastErr == nil {
			return nd, nil
		}
		nd.stop()
	}
	return nil, fmt.Errorf("starting redis-server: %w", lastErr)
}

// waitReady waits until the process logged that it accepts connections and
// then answers INFO on its port with its own pid.
func (nd *node) waitReady() error {
	deadline := time.Now().Add(5 * time.Second)
	pid := nd.cmd.Process.Pid
	for time.Now().Before(deadline) {
		select {
		case <-nd.done:
			return errors.New("redis-server exited during startup (port taken?)")
		default:
		}
		log, _ := os.ReadFile(filepath.Join(nd.dir, "redis.log"))
		if strings.Contains(string(log), "Ready to accept connections") {
			c := redis.NewClient(&redis.Options{Addr: nd.addr, MaxRetries: -1})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			info, err := c.Info(ctx, "server").Result()
			cancel()
			_ = c.Close()
			if err == nil {
				if infoField(info, "process_id") == strconv.Itoa(pid) {
					return nil
				}
				return fmt.Errorf("another server answers on %s", nd.addr)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("redis-server (pid %d) not ready on %s", pid, nd.addr)
}

// stop ends the server: SIGTERM to its pid, SIGKILL after 5 s.
func (nd *node) stop() {
	if nd.admin != nil {
		_ = nd.admin.Close()
	}
	if nd.mini != nil {
		nd.mini.Close()
		return
	}
	if nd.cmd != nil && nd.cmd.Process != nil {
		_ = nd.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-nd.done:
		case <-time.After(5 * time.Second):
			_ = nd.cmd.Process.Kill()
			<-nd.done
		}
	}
	if nd.dir != "" {
		_ = os.RemoveAll(nd.dir)
	}
}

// cluster is a Redis Cluster of three masters with one replica each, six
// redis-server processes the benchmark started.
type cluster struct {
	nodes []*node
}

// startCluster starts six cluster-enabled servers, joins them with
// "redis-cli --cluster create ... --cluster-replicas 1" and waits until
// every node reports cluster_state:ok and every replica is in sync.
func startCluster(ctx context.Context) (*cluster, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, err
	}
	c := &cluster{}
	for range 6 {
		nd, err := startRedis(func(port int) ([]string, error) {
			bus, err := freePort()
			if err != nil || bus == port {
				return nil, fmt.Errorf("no free cluster bus port: %v", err)
			}
			return []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "5000", "--cluster-port", strconv.Itoa(bus),
				"--repl-diskless-sync-delay", "0"}, nil
		})
		if err != nil {
			c.stop()
			return nil, err
		}
		nd.admin = redis.NewClient(&redis.Options{Addr: nd.addr})
		c.nodes = append(c.nodes, nd)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs(c.nodes)...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for {
		err := c.healthy(ctx)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			c.stop()
			return nil, fmt.Errorf("the cluster did not come up: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// healthy reports why the cluster is not yet usable: every node must see
// cluster_state:ok and every replica must be in sync with its master.
func (c *cluster) healthy(ctx context.Context) error {
	for _, nd := range c.nodes {
		info, err := nd.admin.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if v := infoField(info, "cluster_state"); v != "ok" {
			return fmt.Errorf("%s: cluster_state %q", nd.addr, v)
		}
		repl, err := nd.admin.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if infoField(repl, "role") == "slave" && infoField(repl, "master_link_status") != "up" {
			return fmt.Errorf("%s: replica not in sync", nd.addr)
		}
	}
	return nil
}

// masters returns the nodes that are masters now.
func (c *cluster) masters(ctx context.Context) ([]*node, error) {
	var out []*node
	for _, nd := range c.nodes {
		repl, err := nd.admin.Info(ctx, "replication").Result()
		if err != nil {
			return nil, err
		}
		if infoField(repl, "role") == "master" {
			out = append(out, nd)
		}
	}
	return out, nil
}

func (c *cluster) stop() {
	if c != nil {
		stopNodes(c.nodes)
	}
}

// pid returns the redis-server's process id, 0 for miniredis.
func (nd *node) pid() int {
	if nd.cmd == nil || nd.cmd.Process == nil {
		return 0
	}
	return nd.cmd.Process.Pid
}

// commandCalls returns the total number of commands the server has run
// (INFO commandstats), without the INFO calls themselves; -1 on miniredis,
// which keeps no such statistics.
func (nd *node) commandCalls(ctx context.Context) (int64, error) {
	if nd.mini != nil {
		return -1, nil
	}
	info, err := nd.admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "cmdstat_")
		if !ok {
			continue
		}
		name, fields, _ := strings.Cut(rest, ":")
		if name == "info" {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("INFO commandstats: %q", sc.Text())
				}
				total += n
			}
		}
	}
	return total, nil
}

// pubsubConnections counts the server's client connections in pub/sub mode
// (flag P in CLIENT LIST); -1 on miniredis.
func (nd *node) pubsubConnections(ctx context.Context) (int, error) {
	if nd.mini != nil {
		return -1, nil
	}
	list, err := nd.admin.ClientList(ctx).Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for line := range strings.SplitSeq(list, "\n") {
		for f := range strings.FieldsSeq(line) {
			if v, ok := strings.CutPrefix(f, "flags="); ok && strings.Contains(v, "P") {
				n++
			}
		}
	}
	return n, nil
}

// commandCallsAll sums commandCalls over nodes; -1 if any is unknown.
func commandCallsAll(ctx context.Context, nodes []*node) (int64, error) {
	var total int64
	for _, nd := range nodes {
		n, err := nd.commandCalls(ctx)
		if err != nil {
			return 0, err
		}
		if n < 0 {
			return -1, nil
		}
		total += n
	}
	return total, nil
}

func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

// cpusAllowed returns the CPUs a process may run on
// (Cpus_allowed_list in /proc/PID/status), "" when unknown.
func cpusAllowed(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	return infoField(string(data), "Cpus_allowed_list")
}
