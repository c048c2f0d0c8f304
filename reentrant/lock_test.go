package reentrant_test

import (
	"context"
	"errors"
	"github.com/rlock-go/rlock/internal/base"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.StopSharedAfter(m))
}

// newClient returns an rlock client on a fresh go-redis client of b.
func newClient(t *testing.T, b *redistest.Backend, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	return clientOn(t, b.Universal(t), opts...)
}

func clientOn(t *testing.T, rdb rlock.Redis, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newLock(t *testing.T, c *rlock.Client, name string, opts ...reentrant.Option) *reentrant.Lock {
	t.Helper()
	l, err := reentrant.New(c, name, opts...)
	require.NoError(t, err)
	return l
}

// shortWatchdog makes watchdog tests run in well under a second per lease.
func shortWatchdog(lease time.Duration) rlock.ClientOption {
	return rlock.WithWatchdogLease(lease)
}

// lockUnlock takes l and releases it again.
func lockUnlock(ctx context.Context, l *reentrant.Lock) error {
	if err := l.Lock(ctx); err != nil {
		return err
	}
	return l.Unlock(ctx)
}

func holdCount(t require.TestingT, rdb *redis.Client, name, field string) int {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	n, err := rdb.HGet(context.Background(), name, field).Int()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	return n
}

func TestExclusionBetweenHandles(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b)
		name := redistest.Name(t)
		a, other := newLock(t, c, name), newLock(t, c, name)

		require.NoError(t, a.TryLock(ctx))
		require.ErrorIs(t, other.TryLock(ctx), rlock.ErrNotObtained)
		require.ErrorIs(t, other.Unlock(ctx), rlock.ErrNotHeld)
		held, err := other.IsHeld(ctx)
		require.NoError(t, err)
		require.False(t, held)
		locked, err := other.IsLocked(ctx)
		require.NoError(t, err)
		require.True(t, locked)

		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, other.TryLock(ctx))
		require.NoError(t, other.Unlock(ctx))
	})
}

func TestExclusionBetweenClients(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		a := newLock(t, newClient(t, b), name)
		other := newLock(t, newClient(t, b), name)

		require.NoError(t, a.Lock(ctx))
		require.ErrorIs(t, other.TryLock(ctx), rlock.ErrNotObtained)
		// The same explicit owner ID on another client is another owner.
		octx := rlock.WithOwner(ctx, "worker-1")
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, a.Lock(octx))
		require.ErrorIs(t, other.TryLock(octx), rlock.ErrNotObtained)
		require.NoError(t, a.Unlock(octx))
	})
}

func TestForeignOwnerExcludes(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		name := redistest.Name(t)
		// A Redisson client's hold: "<uuid>:<threadId>" -> count, with a lease.
		foreign := "6f1b3a52-8c1e-4a57-9a1e-0c5f3f0e2b11:57"
		require.NoError(t, rdb.HSet(ctx, name, foreign, 1).Err())
		require.NoError(t, rdb.PExpire(ctx, name, time.Minute).Err())

		l := newLock(t, clientOn(t, rdb), name)
		require.ErrorIs(t, l.TryLock(ctx), rlock.ErrNotObtained)
		require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld)
		require.Equal(t, 1, holdCount(t, rdb, name, foreign))
		ttl, err := l.TTL(ctx)
		require.NoError(t, err)
		require.Greater(t, ttl, 50*time.Second)

		// Without expiry the TTL query says so, and a waiter still polls.
		require.NoError(t, rdb.Persist(ctx, name).Err())
		_, err = l.TTL(ctx)
		require.ErrorIs(t, err, rlock.ErrNoExpiry)
	})
}

func TestReentryCountsAndResetsTTL(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		name := redistest.Name(t)
		l := newLock(t, clientOn(t, rdb), name, reentrant.WithLease(time.Minute))
		field, err := l.Owner(ctx)
		require.NoError(t, err)

		for i := 1; i <= 3; i++ {
			require.NoError(t, rdb.PExpire(ctx, name, 5*time.Second).Err()) // no-op on the first round
			lctx := ctx
			if i > 1 {
				lctx = l.Ctx() // re-entry: a ctx from the holding
			}
			require.NoError(t, l.Lock(lctx))
			n, err := l.HoldCount(ctx)
			require.NoError(t, err)
			require.Equal(t, i, n)
			ttl, err := l.TTL(ctx)
			require.NoError(t, err)
			require.Greater(t, ttl, 50*time.Second, "re-entry resets the TTL to the lease")
		}

		sub := rdb.Subscribe(ctx, base.Channel(name))
		defer sub.Close()
		_, err = sub.Receive(ctx) // subscription confirmed
		require.NoError(t, err)

		for i := 2; i >= 1; i-- {
			require.NoError(t, rdb.PExpire(ctx, name, 5*time.Second).Err())
			require.NoError(t, l.Unlock(ctx))
			require.Equal(t, i, holdCount(t, rdb, name, field))
			ttl, err := l.TTL(ctx)
			require.NoError(t, err)
			require.Greater(t, ttl, 50*time.Second, "a release that leaves holds restores the lease")
		}
		require.NoError(t, l.Unlock(ctx))
		n, err := rdb.Exists(ctx, name).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the last unlock deletes the key")
		msg, err := sub.ReceiveMessage(ctx)
		require.NoError(t, err)
		require.Equal(t, base.Channel(name), msg.Channel)
		require.Equal(t, base.UnlockMessage, msg.Payload)
		select {
		case <-l.Done():
		default:
			t.Fatal("Done is not closed after the last unlock")
		}
		require.NoError(t, l.Err())

		require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld)
	})
}

func TestUnlockByNonOwnerChangesNothing(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		name := redistest.Name(t)
		c := clientOn(t, rdb)
		owner := newLock(t, c, name, reentrant.WithLease(time.Minute))
		require.NoError(t, owner.Lock(ctx))
		require.NoError(t, owner.Lock(owner.Ctx())) // re-entry
		require.NoError(t, rdb.PExpire(ctx, name, 30*time.Second).Err())
		before, err := rdb.HGetAll(ctx, name).Result()
		require.NoError(t, err)

		for _, l := range []*reentrant.Lock{newLock(t, c, name), newLock(t, clientOn(t, b.NewClient(t)), name)} {
			require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld)
			require.ErrorIs(t, l.Unlock(rlock.WithOwner(ctx, "someone")), rlock.ErrNotHeld)
		}
		after, err := rdb.HGetAll(ctx, name).Result()
		require.NoError(t, err)
		require.Equal(t, before, after)
		ttl, err := owner.TTL(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, ttl, 30*time.Second, "a failed unlock must not touch the TTL")
	})
}

func TestExplicitOwnerReenters(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		c := newClient(t, b)
		name := redistest.Name(t)
		ctx := rlock.WithOwner(context.Background(), "job-17")
		outer := newLock(t, c, name)
		require.NoError(t, outer.Lock(ctx))
		// Nested code builds its own handle; with the same owner it re-enters.
		inner := newLock(t, c, name)
		require.NoError(t, inner.TryLock(ctx))
		n, err := inner.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.ErrorIs(t, inner.TryLock(context.Background()), rlock.ErrNotObtained, "the handle's own owner is another owner")
		require.NoError(t, inner.Unlock(ctx))
		require.NoError(t, outer.Unlock(ctx))
		require.ErrorIs(t, outer.Unlock(ctx), rlock.ErrNotHeld)
	})
}

func TestLeaseExpiryWakesWaiter(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		const lease = 300 * time.Millisecond
		holder := newLock(t, newClient(t, b), name, reentrant.WithLease(lease))
		// The waiter's client polls a lock without expiry only every minute,
		// so a prompt grant can only come from the TTL bound.
		waiter := newLock(t, newClient(t, b, rlock.WithMaxPoll(time.Minute)), name)

		start := time.Now()
		require.NoError(t, holder.Lock(ctx))
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		require.NoError(t, waiter.Lock(wctx))
		elapsed := time.Since(start)
		require.GreaterOrEqual(t, elapsed, lease-20*time.Millisecond, "granted before the lease ran out")
		// Bounded by the PTTL the attempt returned, not a poll interval.
		require.Less(t, elapsed, lease+250*time.Millisecond)
		require.NoError(t, waiter.Unlock(ctx))
		require.ErrorIs(t, holder.Unlock(ctx), rlock.ErrNotHeld)
		require.ErrorIs(t, holder.Err(), rlock.ErrLockLost)
	})
}

func TestWatchdogKeepsLockAlive(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		const lease = 300 * time.Millisecond
		c := newClient(t, b, shortWatchdog(lease))
		name := redistest.Name(t)
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Lock(l.Ctx())) // re-entry: still one registration
		require.Equal(t, 1, c.WatchdogStats().Registered)

		// Watch for 4 leases: the lock must stay held throughout.
		end := time.Now().Add(4 * lease)
		tick := time.NewTicker(lease / 6)
		defer tick.Stop()
		for time.Now().Before(end) {
			<-tick.C
			held, err := l.IsHeld(ctx)
			require.NoError(t, err)
			require.True(t, held, "lost the lock %v after acquiring", time.Until(end)-4*lease)
		}
		require.GreaterOrEqual(t, c.WatchdogStats().Renewed, uint64(8))
		select {
		case <-l.Done():
			t.Fatalf("Done closed while held: %v", l.Err())
		default:
		}

		require.NoError(t, l.Unlock(ctx))
		require.Equal(t, 1, c.WatchdogStats().Registered, "one hold left")
		require.NoError(t, l.Unlock(ctx))
		require.Zero(t, c.WatchdogStats().Registered, "renewal stops at the last unlock")
		<-l.Done()
		require.NoError(t, l.Err())
	})
}

const holderEnv = "RLOCK_TEST_HOLDER" // "addr name leaseMillis"

// TestHelperHolder is not a test: it is the child process of
// TestCrashedHolderReleasesWithinLease. It takes the lock in watchdog mode,
// says so, and waits to be killed.
func TestHelperHolder(t *testing.T) {
	if !redistest.IsHelperProcess() {
		t.Skip("helper process for TestCrashedHolderReleasesWithinLease")
	}
	var addr, name string
	var leaseMS int
	args := splitFields(os.Getenv(holderEnv))
	require.Len(t, args, 3)
	addr, name = args[0], args[1]
	leaseMS, err := strconv.Atoi(args[2])
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := rlock.NewClient(rdb, shortWatchdog(time.Duration(leaseMS)*time.Millisecond))
	require.NoError(t, err)
	l, err := reentrant.New(c, name)
	require.NoError(t, err)
	require.NoError(t, l.Lock(context.Background()))
	os.Stdout.WriteString("locked\n")
	<-l.Done() // until killed; a loss would end the helper early and fail the parent
	t.Fatalf("lost the lock: %v", l.Err())
}

func splitFields(s string) []string {
	var out []string
	field := ""
	for _, r := range s + " " {
		if r == ' ' {
			if field != "" {
				out = append(out, field)
			}
			field = ""
			continue
		}
		field += string(r)
	}
	return out
}

func TestCrashedHolderReleasesWithinLease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		const lease = 600 * time.Millisecond
		child := redistest.StartHelperProcess(t, "TestHelperHolder",
			holderEnv+"="+b.Addr+" "+name+" "+strconv.Itoa(int(lease.Milliseconds())))
		child.WaitLine(t, "locked", 20*time.Second)

		l := newLock(t, newClient(t, b), name)
		require.ErrorIs(t, l.TryLock(ctx), rlock.ErrNotObtained)
		// The child's watchdog kept it alive past its first lease.
		require.Eventually(t, func() bool {
			ttl, err := l.TTL(ctx)
			return err == nil && ttl > lease*2/3
		}, 5*time.Second, 10*time.Millisecond)

		child.Kill()
		killed := time.Now()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		require.NoError(t, l.Lock(wctx))
		require.Less(t, time.Since(killed), lease+250*time.Millisecond, "granted within one lease of the crash")
		require.NoError(t, l.Unlock(ctx))
	})
}

func TestForceUnlockWakesWaiter(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		const lease = 400 * time.Millisecond
		hc := newClient(t, b, shortWatchdog(lease))
		holder := newLock(t, hc, name)
		wc := newClient(t, b)
		waiter := newLock(t, wc, name)
		require.NoError(t, holder.Lock(ctx))

		got := make(chan error, 1)
		go func() { got <- waiter.Lock(ctx) }() // the default 30 s lease: only pub/sub wakes it soon
		require.Eventually(t, func() bool { return wc.Waiters().Waiters == 1 }, 5*time.Second, time.Millisecond)

		ok, err := newLock(t, wc, name).ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was not woken by the force unlock")
		}
		// The holder's watchdog finds the lock gone at its next renewal.
		select {
		case <-holder.Done():
			require.ErrorIs(t, holder.Err(), rlock.ErrLockLost)
		case <-time.After(5 * time.Second):
			t.Fatal("the holder was not told it lost the lock")
		}
		require.ErrorIs(t, holder.Unlock(ctx), rlock.ErrNotHeld)
		require.NoError(t, waiter.Unlock(ctx))
		ok, err = waiter.ForceUnlock(ctx)
		require.NoError(t, err)
		require.False(t, ok)
	})
}

func TestWaiterDeadline(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := newClient(t, b)
		holder := newLock(t, c, name)
		require.NoError(t, holder.Lock(ctx))

		waiter := newLock(t, c, name)
		const wait = 150 * time.Millisecond
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		start := time.Now()
		err := waiter.Lock(wctx)
		elapsed := time.Since(start)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, rlock.ErrNotObtained)
		require.Less(t, elapsed, wait+100*time.Millisecond, "returns promptly at the deadline")
		require.Zero(t, c.Waiters().Waiters)

		cctx, cancel2 := context.WithCancel(ctx)
		cancel2()
		require.ErrorIs(t, waiter.Lock(cctx), context.Canceled)
		require.ErrorIs(t, waiter.TryLock(cctx), context.Canceled)
		require.NoError(t, holder.Unlock(ctx))
	})
}

// With auto-pipelining, the caller waits for the attempt's reply from the
// auto-pipeliner itself, and the attempt is concluded in the background
// only once ctx ends.
func TestGrantAfterDeadlineIsReleased(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, v := range clientVariants {
			t.Run(v.name, func(t *testing.T) { testGrantAfterDeadlineIsReleased(t, b, v.opts...) })
		}
	})
}

func testGrantAfterDeadlineIsReleased(t *testing.T, b *redistest.Backend, opts ...rlock.ClientOption) {
	ctx := context.Background()
	name := redistest.Name(t)
	proxy, slow := b.NewProxiedClient(t)
	l := newLock(t, clientOn(t, slow, opts...), name)
	require.NoError(t, l.TryLock(ctx)) // loads the scripts
	require.NoError(t, l.Unlock(ctx))

	direct := b.NewClient(t)
	sub := direct.Subscribe(ctx, base.Channel(name))
	defer sub.Close()
	_, err := sub.Receive(ctx)
	require.NoError(t, err)

	// Each way takes 200 ms: the script runs at ~200 ms, after the 50 ms
	// deadline, and its reply cannot arrive before ~400 ms.
	proxy.SetLatency(200 * time.Millisecond)
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = l.TryLock(dctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 350*time.Millisecond, "returns at the deadline, not when the reply comes")
	// The late grant is released in the background: its unlock message.
	rctx, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	msg, err := sub.ReceiveMessage(rctx)
	require.NoError(t, err)
	require.Equal(t, base.UnlockMessage, msg.Payload)
	proxy.SetLatency(0)
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	require.False(t, locked, "a grant after the deadline is released")
}

// Regression: a grant that was in time when its attempt checked the
// deadline, but whose ctx ended before the waiting caller took the result,
// was kept by the owner while Lock returned ctx's error. The watchdog then
// renewed that hold forever and every other caller waited for good (seen as
// a MultiLock test hanging in CI).
func TestLateGrantIsNeverLeaked(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		name := redistest.Name(t)
		c := newClient(t, b)
		l := newLock(t, c, name)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		returned, restore := core.AbandonNextGrant(ctx, cancel)
		defer restore()
		err := l.Lock(ctx)
		returned()
		require.ErrorIs(t, err, context.Canceled)

		// The grant is released in the background, so another owner gets
		// the lock, and this owner holds nothing.
		other := newLock(t, c, name)
		require.Eventually(t, func() bool {
			return other.TryLock(context.Background()) == nil
		}, 5*time.Second, 5*time.Millisecond, "the late grant was kept")
		require.NoError(t, other.Unlock(context.Background()))
		n, err := l.HoldCount(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)
		held, err := l.IsHeld(context.Background())
		require.NoError(t, err)
		require.False(t, held)
	})
}

// clientVariants are the client settings that change how scripts reach
// Redis; tests of the script paths run under each.
var clientVariants = []struct {
	name string
	opts []rlock.ClientOption
}{{"plain", nil}, {"auto-pipeline", []rlock.ClientOption{rlock.WithAutoPipeline()}}}

// TestHammerMutualExclusion: 100 goroutines over four clients take one
// lock once each; also with the scripts sent through go-redis's
// auto-pipeliner, where the clients' calls share pipelines.
func TestHammerMutualExclusion(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		for _, v := range clientVariants {
			t.Run(v.name, func(t *testing.T) { testHammerMutualExclusion(t, b, v.opts...) })
		}
	})
}

func testHammerMutualExclusion(t *testing.T, b *redistest.Backend, opts ...rlock.ClientOption) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := redistest.Name(t)
	clients := make([]*rlock.Client, 4)
	for i := range clients {
		clients[i] = newClient(t, b, opts...)
	}
	var inside, grants atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := reentrant.New(clients[g%4], name)
			if err != nil {
				errs <- err
				return
			}
			if err := l.Lock(ctx); err != nil {
				errs <- err
				return
			}
			if n := inside.Add(1); n != 1 {
				errs <- errors.New("two holders at once: " + strconv.Itoa(int(n)))
			}
			grants.Add(1)
			inside.Add(-1)
			errs <- l.Unlock(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 100, grants.Load(), "every waiter got the lock")
	// One classic connection per client; on the 3+3 cluster (Redis 7,
	// rlock.PubSubAuto) also one sharded connection per master.
	most := 1
	if b.Name == "cluster" {
		most = 1 + 3
	}
	for _, c := range clients {
		s := c.Waiters()
		require.Zero(t, s.Waiters)
		require.LessOrEqual(t, s.Connections, most, "one pub/sub connection per client (and per master for sharded pub/sub)")
	}
}

func TestRestartReportsLoss(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b, shortWatchdog(300*time.Millisecond))
		l := newLock(t, c, redistest.Name(t))
		require.NoError(t, l.Lock(ctx))
		b.Restart(t)
		select {
		case <-l.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the holder was not told the lock was lost")
		}
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
		require.Zero(t, c.WatchdogStats().Registered)
		require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld)
		// The client recovers: the lock can be taken again (scripts reload).
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Err())
		require.NoError(t, l.Unlock(ctx))
	})
}

// TestDeadlineDuringOutage: with Redis unreachable (a blackhole: the
// attempt's reply never comes), Lock still returns at its deadline rather
// than after the Redis client's read timeouts and retries.
func TestDeadlineDuringOutage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, rdb := b.NewProxiedClient(t)
		l := newLock(t, clientOn(t, rdb), name)
		require.NoError(t, l.TryLock(ctx)) // connect and load the scripts
		require.NoError(t, l.Unlock(ctx))

		proxy.Blackhole(true)
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		require.ErrorIs(t, l.Lock(dctx), context.DeadlineExceeded)
		require.Less(t, time.Since(start), time.Second, "the default read timeout is 3 s")
		proxy.Blackhole(false)
		proxy.ResetAll() // the background attempt retries on a new connection
		// A grant the background attempt got is released, not left to its
		// 30 s lease: another client gets the lock soon.
		other := newLock(t, newClient(t, b), name)
		octx, cancel2 := context.WithTimeout(ctx, 10*time.Second)
		defer cancel2()
		require.NoError(t, other.Lock(octx))
		require.NoError(t, other.Unlock(ctx))
	})
}

// TestFailedLastUnlockStopsRenewal: when the last release fails with a
// Redis error, its outcome is unknown; renewal stops so the lease decides,
// and the holder's period ends as lost instead of being renewed forever.
func TestFailedLastUnlockStopsRenewal(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, rdb := b.NewProxiedClient(t, func(o *redis.Options) {
			o.ReadTimeout = 100 * time.Millisecond
			o.MaxRetries = -1
		})
		c := clientOn(t, rdb, shortWatchdog(400*time.Millisecond))
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))

		proxy.Blackhole(true)
		err := l.Unlock(ctx)
		require.Error(t, err)
		require.NotErrorIs(t, err, rlock.ErrNotHeld)
		<-l.Done()
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
		require.Zero(t, c.WatchdogStats().Registered)
		proxy.Blackhole(false)
		proxy.ResetAll()

		// Nothing renews it: another client gets it within the lease.
		other := newLock(t, newClient(t, b), name)
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		require.NoError(t, other.Lock(octx))
		require.NoError(t, other.Unlock(ctx))
	})
}
