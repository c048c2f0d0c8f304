package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/inspect"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/rwlock"
)

// bin is the rlock binary built once by TestMain; the end-to-end tests run it.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rlock-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "rlock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building rlock: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// runBin runs the binary with stdin as its standard input (not a terminal)
// and returns its exit status and output.
func runBin(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("running rlock %q: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// runIn runs the command in-process, with stdin presented as a terminal.
func runIn(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	e := env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, stdinTTY: true}
	code = run(context.Background(), args, e)
	return code, out.String(), errb.String()
}

// redisURL returns the --redis flag for b.
func redisURL(b *redistest.Backend) string { return "--redis=redis://" + b.Addr }

// startCluster starts a one-node Redis Cluster owning every slot and returns
// its address.
func startCluster(t *testing.T) string {
	t.Helper()
	s := redistest.StartServer(t, "--cluster-enabled", "yes")
	rdb := s.NewClient(t)
	ctx := context.Background()
	require.NoError(t, rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err())
	require.Eventually(t, func() bool {
		info, err := rdb.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}, 10*time.Second, 10*time.Millisecond, "cluster did not become ready")
	return s.Addr()
}

// hold takes lock name for owner on a client of rdb with a one-minute
// lease and returns the handle's owner field.
func hold(t *testing.T, rdb rlock.Redis, clientID, owner, name string, times int) (*reentrant.Lock, string) {
	t.Helper()
	c, err := rlock.NewClient(rdb, rlock.WithClientID(clientID))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l, err := reentrant.New(c, name, reentrant.WithLease(time.Minute))
	require.NoError(t, err)
	ctx := rlock.WithOwner(context.Background(), owner)
	for range times {
		require.NoError(t, l.Lock(ctx))
	}
	field, err := l.Owner(ctx)
	require.NoError(t, err)
	return l, field
}

// demoLine returns the fields of the result row of run kind.
func demoLine(t *testing.T, out, kind string) []string {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, kind+" ") {
			f := strings.Fields(line)
			require.Len(t, f, 7, out)
			return f
		}
	}
	t.Fatalf("no %q row in:\n%s", kind, out)
	return nil
}

func TestDemo(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		code, out, errOut := runBin(t, "", "demo", "--progress=off", "--services=2", "--workers=4", "--stock=30", "--work=1ms", redisURL(b))
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "rlock demo: skipping the redlock run: add --redlock host:port,... (independent servers) to include it\n", errOut)
		require.Contains(t, out, "With a lock, nothing was oversold.")
		for _, kind := range []string{"reentrant", "fair", "multilock"} {
			require.Equal(t, []string{"30", "0", "0"}, demoLine(t, out, kind)[2:5], "%s: sold 30, none left, none oversold", kind)
		}
		demoLine(t, out, "none")
		keys, err := b.NewClient(t).Keys(context.Background(), "*").Result()
		require.NoError(t, err)
		require.Empty(t, keys, "the demo cleans up after itself, replay latches included")
	})
}

// TestDemoEveryKind: the default demo (embedded Redis, three embedded
// RedLock nodes) runs every lock kind, and none oversells.
func TestDemoEveryKind(t *testing.T) {
	code, out, errOut := runBin(t, "", "demo", "--progress=off", "--services=2", "--workers=3", "--stock=20", "--work=0s")
	require.Equal(t, 0, code, errOut)
	for _, kind := range []string{"reentrant", "fair", "multilock", "redlock"} {
		require.Equal(t, []string{"20", "0", "0"}, demoLine(t, out, kind)[2:5], "%s: sold 20, none left, none oversold", kind)
	}
}

func TestDemoEmbedded(t *testing.T) {
	// The default: an embedded miniredis, and plain progress lines on a
	// stderr that is not a terminal.
	code, out, errOut := runBin(t, "", "demo", "--services=2", "--workers=2", "--stock=10", "--work=0s", "--locks=reentrant", "--redlock=127.0.0.1:1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "an embedded miniredis")
	require.Equal(t, []string{"10", "0", "0"}, demoLine(t, out, "reentrant")[2:5])
	require.NotContains(t, out, "\nnone ")
	require.Contains(t, errOut, "run reentrant started")
	require.Contains(t, errOut, "run reentrant done: 100% sold")
	require.Contains(t, errOut, "--redlock ignored")
}

func TestDemoRedlockNodes(t *testing.T) {
	// The plumbing for a RedLock run: a kind marked redlock gets one client
	// per node, embedded nodes by default and --redlock nodes when given.
	// The stand-in kind locks on the first node only.
	saved := lockKinds
	t.Cleanup(func() { lockKinds = saved })
	lockKinds = append(slices.Clone(saved), lockKind{name: "nodes", redlock: true,
		newLocker: func(svc *service, name string) (rlock.Locker, error) {
			if len(svc.redlock) != 3 {
				return nil, fmt.Errorf("%d redlock clients, want 3", len(svc.redlock))
			}
			return reentrant.New(svc.redlock[0], name)
		}})
	args := []string{"demo", "--progress=off", "--services=2", "--workers=2", "--stock=5", "--work=0s", "--locks=nodes"}
	code, out, errOut := runIn("", args...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"5", "0", "0"}, demoLine(t, out, "nodes")[2:5])

	var addrs []string
	var nodes []*redistest.Backend
	for range 3 {
		n := redistest.Mini(t)
		nodes = append(nodes, n)
		addrs = append(addrs, n.Addr)
	}
	code, out, errOut = runIn("", append(args, "--redlock="+strings.Join(addrs, ","))...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, []string{"5", "0", "0"}, demoLine(t, out, "nodes")[2:5])
	for _, n := range nodes {
		require.Empty(t, n.Mini.Keys(), "the run's keys are deleted on every node")
	}

	code, _, errOut = runIn("", append(args, "--redlock="+addrs[0]+",127.0.0.1:1")...)
	require.Equal(t, 3, code, errOut)
	require.Contains(t, errOut, "cannot reach RedLock node 127.0.0.1:1")

	b := redistest.Mini(t)
	code, _, errOut = runIn("", append(args, redisURL(b))...)
	require.Equal(t, 2, code, "a RedLock run asked for by name needs nodes")
	require.Contains(t, errOut, "needs --redlock")
}

func TestInspect(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		const name = "cli-inspect"
		_, field := hold(t, rdb, "client-a", "worker-1", name, 2)

		// A token counter and a fair queue written by hand (Redisson's
		// layout): one overdue waiter, one with 30 s left; and a client
		// subscribed to the lock channel.
		k := inspect.KeysOf(name)
		now := time.Now()
		require.NoError(t, rdb.Set(ctx, k.Token, 41, 0).Err())
		require.NoError(t, rdb.RPush(ctx, k.Queue, "client-b:w1", "client-c:w2").Err())
		require.NoError(t, rdb.ZAdd(ctx, k.Timeout,
			redis.Z{Member: "client-b:w1", Score: float64(now.Add(-5 * time.Second).UnixMilli())},
			redis.Z{Member: "client-c:w2", Score: float64(now.Add(30 * time.Second).UnixMilli())}).Err())
		ps := rdb.Subscribe(ctx, base.Channel(name))
		t.Cleanup(func() { _ = ps.Close() })
		_, err := ps.Receive(ctx)
		require.NoError(t, err)

		code, out, errOut := runBin(t, "", "inspect", name, redisURL(b), "--json")
		require.Equal(t, 0, code, errOut)
		var j jsonReport
		require.NoError(t, json.Unmarshal([]byte(out), &j), out)
		require.Equal(t, name, j.Name)
		require.True(t, j.Locked)
		require.Equal(t, []jsonHolder{{Field: field, ClientID: "client-a", OwnerID: "worker-1", Holds: 2}}, j.Holders)
		require.NotNil(t, j.TTLMillis)
		require.Greater(t, *j.TTLMillis, int64(50_000))
		require.False(t, j.NoExpiry)
		require.NotNil(t, j.Token)
		require.EqualValues(t, 41, *j.Token)
		require.EqualValues(t, 1, j.Subscribers)
		require.Equal(t, base.Channel(name), j.Channel)
		require.Len(t, j.Queue, 2)
		require.True(t, j.Queue[0].Overdue)
		require.Less(t, *j.Queue[0].InMillis, int64(0))
		require.False(t, j.Queue[1].Overdue)
		require.Greater(t, *j.Queue[1].InMillis, int64(20_000))
		require.Equal(t, base.Channel(name)+":client-c:w2", j.Queue[1].Channel)

		code, out, errOut = runBin(t, "", "inspect", redisURL(b), name)
		require.Equal(t, 0, code, errOut)
		for _, want := range []string{
			"lock         " + name, "state        held, TTL ", "holders      " + field + "  2 holds",
			"client client-a, owner worker-1", "token        41", "subscribers  1 client on " + base.Channel(name),
			"fair queue   2 waiters, head first", " 1. client-b:w1", "(overdue", " 2. client-c:w2", "(in ", "0 clients subscribed",
		} {
			require.Contains(t, out, want)
		}
	})
}

// TestInspectNoSuchLock: a name with no key and no waiter is "no such
// lock" (exit 0, "exists": false), not a plain "free"; a free lock that left
// a key behind (its token counter) is "free".
func TestInspectNoSuchLock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		code, out, errOut := runBin(t, "", "inspect", "--fair", redisURL(b), "cli-free")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "state        no such lock (no key and no waiter: free, if the name is right)")
		require.NotContains(t, out, "state        free")
		require.Contains(t, out, "token        none")
		require.Contains(t, out, "fair queue   empty")

		code, out, errOut = runBin(t, "", "inspect", "--json", redisURL(b), "cli-free")
		require.Equal(t, 0, code, errOut)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &got), out)
		_, err := time.Parse(time.RFC3339Nano, got["time"].(string))
		require.NoError(t, err)
		delete(got, "time")
		require.Equal(t, map[string]any{"name": "cli-free", "exists": false, "locked": false, "holders": []any{}, "ttl_ms": nil,
			"no_expiry": false, "token": nil, "channel": base.Channel("cli-free"), "subscribers": float64(0),
			"queue": []any{}}, got)

		code, out, errOut = runBin(t, "", "unlock", "--force", "--yes", redisURL(b), "cli-free")
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "No such lock cli-free (no key and no waiter); nothing to do.\n", out)

		// Released, with its fencing counter left behind: free.
		require.NoError(t, b.NewClient(t).Set(context.Background(), inspect.KeysOf("cli-was-held").Token, 3, 0).Err())
		code, out, errOut = runBin(t, "", "inspect", redisURL(b), "cli-was-held")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "state        free\n")
		code, out, errOut = runBin(t, "", "inspect", "--json", redisURL(b), "cli-was-held")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, `"exists":true,"locked":false`)
		code, out, errOut = runBin(t, "", "unlock", "--force", "--yes", redisURL(b), "cli-was-held")
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "cli-was-held is not locked; nothing to do.\n", out)
	})
}

func TestInspectRedissonLocks(t *testing.T) {
	b := redistest.Real(t)
	rdb := b.NewClient(t)
	require.NoError(t, rdb.HSet(context.Background(), "cli-java", "java-client:1", 1).Err())
	require.NoError(t, rdb.PExpire(context.Background(), "cli-java", time.Minute).Err())
	code, out, errOut := runBin(t, "", "inspect", redisURL(b), "cli-java")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "held, TTL")
	require.Contains(t, out, "client java-client, owner 1")

	require.NoError(t, rdb.HSet(context.Background(), "cli-rw", "mode", "write", "java-client:1:write", 1).Err())
	require.NoError(t, rdb.PExpire(context.Background(), "cli-rw", time.Minute).Err())
	code, out, errOut = runBin(t, "", "inspect", redisURL(b), "cli-rw")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "mode         write (a Redisson read-write lock)")
	require.Contains(t, out, "java-client:1:write  1 hold")
	code, _, errOut = runBin(t, "", "unlock", "--force", "--yes", redisURL(b), "cli-rw")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "Redisson read-write lock")
}

func TestCluster(t *testing.T) {
	// One cluster for both subtests: a new one takes 2 s to accept writes.
	addr := startCluster(t)
	t.Run("demo", func(t *testing.T) {
		code, out, errOut := runBin(t, "", "demo", "--progress=off", "--services=2", "--workers=2", "--stock=10", "--work=0s", "--cluster="+addr)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "Redis Cluster at "+addr)
		require.Equal(t, []string{"10", "0", "0"}, demoLine(t, out, "reentrant")[2:5])
	})
	t.Run("inspect", func(t *testing.T) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
		t.Cleanup(func() { _ = rdb.Close() })
		const name = "{orders}:cli"
		_, field := hold(t, rdb, "client-a", "w", name, 1)
		ps := rdb.Subscribe(context.Background(), base.Channel(name))
		t.Cleanup(func() { _ = ps.Close() })
		_, err := ps.Receive(context.Background())
		require.NoError(t, err)

		code, out, errOut := runBin(t, "", "inspect", "--json", "--cluster="+addr, name)
		require.Equal(t, 0, code, errOut)
		var j jsonReport
		require.NoError(t, json.Unmarshal([]byte(out), &j), out)
		require.Equal(t, field, j.Holders[0].Field)
		require.EqualValues(t, 1, j.Subscribers)
		require.Equal(t, base.ChannelPrefix+":{orders}:cli", j.Channel)
	})
}

func TestInspectWatch(t *testing.T) {
	b := redistest.Mini(t)
	rdb := b.NewClient(t)
	l, _ := hold(t, rdb, "client-a", "w", "cli-watch", 1)

	cmd := exec.Command(bin, "inspect", "--watch", "--json", "--interval=20ms", redisURL(b), "cli-watch")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errb lockedBuffer
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := bufio.NewScanner(stdout)

	next := func() jsonReport {
		t.Helper()
		require.True(t, lines.Scan(), "stderr: %s", errb.String())
		var j jsonReport
		require.NoError(t, json.Unmarshal(lines.Bytes(), &j))
		return j
	}
	require.True(t, next().Locked)
	require.NoError(t, l.Unlock(rlock.WithOwner(context.Background(), "w")))
	for next().Locked { // refreshes until it sees the release
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	for lines.Scan() {
	}
	require.NoError(t, cmd.Wait(), "Ctrl-C ends --watch with status 0; stderr: %s", errb.String())
}

func TestInspectNotALock(t *testing.T) {
	b := redistest.Mini(t)
	require.NoError(t, b.Mini.Set("cli-string", "v"))
	code, _, errOut := runBin(t, "", "inspect", redisURL(b), "cli-string")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not a lock")
}

func TestUnlockForce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		const name = "cli-unlock"
		l, field := hold(t, rdb, "client-a", "w", name, 3)

		code, out, errOut := runBin(t, "", "unlock", "--force", "--yes", redisURL(b), name)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "Force-unlocked "+name+" (was held by "+field+" (3 holds), TTL ")
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked)
		require.ErrorIs(t, l.Unlock(rlock.WithOwner(ctx, "w")), rlock.ErrNotHeld, "the holder learns of it at its next Unlock")

		code, out, errOut = runBin(t, "", "unlock", name, "--force", "--yes", redisURL(b))
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "No such lock "+name+" (no key and no waiter); nothing to do")
	})
}

// TestUnlockForceFair: force-unlocking a fair lock wakes the waiter first in
// line on its own channel; with long timeouts nothing else could grant it.
func TestUnlockForceFair(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		const name = "cli-unlock-fair"
		c, err := rlock.NewClient(b.NewClient(t), rlock.WithMaxPoll(time.Hour))
		require.NoError(t, err)
		defer c.Close()
		holder, err := fair.New(c, name, fair.WithLease(time.Hour))
		require.NoError(t, err)
		require.NoError(t, holder.Lock(ctx))
		waiter, err := fair.New(c, name, fair.WithQueueTimeout(time.Hour))
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- waiter.Lock(ctx) }()
		require.Eventually(t, func() bool {
			q, err := holder.Queue(ctx)
			return err == nil && len(q) == 1
		}, 10*time.Second, time.Millisecond)

		code, out, errOut := runBin(t, "", "unlock", "--force", "--yes", redisURL(b), name)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "Force-unlocked "+name)
		require.Contains(t, errOut, "fair queue of 1 waiter")
		require.NoError(t, <-done, "the head of the queue was woken")
		require.NoError(t, waiter.Unlock(ctx))
	})
}

func TestUnlockRefusals(t *testing.T) {
	b := redistest.Mini(t)
	rdb := b.NewClient(t)
	l, _ := hold(t, rdb, "client-a", "w", "cli-keep", 1)
	ctx := context.Background()
	stillLocked := func() {
		t.Helper()
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		require.True(t, locked)
	}

	code, _, errOut := runBin(t, "y\n", "unlock", redisURL(b), "cli-keep")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "needs --force")
	stillLocked()

	code, _, errOut = runBin(t, "y\n", "unlock", "--force", redisURL(b), "cli-keep")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "stdin is not a terminal; add --yes")
	stillLocked()

	require.NoError(t, b.Mini.Set("cli-string", "v"))
	code, _, errOut = runBin(t, "", "unlock", "--force", "--yes", redisURL(b), "cli-string")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not a lock")
	require.True(t, b.Mini.Exists("cli-string"), "a key that is not a lock is never deleted")

	b.Mini.HSet("cli-counters", "orders", "5")
	code, _, errOut = runBin(t, "", "unlock", "--force", "--yes", redisURL(b), "cli-counters")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not a lock")
	require.True(t, b.Mini.Exists("cli-counters"))
}

func TestUnlockConfirm(t *testing.T) {
	// In-process, with stdin presented as a terminal.
	b := redistest.Mini(t)
	rdb := b.NewClient(t)
	l, field := hold(t, rdb, "client-a", "w", "cli-confirm", 1)
	ctx := context.Background()

	for _, answer := range []string{"", "n\n", "no\n", "maybe\n"} {
		code, _, errOut := runIn(answer, "unlock", "--force", redisURL(b), "cli-confirm")
		require.Equal(t, 1, code, "answer %q", answer)
		require.Contains(t, errOut, "Force-unlock cli-confirm held by "+field+" (1 hold), TTL ")
		require.Contains(t, errOut, "[y/N]")
		require.Contains(t, errOut, "not unlocked")
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		require.True(t, locked)
	}
	code, out, errOut := runIn("Y\n", "unlock", "--force", redisURL(b), "cli-confirm")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Force-unlocked cli-confirm")
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	require.False(t, locked)
}

func TestBadInput(t *testing.T) {
	b := redistest.Mini(t)
	r := redisURL(b)
	long := strings.Repeat("x", base.MaxNameLen+1)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "Usage:"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"demo", "--services=0"}, 2, "--services must be 1..64"},
		{[]string{"demo", "--stock=-1"}, 2, "--stock must be"},
		{[]string{"demo", "--no-such-flag"}, 2, "flag provided but not defined: -no-such-flag"},
		{[]string{"demo", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"demo", "--redis=http://[::1"}, 2, "--redis"},
		{[]string{"demo", "--redis=redis://127.0.0.1:99999"}, 2, "port must be 1..65535"},
		{[]string{"demo", "--locks=bogus"}, 2, `unknown lock kind "bogus"`},
		{[]string{"demo", "--progress=sometimes"}, 2, "want auto, bar, plain or off"},
		{[]string{"demo", "--redlock=nohost"}, 2, "--redlock: bad address"},
		{[]string{"demo", "--redis=redis://127.0.0.1:1", "--cluster=127.0.0.1:2"}, 2, "not both"},
		{[]string{"demo", "--progress=off", "--redis=redis://127.0.0.1:1"}, 3, "cannot reach Redis at 127.0.0.1:1"},
		{[]string{"inspect", r}, 2, "missing lock NAME"},
		{[]string{"inspect", r, ""}, 2, "empty lock name"},
		{[]string{"inspect", r, long}, 2, "more than 1024"},
		{[]string{"inspect", r, "a", "b"}, 2, "one lock NAME expected"},
		{[]string{"inspect", r, "--interval=0s", "a"}, 2, "--interval must be positive"},
		{[]string{"inspect", "--cluster=,", "a"}, 2, "--cluster: no addresses"},
		{[]string{"inspect", "--cluster=127.0.0.1", "a"}, 2, "want host:port"},
		{[]string{"inspect", "--redis=redis://:1", "a"}, 2, "no host"},
		{[]string{"inspect", "--bogus", "a"}, 2, "flag provided but not defined"},
		{[]string{"inspect", "--redis=redis://127.0.0.1:1", "a"}, 3, "cannot reach Redis at 127.0.0.1:1"},
		{[]string{"inspect", "--cluster=127.0.0.1:1", "a"}, 3, "cannot reach Redis Cluster at 127.0.0.1:1"},
		{[]string{"unlock", "--force", "--yes", r, ""}, 2, "empty lock name"},
		{[]string{"unlock", "--force", "--yes", "--redis=redis://127.0.0.1:1", "a"}, 3, "cannot reach"},
		{[]string{"unlock", "--force", "--yes", "--redis=bogus://x", "a"}, 2, "--redis"},
	} {
		code, _, errOut := runBin(t, "", tc.args...)
		require.Equal(t, tc.code, code, "%q: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, "%q", tc.args)
	}
	for _, args := range [][]string{{"help"}, {"--help"}} {
		code, out, _ := runBin(t, "", args...)
		require.Equal(t, 0, code)
		require.Contains(t, out, "rlock inspect")
		require.Contains(t, out, "Exit status:")
	}
	for _, cmd := range []string{"demo", "inspect", "unlock"} {
		code, _, errOut := runBin(t, "", cmd, "-h")
		require.Equal(t, 0, code)
		require.Contains(t, errOut, "Usage: rlock "+cmd)
		require.Contains(t, errOut, "Exit status")
	}
}

func TestParse(t *testing.T) {
	// Flags may follow NAME; after "--" everything is positional.
	b := redistest.Mini(t)
	code, out, errOut := runIn("", "inspect", "--", "-name", redisURL(b))
	require.Equal(t, 2, code, out+errOut)
	require.Contains(t, errOut, "one lock NAME expected, got 2")
	code, out, errOut = runIn("", "inspect", "name", redisURL(b), "--fair", "--", "-x")
	require.Equal(t, 2, code, out+errOut)
	code, out, errOut = runIn("", "inspect", redisURL(b), "--", "-name")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "lock         -name")
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestInspectAndUnlockRWLock: inspect shows an rlock read-write lock's
// readers with their leases and its waiting writer (text and JSON);
// unlock --force deletes it and wakes the waiting writer at once (its
// writer wait and the readers' leases are an hour: only the wake-up can
// grant it in time).
func TestInspectAndUnlockRWLock(t *testing.T) {
	b := redistest.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := rlock.NewClient(b.NewClient(t), rlock.WithMaxPoll(time.Hour))
	require.NoError(t, err)
	defer c.Close()
	name := "cli-rwlock"
	opts := []rwlock.Option{rwlock.WithLease(time.Hour), rwlock.WithWriterWait(time.Hour)}
	r, err := rwlock.New(c, name, opts...)
	require.NoError(t, err)
	require.NoError(t, r.ReadLock().Lock(ctx))
	w, err := rwlock.New(c, name, opts...)
	require.NoError(t, err)
	wrote := make(chan error, 1)
	go func() { wrote <- w.WriteLock().Lock(ctx) }()
	require.Eventually(t, func() bool {
		ws, err := w.WaitingWriters(ctx)
		return err == nil && len(ws) == 1
	}, 10*time.Second, time.Millisecond)

	code, out, errOut := runBin(t, "", "inspect", redisURL(b), name)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "mode         read (a Redisson read-write lock)")
	require.Regexp(t, `1 hold  \(reader, lease (59m59\.\d|1h0m0)s?\)`, out)
	require.Contains(t, out, "waiting      1 writer keeps new readers out")
	require.Contains(t, out, "redisson_rwlock:{cli-rwlock}")
	code, out, errOut = runBin(t, "", "inspect", "--json", redisURL(b), name)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"waiting_writers":[{"field":`)
	require.Contains(t, out, `"writer":false,"read_lease_ms":`)

	code, _, errOut = runBin(t, "", "unlock", "--force", "--yes", redisURL(b), name)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "every waiter was woken")
	require.NoError(t, <-wrote, "the waiting writer was woken and granted")
	require.ErrorIs(t, r.ReadLock().Unlock(ctx), rlock.ErrNotHeld)
	require.NoError(t, w.WriteLock().Unlock(ctx))
}

// TestDemoPriceCache: the read-heavy run reports no torn read under the
// read-write lock.
func TestDemoPriceCache(t *testing.T) {
	code, out, errOut := runBin(t, "", "demo", "--progress=off", "--services=2", "--workers=3", "--stock=5", "--work=1ms", "--locks=none", "--price-cache=10")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `rwlock +\d+ +10 +0 `, out)
	require.Contains(t, out, "With the read-write lock, no reader saw a half-written price.")
}

// TestProgressFlagHelpAndParser: the help shows --progress=MODE and says a
// bare --progress means bar; the parser does both, and "--progress plain"
// (a mode without "=") is a usage error that gives the right spelling.
func TestProgressFlagHelpAndParser(t *testing.T) {
	code, _, errOut := runIn("", "demo", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "--progress=MODE")
	require.Contains(t, errOut, "--progress alone means bar")

	small := []string{"demo", "--services=1", "--workers=1", "--stock=3", "--work=0s", "--locks=none", "--price-cache=0"}
	code, _, errOut = runIn("", append(small, "--progress")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "[###", "a bare --progress draws a bar, even when stderr is not a terminal")
	code, _, errOut = runIn("", append(small, "--progress=plain")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "run none started")
	require.NotContains(t, errOut, "[###")

	code, _, errOut = runIn("", append(small, "--progress", "plain")...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, `unexpected argument "plain": write --progress=plain`)
}

// TestHelpCommand: "rlock help COMMAND" prints that command's help and
// flags on stdout, not the general help.
func TestHelpCommand(t *testing.T) {
	for cmd, flagName := range map[string]string{"demo": "-locks string", "inspect": "-watch", "unlock": "-force"} {
		code, out, errOut := runBin(t, "", "help", cmd)
		require.Equal(t, 0, code, errOut)
		require.True(t, strings.HasPrefix(out, "Usage: rlock "+cmd), "%s: %s", cmd, out)
		require.Contains(t, out, "\n  "+flagName+"\n", cmd)
		require.NotContains(t, out, "Run 'rlock help COMMAND'", "%s: not the general help", cmd)
		require.Empty(t, errOut)
	}
	code, out, _ := runBin(t, "", "help", "version")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "Usage: rlock version"), out)
	code, out, _ = runBin(t, "", "help", "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "rlock help [COMMAND]")

	code, _, errOut := runBin(t, "", "help", "frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown command "frobnicate"`)
	code, _, errOut = runBin(t, "", "help", "demo", "inspect")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "one command expected")
}

// TestVersion: "rlock version" prints the module version, "(devel)" when
// the build has none, the commit when known, the Go version and platform.
func TestVersion(t *testing.T) {
	code, out, errOut := runBin(t, "", "version")
	require.Equal(t, 0, code, errOut)
	goos, goarch := runtime.GOOS, runtime.GOARCH
	require.Regexp(t, `^rlock (\(devel\)|v\S+)( \(commit [0-9a-f]{1,12}(, modified)?\))? go\S+ `+goos+"/"+goarch+"\n$", out)
	code, out2, _ := runBin(t, "", "--version")
	require.Equal(t, 0, code)
	require.Equal(t, out, out2)
	code, _, errOut = runBin(t, "", "version", "extra")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unexpected argument "extra"`)

	saved := readBuildInfo
	t.Cleanup(func() { readBuildInfo = saved })
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, "rlock (devel) go1.26.0 "},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}}, "rlock v1.2.3 go1.26.0 "},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}},
			"rlock (devel) (commit 0123456789ab, modified) go1.26.0 "},
	} {
		readBuildInfo = func() (*debug.BuildInfo, bool) { return tc.bi, true }
		code, out, _ := runIn("", "version")
		require.Equal(t, 0, code)
		require.Equal(t, tc.want+goos+"/"+goarch+"\n", out)
	}
}

// TestDatabaseOutOfRange: a database the server does not have is the
// server refusing the connection (exit status 4, said so), not an
// unreachable server (3); a database number that is not one is bad usage.
func TestDatabaseOutOfRange(t *testing.T) {
	b := redistest.Real(t)
	code, _, errOut := runBin(t, "", "inspect", "--redis=redis://"+b.Addr+"/99", "a")
	require.Equal(t, 4, code, errOut)
	require.Contains(t, errOut, "Redis at "+b.Addr+" refused the connection: ERR DB index is out of range")
	require.Contains(t, errOut, "'databases' setting")
	require.NotContains(t, errOut, "cannot reach")

	code, _, errOut = runBin(t, "", "inspect", "--redis=redis://"+b.Addr+"/-1", "a")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "database -1: want a number from 0")
	code, _, errOut = runBin(t, "", "inspect", "--redis=redis://"+b.Addr+"/x", "a")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "invalid database number")

	code, _, errOut = runBin(t, "", "inspect", "--redis=redis://"+b.Addr+"/15", "a")
	require.Equal(t, 0, code, errOut)
}

// requirePassword makes the server at addr require password (set after the
// start: the harness's readiness check does not authenticate).
func requirePassword(t *testing.T, addr, password string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	require.NoError(t, rdb.ConfigSet(context.Background(), "requirepass", password).Err())
}

// TestPassword: --password (or $REDISCLI_AUTH, or the URL) authenticates to
// a server that requires it; none or a wrong one is a refusal, exit 4.
func TestPassword(t *testing.T) {
	b := redistest.Real(t)
	requirePassword(t, b.Addr, "s3cret")
	r := "--redis=redis://" + b.Addr
	for _, tc := range []struct {
		args []string
		env  string
		code int
		want string
	}{
		{[]string{r}, "", 4, "refused the connection: NOAUTH"},
		{[]string{r, "--password=wrong"}, "", 4, "refused the connection: WRONGPASS"},
		{[]string{r, "--password=s3cret"}, "", 0, ""},
		{[]string{"--redis=redis://:s3cret@" + b.Addr}, "", 0, ""},
		{[]string{r}, "s3cret", 0, ""},
		{[]string{r, "--password=s3cret", "--user=default"}, "", 0, ""},
		{[]string{"--redis=redis://:s3cret@" + b.Addr, "--password=s3cret"}, "", 2, "--password and a password in the --redis URL"},
	} {
		t.Setenv(passwordEnv, tc.env)
		code, _, errOut := runIn("", append([]string{"inspect", "a"}, tc.args...)...)
		require.Equal(t, tc.code, code, "%q: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, "%q", tc.args)
	}
}

// TestClusterPassword: --password authenticates to every node of a cluster.
func TestClusterPassword(t *testing.T) {
	addr := startCluster(t)
	requirePassword(t, addr, "s3cret")
	code, _, errOut := runBin(t, "", "inspect", "--cluster="+addr, "{x}:a")
	require.Equal(t, 4, code, errOut)
	require.Contains(t, errOut, "Redis Cluster at "+addr+" refused the connection: NOAUTH")
	code, out, errOut := runBin(t, "", "inspect", "--cluster="+addr, "--password=s3cret", "{x}:a")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "lock         {x}:a")
}

// TestConnFlags: the connection flags reach go-redis' options.
func TestConnFlags(t *testing.T) {
	fs := newFlagSet("test", "", env{stderr: io.Discard})
	var c connFlags
	c.register(fs, defaultRedisURL)
	require.NoError(t, fs.Parse(nil))
	tg, err := c.resolve(defaultRedisURL)
	require.NoError(t, err)
	opts := clientOptions(t, tg)
	require.Equal(t, 5*time.Second, opts.DialTimeout)
	require.Equal(t, 5*time.Second, tg.timeout)
	require.Nil(t, opts.TLSConfig)

	c = connFlags{}
	fs = newFlagSet("test", "", env{stderr: io.Discard})
	c.register(fs, defaultRedisURL)
	require.NoError(t, fs.Parse([]string{"--cluster=h1:1,h2:2", "--tls", "--user=u", "--password=p", "--connect-timeout=250ms"}))
	tg, err = c.resolve(defaultRedisURL)
	require.NoError(t, err)
	cc := tg.newClient().(*redis.ClusterClient)
	require.NoError(t, cc.Close())
	copts := cc.Options()
	require.Equal(t, []string{"h1:1", "h2:2"}, copts.Addrs)
	require.Equal(t, "u", copts.Username)
	require.Equal(t, "p", copts.Password)
	require.Equal(t, 250*time.Millisecond, copts.DialTimeout)
	require.Equal(t, 250*time.Millisecond, tg.timeout)
	require.NotNil(t, copts.TLSConfig)
	require.Empty(t, copts.TLSConfig.ServerName, "each node's host name is verified")
	require.EqualValues(t, tls.VersionTLS12, copts.TLSConfig.MinVersion)

	c = connFlags{redisURL: "redis://h:1", tls: true, timeout: time.Second}
	tg, err = c.resolve(defaultRedisURL)
	require.NoError(t, err)
	opts = clientOptions(t, tg)
	require.Equal(t, "h", opts.TLSConfig.ServerName)

	for _, tc := range []struct {
		c    connFlags
		want string
	}{
		{connFlags{redisURL: "redis://h:1", timeout: 0}, "--connect-timeout must be positive"},
		{connFlags{redisURL: "redis://u@h:1", user: "v", timeout: time.Second}, "--user and a user in the --redis URL"},
		{connFlags{redisURL: "unix:///tmp/redis.sock", tls: true, timeout: time.Second}, "--tls: not for a unix:// socket"},
	} {
		_, err := tc.c.resolve(defaultRedisURL)
		require.ErrorIs(t, err, errUsage)
		require.ErrorContains(t, err, tc.want)
	}
}

// clientOptions returns the options of the (closed) client of tg.
func clientOptions(t *testing.T, tg *target) *redis.Options {
	t.Helper()
	c := tg.newClient().(*redis.Client)
	require.NoError(t, c.Close())
	return c.Options()
}

// TestConnectTimeout: --connect-timeout bounds the wait for a server that
// accepts connections but never answers, and the message names it.
func TestConnectTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	code, _, errOut := runBin(t, "", "inspect", "--redis=redis://"+ln.Addr().String(), "--connect-timeout=300ms", "a")
	require.Equal(t, 3, code, errOut)
	require.Contains(t, errOut, "cannot reach Redis at "+ln.Addr().String()+": no answer within 300ms (--connect-timeout)")
	code, _, errOut = runBin(t, "", "inspect", "--connect-timeout=0s", "a")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "--connect-timeout must be positive")
}

// TestDocMatchesUsage: the package doc comment lists the commands of the
// usage text and the same exit statuses, word for word.
func TestDocMatchesUsage(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	doc := f.Doc.Text()
	words := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	section := func(s string) string {
		_, after, ok := strings.Cut(s, "Exit status:")
		require.True(t, ok, s)
		return words(after)
	}
	require.Equal(t, section(usage), section(doc))
	for _, cmd := range []string{"rlock demo [flags]", "rlock inspect [flags] NAME", "rlock unlock --force [--yes] [flags] NAME",
		"rlock version", "rlock help [COMMAND]"} {
		require.Contains(t, usage, cmd)
		require.Contains(t, doc, cmd)
	}
	for _, flagName := range []string{"--user", "--password", "$REDISCLI_AUTH", "--tls", "--connect-timeout", "5s"} {
		require.Contains(t, words(usage), flagName)
		require.Contains(t, words(doc), flagName)
	}
}

// Regression: `rlock unlock --force --yes` deleted application data, a
// plain hash session:1 = {user:42: 1} without TTL, and `inspect pageviews`
// ({home: 10, about: 3}) reported "held, no expiry, 2 holders". A key that
// does not have a lock's shape (see inspect.CheckLock) is "not a lock" to
// every command: exit 1, and nothing deleted.
func TestUnlockForceNeverDeletesApplicationData(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		require.NoError(t, rdb.HSet(ctx, "session:1", "user:42", 1).Err())
		require.NoError(t, rdb.HSet(ctx, "pageviews", "home", 10, "about", 3).Err())
		require.NoError(t, rdb.HSet(ctx, "pageviews-ttl", "home", 10, "about", 3).Err())
		require.NoError(t, rdb.PExpire(ctx, "pageviews-ttl", time.Hour).Err())
		require.NoError(t, rdb.HSet(ctx, "owner-shaped", "6f1c1f5e-2b7a-4a59-9a55-3c1d0b0c8f11:1", 1).Err())
		for _, key := range []string{"session:1", "pageviews", "pageviews-ttl", "owner-shaped"} {
			for _, args := range [][]string{
				{"unlock", "--force", "--yes", redisURL(b), key},
				{"inspect", redisURL(b), key},
				{"inspect", "--json", redisURL(b), key},
			} {
				code, out, errOut := runBin(t, "", args...)
				require.Equal(t, 1, code, "%v: %s%s", args, out, errOut)
				require.Contains(t, errOut, "not a lock", args)
				require.NotContains(t, out, "held", args)
			}
			n, err := rdb.Exists(ctx, key).Result()
			require.NoError(t, err)
			require.Equal(t, int64(1), n, "%s was deleted", key)
		}
	})
}

// Real locks of every kind, rlock's and Redisson's, are still shown and
// force-unlocked.
func TestUnlockForceEveryLockKind(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		c, err := rlock.NewClient(rdb)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		octx := rlock.WithOwner(ctx, "worker:7")
		name := redistest.Name(t)
		re, err := reentrant.New(c, name+":reentrant")
		require.NoError(t, err)
		require.NoError(t, re.Lock(octx))
		fl, err := fair.New(c, name+":fair")
		require.NoError(t, err)
		require.NoError(t, fl.Lock(octx))
		rd, err := rwlock.New(c, name+":read")
		require.NoError(t, err)
		require.NoError(t, rd.ReadLock().Lock(octx))
		wr, err := rwlock.New(c, name+":write")
		require.NoError(t, err)
		require.NoError(t, wr.WriteLock().Lock(octx))
		const java = "6f1c1f5e-2b7a-4a59-9a55-3c1d0b0c8f11:1"
		require.NoError(t, rdb.HSet(ctx, name+":redisson", java, 2).Err())
		require.NoError(t, rdb.PExpire(ctx, name+":redisson", time.Minute).Err())
		for _, kind := range []string{"reentrant", "fair", "read", "write", "redisson"} {
			key := name + ":" + kind
			code, out, errOut := runBin(t, "", "inspect", redisURL(b), key)
			require.Equal(t, 0, code, "%s: %s", kind, errOut)
			require.Contains(t, out, "held, TTL", kind)
			code, out, errOut = runBin(t, "", "unlock", "--force", "--yes", redisURL(b), key)
			require.Equal(t, 0, code, "%s: %s", kind, errOut)
			require.Contains(t, out, "Force-unlocked "+key, kind)
			n, err := rdb.Exists(ctx, key).Result()
			require.NoError(t, err)
			require.Zero(t, n, kind)
		}
	})
}

// TestConnectTimeoutFrozenServer is the regression test of "--connect-timeout
// 1s against a SIGSTOPped server exits after about 5 s": every command must
// give up at --connect-timeout, not at go-redis's read timeout and retries.
// The bound checked is 20 times the flag, far from any scheduling noise and
// well below the go-redis ReadTimeout (3 s) the bug waited for.
func TestConnectTimeoutFrozenServer(t *testing.T) {
	if os.Getenv("RLOCK_REQUIRE_REDIS") == "" {
		if _, err := exec.LookPath("redis-server"); err != nil {
			t.Skip("no redis-server")
		}
	}
	s := redistest.StartServer(t)
	s.Freeze()
	t.Cleanup(s.Thaw)
	for _, args := range [][]string{
		{"inspect", "--redis=redis://" + s.Addr(), "a"},
		{"unlock", "--force", "--yes", "--redis=redis://" + s.Addr(), "a"},
		{"demo", "--redis=redis://" + s.Addr(), "--locks=none"},
		{"demo", "--redlock=" + s.Addr() + "," + s.Addr() + "," + s.Addr(), "--locks=redlock"},
		{"inspect", "--cluster=" + s.Addr(), "a"},
	} {
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append(args, "--connect-timeout=100ms")...)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			err := cmd.Run()
			require.NoError(t, ctx.Err(), "rlock %q did not give up within 20 × --connect-timeout; stderr: %s", args, errb.String())
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, exitUnreachable, ee.ExitCode(), errb.String())
			require.Contains(t, errb.String(), "no answer within 100ms (--connect-timeout)")
		})
	}
}

// TestUsageErrorIsOneLine is the regression test of "a usage error prints
// the whole help followed by the error": a bad flag, value or argument
// prints one line that ends with a pointer to --help, and --progress=bogus
// is not called an invalid boolean.
func TestUsageErrorIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", "--bogus", "a"}, "rlock inspect: flag provided but not defined: -bogus (see 'rlock inspect --help')"},
		{[]string{"demo", "--progress=bogus"}, `rlock demo: invalid value "bogus" for --progress: want auto, bar, plain or off (see 'rlock demo --help')`},
		{[]string{"unlock", "--force", "--yes", "--connect-timeout=x", "a"}, "(see 'rlock unlock --help')"},
		{[]string{"inspect"}, "rlock inspect: missing lock NAME (see 'rlock inspect --help')"},
		{[]string{"frobnicate"}, `rlock: unknown command "frobnicate" (see 'rlock --help')`},
	} {
		code, out, errOut := runIn("", tc.args...)
		require.Equal(t, exitUsage, code, "%q: %s", tc.args, errOut)
		require.Empty(t, out, "%q", tc.args)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "%q: want one line, got:\n%s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, "%q", tc.args)
		require.NotContains(t, errOut, "invalid boolean", "%q", tc.args)
	}
}

// TestNotALockReadsTheSame: every wrong shape of key is refused by inspect
// and unlock with one message, `not a lock: key "<key>" <why>`.
func TestNotALockReadsTheSame(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		require.NoError(t, rdb.Set(ctx, "nal-string", "v", 0).Err())
		require.NoError(t, rdb.RPush(ctx, "nal-list", "v").Err())
		require.NoError(t, rdb.HSet(ctx, "nal-hash", "f", "v").Err())
		require.NoError(t, rdb.HSet(ctx, "nal-hash-ttl", "f", "v").Err())
		require.NoError(t, rdb.PExpire(ctx, "nal-hash-ttl", time.Hour).Err())
		require.NoError(t, rdb.HSet(ctx, "nal-count", "a:b", "v").Err())
		require.NoError(t, rdb.PExpire(ctx, "nal-count", time.Hour).Err())
		require.NoError(t, rdb.Set(ctx, "redisson_lock_queue:{nal-queue}", "v", 0).Err())
		for _, tc := range []struct{ name, key string }{
			{"nal-string", "nal-string"},
			{"nal-list", "nal-list"},
			{"nal-hash", "nal-hash"},
			{"nal-hash-ttl", "nal-hash-ttl"},
			{"nal-count", "nal-count"},
			{"nal-queue", "redisson_lock_queue:{nal-queue}"},
		} {
			for _, cmd := range [][]string{{"inspect"}, {"unlock", "--force", "--yes"}} {
				code, _, errOut := runIn("", append(cmd, redisURL(b), tc.name)...)
				require.Equal(t, exitFailure, code, "%s %s: %s", cmd[0], tc.name, errOut)
				require.True(t, strings.HasPrefix(errOut, fmt.Sprintf("rlock %s: not a lock: key %q ", cmd[0], tc.key)),
					"%s %s: %s", cmd[0], tc.name, errOut)
			}
		}
	})
}

// TestPasswordNotNeededWarns: a password given to a server that does not
// require one (its default user accepts any AUTH) is not silently
// accepted: every command warns, and still works.
func TestPasswordNotNeededWarns(t *testing.T) {
	b := redistest.Real(t)
	t.Setenv(passwordEnv, "")
	warning := "warning: a password was given, but Redis at " + b.Addr + " does not require one"
	for _, args := range [][]string{
		{"inspect", "a", redisURL(b), "--password=x"},
		{"inspect", "a", "--redis=redis://:x@" + b.Addr},
		{"unlock", "--force", "--yes", "a", redisURL(b), "--password=x"},
	} {
		code, _, errOut := runIn("", args...)
		require.Equal(t, exitOK, code, "%q: %s", args, errOut)
		require.Contains(t, errOut, warning, "%q", args)
	}
	code, _, errOut := runIn("", "inspect", "a", redisURL(b))
	require.Equal(t, exitOK, code, errOut)
	require.NotContains(t, errOut, "warning")

	requirePassword(t, b.Addr, "s3cret")
	code, _, errOut = runIn("", "inspect", "a", redisURL(b), "--password=s3cret")
	require.Equal(t, exitOK, code, errOut)
	require.NotContains(t, errOut, "warning", "the server requires the password")
}
