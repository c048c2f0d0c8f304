package redistest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// noLeaks must be the first thing a test calls: its cleanup then runs after
// every other cleanup of the test, when all helpers have shut down.
func noLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

func requireRealRedis(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		missing(t, SkipMessage)
	}
}

func TestEachSetGet(t *testing.T) {
	noLeaks(t)
	var ran []string
	Each(t, func(t *testing.T, b *Backend) {
		ran = append(ran, b.Name)
		switch b.Name {
		case MiniName:
			require.NotNil(t, b.Mini)
			require.Nil(t, b.Real)
			require.Equal(t, b.Mini.Addr(), b.Addr)
		case RealName:
			require.NotNil(t, b.Real)
			require.Nil(t, b.Mini)
			require.Equal(t, b.Real.Addr(), b.Addr)
		default:
			t.Fatalf("unexpected backend %q", b.Name)
		}
		ctx := t.Context()
		c := b.NewClient(t)
		require.Equal(t, b.Addr, c.Options().Addr)
		key := Name(t)
		require.NoError(t, c.Set(ctx, key, "value", 0).Err())
		got, err := c.Get(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, "value", got)
	})
	require.Contains(t, ran, MiniName)
}

func TestName(t *testing.T) {
	noLeaks(t)
	a, b := Name(t), Name(t)
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, "TestName-"), a)
	t.Run("sub test/with:odd*chars", func(t *testing.T) {
		n := Name(t)
		require.True(t, strings.HasPrefix(n, "TestName_sub_test_with_odd_chars-"), n)
	})
}

func TestMiniTTLFollowsClock(t *testing.T) {
	noLeaks(t)
	b := Mini(t)
	c := b.NewClient(t)
	key := Name(t)
	require.NoError(t, c.Set(t.Context(), key, "v", 50*time.Millisecond).Err())
	require.Eventually(t, func() bool {
		return errors.Is(c.Get(t.Context(), key).Err(), redis.Nil)
	}, 5*time.Second, 10*time.Millisecond)
}

func TestRestartLosesData(t *testing.T) {
	noLeaks(t)
	Each(t, func(t *testing.T, b *Backend) {
		ctx := t.Context()
		c := b.NewClient(t)
		key := Name(t)
		require.NoError(t, c.Set(ctx, key, "value", 0).Err())
		sha, err := c.ScriptLoad(ctx, "return 1").Result()
		require.NoError(t, err)
		var pid int
		if b.Real != nil {
			pid = b.Real.PID()
		}

		b.Restart(t)

		if b.Real != nil {
			require.NotEqual(t, pid, b.Real.PID())
			require.NotZero(t, b.Real.PID())
		}
		// The client's pooled connection is dead; go-redis retries.
		require.ErrorIs(t, c.Get(ctx, key).Err(), redis.Nil)
		exists, err := c.ScriptExists(ctx, sha).Result()
		require.NoError(t, err)
		require.Equal(t, []bool{false}, exists, "the script cache survived the restart")

		// Blocking commands still work after a restart (miniredis needs its
		// context renewed for that).
		// BLPOP timeouts are whole seconds.
		start := time.Now()
		err = c.BLPop(ctx, time.Second, Name(t)).Err()
		require.ErrorIs(t, err, redis.Nil)
		require.Less(t, time.Since(start), 3*time.Second)

		// A second restart works as well.
		require.NoError(t, c.Set(ctx, key, "again", 0).Err())
		b.Restart(t)
		require.ErrorIs(t, c.Get(ctx, key).Err(), redis.Nil)
	})
}

func TestServerKillRestart(t *testing.T) {
	noLeaks(t)
	requireRealRedis(t)
	s := StartServer(t)
	addr, pid := s.Addr(), s.PID()
	require.True(t, strings.HasPrefix(addr, "127.0.0.1:"), addr)
	require.NotZero(t, pid)

	c := s.NewClient(t, func(o *redis.Options) { o.MaxRetries = -1 })
	require.NoError(t, c.Set(t.Context(), "k", "v", 0).Err())

	s.Kill()
	require.Zero(t, s.PID())
	require.Error(t, c.Ping(t.Context()).Err())
	// Regression: a redis-server another test started could take the
	// killed server's port and answer for it (TestKilledNodes of redlock
	// once got a quorum with three of five nodes killed). The port stays
	// taken until Restart.
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		_ = ln.Close()
	}
	require.Error(t, err, "the killed server's port was free for another server")
	s.Kill() // a second Kill is a no-op

	s.Restart(t)
	require.Equal(t, addr, s.Addr())
	require.NotZero(t, s.PID())
	require.NotEqual(t, pid, s.PID())
	require.Eventually(t, func() bool {
		return c.Ping(t.Context()).Err() == nil
	}, 5*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, c.Get(t.Context(), "k").Err(), redis.Nil)
}

func TestServerExtraArgs(t *testing.T) {
	noLeaks(t)
	requireRealRedis(t)
	s := StartServer(t, "--maxmemory", "12345678")
	c := s.NewClient(t)
	cfg, err := c.ConfigGet(t.Context(), "maxmemory").Result()
	require.NoError(t, err)
	require.Equal(t, "12345678", cfg["maxmemory"])
	// Persistence is off and debugging is on.
	cfg, err = c.ConfigGet(t.Context(), "save").Result()
	require.NoError(t, err)
	require.Equal(t, "", cfg["save"])
	require.NoError(t, c.Do(t.Context(), "DEBUG", "SLEEP", "0").Err())
}

func TestFreezeThaw(t *testing.T) {
	noLeaks(t)
	requireRealRedis(t)
	s := StartServer(t)
	c := s.NewClient(t, func(o *redis.Options) {
		o.ReadTimeout = 200 * time.Millisecond
		o.MaxRetries = -1
	})
	require.NoError(t, c.Ping(t.Context()).Err())

	s.Freeze()
	err := c.Ping(t.Context()).Err()
	require.Error(t, err)
	var netErr net.Error
	require.True(t, errors.As(err, &netErr) && netErr.Timeout(), "want a timeout, got %v", err)

	s.Thaw()
	require.Eventually(t, func() bool {
		return c.Ping(t.Context()).Err() == nil
	}, 5*time.Second, 10*time.Millisecond)
}

func TestCleanupStopsFrozenServer(t *testing.T) {
	noLeaks(t)
	requireRealRedis(t)
	var pid int
	t.Run("frozen", func(t *testing.T) {
		s := StartServer(t)
		pid = s.PID()
		s.Freeze()
	})
	require.NotZero(t, pid)
	// The cleanup waited for the process, so it is gone (and reaped).
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestStartServerReportsFailure(t *testing.T) {
	noLeaks(t)
	requireRealRedis(t)
	ft := &fakeTB{TB: t}
	ft.run(func() { StartServer(ft, "--no-such-option", "x") })
	require.True(t, ft.failed, "StartServer did not fail")
	out := ft.output()
	require.Contains(t, out, "starting redis-server failed")
	require.Contains(t, out, "no-such-option", "the server's output is not in the failure")
}

func TestStartOnTakenPortTouchesNothing(t *testing.T) {
	noLeaks(t)
	requireRealRedis(t)
	// Someone else's server holds the port: the start must fail as a bind
	// error (so StartServer tries another port) without connecting to it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan struct{}, 1)
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-acceptDone
	})

	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err)
	dir := t.TempDir()
	s := &Server{
		bin:     bin,
		port:    ln.Addr().(*net.TCPAddr).Port,
		dir:     dir,
		logPath: dir + "/redis.log",
		outPath: dir + "/redis.out",
	}
	t.Cleanup(s.stop)
	err = s.start()
	require.ErrorIs(t, err, errBind, "output:\n%s", s.diagnostics())
	require.Zero(t, s.PID())
	require.Empty(t, accepted, "the helper connected to a server it did not start")
}

func TestCommandStats(t *testing.T) {
	noLeaks(t)
	requireRealRedis(t)
	s := StartServer(t)
	c := s.NewClient(t)
	ctx := t.Context()
	require.NoError(t, c.ConfigResetStat(ctx).Err())
	key := Name(t)
	require.NoError(t, c.Incr(ctx, key).Err())
	require.NoError(t, c.Incr(ctx, key).Err())
	require.NoError(t, c.Eval(ctx, "return 1", nil).Err())
	stats := CommandStats(t, c)
	require.Equal(t, int64(2), stats["incr"])
	require.Equal(t, int64(1), stats["eval"])
	require.Zero(t, stats["evalsha"])
}

func TestParseCommandStats(t *testing.T) {
	noLeaks(t)
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=3,usec=10,usec_per_call=3.33,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_client|setinfo:calls=2,usec=1,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_SET:calls=12345678901,usec=1\r\n"
	stats, err := parseCommandStats(info)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"evalsha": 3, "client|setinfo": 2, "set": 12345678901}, stats)

	_, err = parseCommandStats("cmdstat_get:usec=1\r\n")
	require.Error(t, err)
}

// proxiedClient returns a client of b that goes through a new proxy.
func proxiedClient(t *testing.T, b *Backend, opts ...func(*redis.Options)) (*Proxy, *redis.Client) {
	p := NewProxy(t, b.Addr)
	opts = append([]func(*redis.Options){func(o *redis.Options) { o.Addr = p.Addr() }}, opts...)
	return p, b.NewClient(t, opts...)
}

func TestProxyForwards(t *testing.T) {
	noLeaks(t)
	Each(t, func(t *testing.T, b *Backend) {
		ctx := t.Context()
		p, c := proxiedClient(t, b)
		require.Equal(t, b.Addr, p.Target())
		require.NotEqual(t, b.Addr, p.Addr())
		key := Name(t)
		big := strings.Repeat("x", 1<<20) // larger than one chunk
		require.NoError(t, c.Set(ctx, key, big, 0).Err())
		got, err := c.Get(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, big, got)
		require.Equal(t, 1, p.Conns())

		direct := b.NewClient(t)
		require.Equal(t, big, direct.Get(ctx, key).Val())
	})
}

func TestProxyDropNextReply(t *testing.T) {
	noLeaks(t)
	Each(t, func(t *testing.T, b *Backend) {
		ctx := t.Context()
		p, c := proxiedClient(t, b) // default MaxRetries
		direct := b.NewClient(t)
		key := Name(t)
		require.NoError(t, c.Ping(ctx).Err())

		p.DropNextReply("incr")
		n, err := c.Incr(ctx, key).Result()
		require.NoError(t, err)
		// The first INCR ran but its reply was dropped; go-redis retried it.
		require.Equal(t, int64(2), n)
		require.Equal(t, 1, p.Dropped())
		require.Equal(t, "2", direct.Get(ctx, key).Val())

		// Disarmed after one use.
		n, err = c.Incr(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		require.Equal(t, 1, p.Dropped())

		// Case-insensitive, and only a matching command is hit.
		p.DropNextReply("EvalSha")
		require.NoError(t, c.Get(ctx, key).Err())
		require.Equal(t, 1, p.Dropped())
		script := redis.NewScript(fmt.Sprintf("return redis.call('INCR', %q)", key))
		require.NoError(t, script.Load(ctx, direct).Err())
		n, err = script.Run(ctx, c, nil).Int64()
		require.NoError(t, err)
		require.Equal(t, int64(5), n)
		require.Equal(t, 2, p.Dropped())
	})
}

// TestProxyDropReplies: every copy of a command is dropped until the count
// is used up, so go-redis exhausts its retries while the server ran each.
func TestProxyDropReplies(t *testing.T) {
	noLeaks(t)
	Each(t, func(t *testing.T, b *Backend) {
		ctx := t.Context()
		p, c := b.NewProxiedClient(t, func(o *redis.Options) { o.MaxRetries = 1 })
		direct := b.NewClient(t)
		key := Name(t)
		require.NoError(t, c.Ping(ctx).Err())

		p.DropReplies("incr", 2)
		require.Error(t, c.Incr(ctx, key).Err(), "both replies dropped: retries exhausted")
		require.Equal(t, 2, p.Dropped())
		require.Equal(t, "2", direct.Get(ctx, key).Val(), "both copies ran")

		n, err := c.Incr(ctx, key).Result() // disarmed
		require.NoError(t, err)
		require.Equal(t, int64(3), n)
		p.DropReplies("incr", 0)
		require.NoError(t, c.Incr(ctx, key).Err())
		require.Equal(t, 2, p.Dropped())
	})
}

func TestProxyDropNextReplyRaw(t *testing.T) {
	noLeaks(t)
	b := Mini(t)
	p := NewProxy(t, b.Addr)
	conn := dialRaw(t, p.Addr())
	r := bufio.NewReader(conn)
	require.Equal(t, "+PONG\r\n", rawPing(t, conn, r))

	p.DropNextReply("ping")
	_, err := io.WriteString(conn, "*1\r\n$4\r\nPI")
	require.NoError(t, err)
	_, err = io.WriteString(conn, "NG\r\n")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = r.ReadString('\n')
	require.ErrorIs(t, err, io.EOF, "the reply was not dropped")
	require.Equal(t, 1, p.Dropped())
	require.Eventually(t, func() bool { return p.Conns() == 0 }, 5*time.Second, 5*time.Millisecond)
}

func TestMatchDropAcrossChunks(t *testing.T) {
	noLeaks(t)
	p := &Proxy{}
	pc := &proxyConn{}
	p.DropNextReply("EVALSHA")
	tail := p.matchDrop(pc, nil, []byte("*3\r\n$7\r\nEVA"))
	require.False(t, pc.dropReply.Load())
	tail = p.matchDrop(pc, tail, []byte("LSHA\r\n"))
	require.True(t, pc.dropReply.Load(), "a match split across chunks was missed")
	require.Nil(t, p.dropSub, "not disarmed")

	// A match entirely inside an earlier chunk does not count again.
	pc2 := &proxyConn{}
	p.DropNextReply("evalsha")
	tail = p.matchDrop(pc2, tail, []byte("GET"))
	require.False(t, pc2.dropReply.Load())

	// The tail stays bounded.
	for range 100 {
		tail = p.matchDrop(pc2, tail, []byte(strings.Repeat("y", 100)))
	}
	require.LessOrEqual(t, len(tail), matchTail)
	tail = p.matchDrop(pc2, tail, []byte(strings.Repeat("z", proxyBufSize)))
	require.Len(t, tail, matchTail)
	require.False(t, pc2.dropReply.Load())
	p.matchDrop(pc2, tail, []byte("x EvAlShA y"))
	require.True(t, pc2.dropReply.Load())
}

func TestProxyLatency(t *testing.T) {
	noLeaks(t)
	b := Mini(t)
	p, c := proxiedClient(t, b)
	require.NoError(t, c.Ping(t.Context()).Err())
	p.SetLatency(100 * time.Millisecond)
	start := time.Now()
	require.NoError(t, c.Ping(t.Context()).Err())
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "latency applies both ways")
	p.SetLatency(0)
	require.NoError(t, c.Ping(t.Context()).Err())
}

func TestProxyBlackhole(t *testing.T) {
	noLeaks(t)
	Each(t, func(t *testing.T, b *Backend) {
		ctx := t.Context()
		p, c := proxiedClient(t, b, func(o *redis.Options) {
			o.ReadTimeout = 200 * time.Millisecond
			o.MaxRetries = -1
		})
		require.NoError(t, c.Ping(ctx).Err())
		conn := dialRaw(t, p.Addr())
		r := bufio.NewReader(conn)
		require.Equal(t, "+PONG\r\n", rawPing(t, conn, r))

		p.Blackhole(true)
		err := c.Ping(ctx).Err()
		var netErr net.Error
		require.True(t, errors.As(err, &netErr) && netErr.Timeout(), "want a timeout, got %v", err)

		// The raw connection stays open but silent.
		_, err = io.WriteString(conn, "*1\r\n$4\r\nPING\r\n")
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
		_, err = r.ReadString('\n')
		require.True(t, errors.As(err, &netErr) && netErr.Timeout(), "want a timeout, got %v", err)
		require.NoError(t, conn.SetReadDeadline(time.Time{}))

		p.Blackhole(false)
		require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 5*time.Second, 10*time.Millisecond)
		// The PING sent during the black hole is gone for good: the next
		// reply on the raw connection is the one to the next PING.
		require.Equal(t, "+PONG\r\n", rawPing(t, conn, r))
		_, err = io.WriteString(conn, "*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n")
		require.NoError(t, err)
		require.Equal(t, "$2\r\n", readLine(t, conn, r))
	})
}

func TestProxyResetAll(t *testing.T) {
	noLeaks(t)
	Each(t, func(t *testing.T, b *Backend) {
		ctx := t.Context()
		p, c := proxiedClient(t, b)
		require.NoError(t, c.Ping(ctx).Err())
		conn := dialRaw(t, p.Addr())
		r := bufio.NewReader(conn)
		require.Equal(t, "+PONG\r\n", rawPing(t, conn, r))
		require.Eventually(t, func() bool { return p.Conns() == 2 }, 5*time.Second, 5*time.Millisecond)

		p.ResetAll()
		require.Zero(t, p.Conns())
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err := r.ReadString('\n')
		require.Error(t, err)
		var netErr net.Error
		require.False(t, errors.As(err, &netErr) && netErr.Timeout(), "want the connection closed, got %v", err)

		// go-redis notices the dead connection and uses a new one.
		require.NoError(t, c.Ping(ctx).Err())
		require.Equal(t, 1, p.Conns())
	})
}

func TestProxyCloseEndsEverything(t *testing.T) {
	noLeaks(t)
	b := Mini(t)
	p := NewProxy(t, b.Addr)
	quiet := dialRaw(t, p.Addr()) // a pump blocked in Read
	require.Equal(t, "+PONG\r\n", rawPing(t, quiet, bufio.NewReader(quiet)))
	slow := dialRaw(t, p.Addr()) // a pump blocked in the latency wait
	p.SetLatency(time.Hour)
	_, err := io.WriteString(slow, "*1\r\n$4\r\nPING\r\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return p.Conns() == 2 }, 5*time.Second, 5*time.Millisecond)

	done := make(chan struct{})
	go func() {
		p.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	p.Close() // idempotent
	for _, conn := range []net.Conn{quiet, slow} {
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		_, err := conn.Read(make([]byte, 1))
		// A close with unread data in the proxy's socket reads as a reset.
		if !errors.Is(err, syscall.ECONNRESET) {
			require.ErrorIs(t, err, io.EOF)
		}
	}
	_, err = net.DialTimeout("tcp", p.Addr(), time.Second)
	require.Error(t, err, "the listener is still open")
}

func TestProxyTargetDown(t *testing.T) {
	noLeaks(t)
	b := Mini(t)
	addr := b.Addr
	b.Mini.Close()
	p := NewProxy(t, addr)
	conn := dialRaw(t, p.Addr())
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := conn.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
}

func TestProxyIsRaceFree(t *testing.T) {
	noLeaks(t)
	b := Mini(t)
	p, c := proxiedClient(t, b, func(o *redis.Options) { o.PoolSize = 8 })
	ctx := t.Context()
	key := Name(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				_ = c.Incr(ctx, key).Err()
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			p.SetLatency(time.Duration(i%2) * time.Millisecond)
			p.DropNextReply("incr")
			_ = p.Dropped()
			_ = p.Conns()
			if i%10 == 0 {
				p.ResetAll()
			}
			runtime.Gosched()
		}
	})
	wg.Wait()
	p.SetLatency(0)
	require.NoError(t, c.Ping(ctx).Err())
}

func TestHelperProcess(t *testing.T) {
	noLeaks(t)
	child := StartHelperProcess(t, "TestHelperProcessChild", "REDISTEST_CHILD_MSG=hello")
	child.WaitLine(t, "hello", 30*time.Second)
	child.WaitLine(t, "ready", 30*time.Second)
	exited, _ := child.Exited()
	require.False(t, exited)
	child.Kill()
	exited, err := child.Exited()
	require.True(t, exited)
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr)
	require.Equal(t, syscall.SIGKILL, exitErr.Sys().(syscall.WaitStatus).Signal())
	child.Kill() // idempotent
}

func TestHelperProcessWaitLineFailures(t *testing.T) {
	noLeaks(t)
	child := StartHelperProcess(t, "TestHelperProcessChild", "REDISTEST_CHILD_MSG=bye", "REDISTEST_CHILD_EXIT=1")
	child.WaitLine(t, "bye", 30*time.Second)
	err := child.waitLine("never printed", 30*time.Second)
	require.ErrorContains(t, err, "exited")
	require.ErrorContains(t, err, "--- PASS: TestHelperProcessChild", "the child's output is in the error")

	child2 := StartHelperProcess(t, "TestHelperProcessChild", "REDISTEST_CHILD_MSG=x")
	child2.WaitLine(t, "ready", 30*time.Second)
	err = child2.waitLine("never printed", 100*time.Millisecond)
	require.ErrorContains(t, err, "did not print")

	// Through the testing.TB API.
	ft := &fakeTB{TB: t}
	ft.run(func() { child2.WaitLine(ft, "never printed", 10*time.Millisecond) })
	require.True(t, ft.failed)
}

// TestHelperProcessChild is the child of the TestHelperProcess tests.
func TestHelperProcessChild(t *testing.T) {
	if !IsHelperProcess() {
		t.Skip("helper process for TestHelperProcess")
	}
	fmt.Println(os.Getenv("REDISTEST_CHILD_MSG"))
	fmt.Println("ready")
	if os.Getenv("REDISTEST_CHILD_EXIT") == "1" {
		return
	}
	// Block until the parent kills us (or closes stdin).
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func TestAnchoredRunPattern(t *testing.T) {
	require.Equal(t, "^TestA$", anchoredRunPattern("TestA"))
	require.Equal(t, `^TestA$/^sub\.1$`, anchoredRunPattern("TestA/sub.1"))
}

func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func rawPing(t *testing.T, conn net.Conn, r *bufio.Reader) string {
	t.Helper()
	_, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n")
	require.NoError(t, err)
	return readLine(t, conn, r)
}

func readLine(t *testing.T, conn net.Conn, r *bufio.Reader) string {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Time{}))
	return line
}

// fakeTB records failures instead of ending the test, to check the failure
// paths of the helpers.
type fakeTB struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	logs   []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed = true
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Skip(args ...any) {
	f.mu.Lock()
	f.logs = append(f.logs, fmt.Sprint(args...))
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.logs, "\n")
}

// run calls fn on a goroutine of its own, which Fatalf may end.
func (f *fakeTB) run(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

// TestMissingSaysSoOnce: a missing binary skips every test that needs it,
// and says so in one line per test binary, also on the terminal when go
// test buffers stderr; with RequireEnv set it fails instead.
func TestMissingSaysSoOnce(t *testing.T) {
	var stderr, tty bytes.Buffer
	savedStderr, savedToTTY, savedOpen := noticeStderr, noticeToTTY, openTTY
	t.Cleanup(func() { noticeStderr, noticeToTTY, openTTY = savedStderr, savedToTTY, savedOpen })
	noticeStderr = &stderr
	noticeToTTY = func() bool { return true }
	openTTY = func() (io.WriteCloser, error) { return nopCloser{&tty}, nil }
	t.Setenv(RequireEnv, "")
	msg := "frob-server not found on PATH (" + t.Name() + ")"

	for range 3 {
		ft := &fakeTB{TB: t}
		ft.run(func() { missing(ft, msg) })
		require.False(t, ft.failed)
		require.Equal(t, msg, ft.output(), "each test is skipped with the message")
	}
	want := "github.com/rlock-go/rlock/internal/redistest: " + msg + "; skipping them (RLOCK_REQUIRE_REDIS=1 makes this a failure)\n"
	require.Equal(t, want, stderr.String(), "one line per test binary")
	require.Equal(t, want, tty.String())

	t.Setenv(RequireEnv, "1")
	ft := &fakeTB{TB: t}
	ft.run(func() { missing(ft, msg) })
	require.True(t, ft.failed)
	require.Contains(t, ft.output(), "RLOCK_REQUIRE_REDIS is set but "+msg)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
