package fair_test

import (
	"context"
	"errors"
	"github.com/rlock-go/rlock/internal/base"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.StopSharedAfter(m))
}

func clientOn(t testing.TB, rdb rlock.Redis, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newClient(t testing.TB, b *redistest.Backend, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	return clientOn(t, b.Universal(t), opts...)
}

func newLock(t testing.TB, c *rlock.Client, name string, opts ...fair.Option) *fair.Lock {
	t.Helper()
	l, err := fair.New(c, name, opts...)
	require.NoError(t, err)
	return l
}

func owner(t require.TestingT, l *fair.Lock) string {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	o, err := l.Owner(context.Background())
	require.NoError(t, err)
	return o
}

// queue returns the owners in l's queue, first in line first.
func queue(t require.TestingT, l *fair.Lock) []string {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	q, err := l.Queue(context.Background())
	require.NoError(t, err)
	out := make([]string, len(q))
	for i, w := range q {
		out[i] = w.Owner
	}
	return out
}

// waitQueued blocks until l's queue holds n waiters.
func waitQueued(t *testing.T, l *fair.Lock, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, queue(c, l), n) }, 10*time.Second, time.Millisecond)
}

// lockAsync starts l.Lock(ctx) and returns where its result arrives.
func lockAsync(ctx context.Context, l *fair.Lock) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.Lock(ctx) }()
	return done
}

// TestFIFOAcrossClients: 50 waiters that queue in a known order, on four
// clients, are granted the lock in exactly that order; also when the
// clients send their scripts through go-redis's auto-pipeliner.
func TestFIFOAcrossClients(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		for _, v := range []struct {
			name string
			opts []rlock.ClientOption
		}{{"plain", nil}, {"auto-pipeline", []rlock.ClientOption{rlock.WithAutoPipeline()}}} {
			t.Run(v.name, func(t *testing.T) { testFIFOAcrossClients(t, b, v.opts...) })
		}
	})
}

func testFIFOAcrossClients(t *testing.T, b *redistest.Backend, opts ...rlock.ClientOption) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := redistest.Name(t)
	holder := newLock(t, newClient(t, b), name)
	require.NoError(t, holder.Lock(ctx))

	clients := make([]*rlock.Client, 4)
	for i := range clients {
		clients[i] = newClient(t, b, opts...)
	}
	const n = 50
	order := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		l := newLock(t, clients[i%len(clients)], name)
		go func() {
			if err := l.Lock(ctx); err != nil {
				errs <- err
				return
			}
			order <- i
			errs <- l.Unlock(ctx)
		}()
		waitQueued(t, holder, i+1)
	}
	require.NoError(t, holder.Unlock(ctx))
	for i := range n {
		require.NoError(t, <-errs)
		require.Equal(t, i, <-order, "grant %d", i)
	}
	require.Empty(t, queue(t, holder))
}

// TestWakeUpsGoToTheHeadOnly: each release publishes one message, on the
// channel of the waiter first in line; each grant publishes one, on the
// channel of the waiter now first in line, only when the new holder's
// lease may end before that waiter's next poll (so it learns the TTL in
// time; with the watchdog's 30 s lease and the 30 s queue timeout it
// polls before then anyway, and a grant publishes nothing); nothing goes
// to the lock's general channel or to waiters further back.
func TestWakeUpsGoToTheHeadOnly(t *testing.T) {
	for _, v := range []struct {
		name      string
		opts      []fair.Option
		wakeGrant bool
	}{
		{"watchdog lease", nil, false},
		{"lease shorter than the queue timeout", []fair.Option{fair.WithLease(5 * time.Second)}, true},
	} {
		t.Run(v.name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) { testWakeUpsGoToTheHeadOnly(t, b, v.wakeGrant, v.opts...) })
		})
	}
}

func testWakeUpsGoToTheHeadOnly(t *testing.T, b *redistest.Backend, wakeGrant bool, opts ...fair.Option) {
	ctx := context.Background()
	name := redistest.Name(t)
	rdb := b.NewClient(t)
	ps := rdb.PSubscribe(ctx, base.Channel(name)+"*")
	defer ps.Close()
	_, err := ps.Receive(ctx) // the subscription is confirmed
	require.NoError(t, err)

	holder := newLock(t, newClient(t, b), name)
	require.NoError(t, holder.Lock(ctx))
	c := newClient(t, b)
	const n = 3
	ls := make([]*fair.Lock, n)
	dones := make([]<-chan error, n)
	for i := range ls {
		ls[i] = newLock(t, c, name, opts...)
		dones[i] = lockAsync(ctx, ls[i])
		waitQueued(t, holder, i+1)
	}
	numsub, err := rdb.PubSubNumSub(ctx, base.Channel(name)).Result()
	require.NoError(t, err)
	require.Zero(t, numsub[base.Channel(name)], "nobody listens on the general channel")

	require.NoError(t, holder.Unlock(ctx))
	for i, l := range ls {
		require.NoError(t, <-dones[i])
		require.NoError(t, l.Unlock(ctx))
	}
	// The holder's release woke ls[0]; then the grant of ls[i] (if it
	// wakes at all) and its release woke ls[i+1]. The last grant and the
	// last release found nobody queued, so they published nothing.
	want := []string{owner(t, ls[0])}
	for _, l := range ls[1:] {
		if wakeGrant {
			want = append(want, owner(t, l))
		}
		want = append(want, owner(t, l))
	}
	for i, w := range want {
		msg, err := ps.ReceiveMessage(ctx)
		require.NoError(t, err)
		require.Equal(t, base.Channel(name)+":"+w, msg.Channel, "message %d", i)
	}
	require.NoError(t, ps.Ping(ctx, "end"))
	m, err := ps.Receive(ctx)
	require.NoError(t, err)
	require.IsType(t, &redis.Pong{}, m, "no message after the last release")
}

func TestTryLockNeverQueues(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx))
		c := newClient(t, b)
		try := newLock(t, c, name)
		require.ErrorIs(t, try.TryLock(ctx), rlock.ErrNotObtained)
		require.Empty(t, queue(t, holder))

		// Free, but someone is first in line: a try does not jump the queue.
		waiter := newLock(t, c, name)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := lockAsync(wctx, waiter)
		waitQueued(t, holder, 1)
		_, err := holder.ForceUnlock(ctx) // wakes the waiter; it may take the lock
		require.NoError(t, err)
		err = try.TryLock(ctx)
		require.ErrorIs(t, err, rlock.ErrNotObtained)
		require.NoError(t, <-done)
		require.NoError(t, waiter.Unlock(ctx))
		require.NoError(t, try.TryLock(ctx), "free with nobody queued")
		require.NoError(t, try.Unlock(ctx))
	})
}

// TestCancelledWaiterLeavesQueue: a waiter whose ctx ends leaves the
// queue, the waiter behind it moves up, and once everyone is done no key
// is left behind.
func TestCancelledWaiterLeavesQueue(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		rdb := b.NewClient(t)
		opt := rlock.WithReplayWindow(50 * time.Millisecond) // latches go quickly
		holder := newLock(t, newClient(t, b, opt), name)
		require.NoError(t, holder.Lock(ctx))
		c := newClient(t, b, opt)
		a, z := newLock(t, c, name), newLock(t, c, name)
		actx, cancel := context.WithCancel(ctx)
		aDone := lockAsync(actx, a)
		waitQueued(t, holder, 1)
		zDone := lockAsync(ctx, z)
		waitQueued(t, holder, 2)

		cancel()
		require.ErrorIs(t, <-aDone, context.Canceled)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.Equal(c, []string{owner(c, z)}, queue(c, holder))
		}, 5*time.Second, time.Millisecond)
		held, err := a.IsHeld(ctx)
		require.NoError(t, err)
		require.False(t, held)

		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-zDone)
		require.NoError(t, z.Unlock(ctx))
		require.Eventually(t, func() bool {
			n, err := rdb.DBSize(ctx).Result()
			return err == nil && n == 0
		}, 5*time.Second, 5*time.Millisecond, "no key left behind")
	})
}

// Regression (TestLateGrantIsNeverLeaked in reentrant): the head of the
// queue is granted the lock, in time by its deadline check, but its ctx
// ends before Lock takes the result. The grant is released and the next
// waiter gets the lock; nothing is kept for an owner whose Lock failed.
func TestLateGrantToHeadGoesToNext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx))
		c := newClient(t, b)
		a, z := newLock(t, c, name), newLock(t, c, name)
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		aReturned, restore := core.AbandonNextGrant(actx, cancel)
		defer restore()
		aDone := lockAsync(actx, a)
		waitQueued(t, holder, 1)
		zDone := lockAsync(ctx, z)
		waitQueued(t, holder, 2)

		require.NoError(t, holder.Unlock(ctx))
		err := <-aDone
		aReturned()
		require.ErrorIs(t, err, context.Canceled)
		select {
		case err := <-zDone:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Fatal("the next waiter never got the lock: the late grant was kept")
		}
		held, err := a.IsHeld(ctx)
		require.NoError(t, err)
		require.False(t, held)
		require.NoError(t, z.Unlock(ctx))
	})
}

// TestHeadLeavingWakesNext: the waiter first in line gives up while the
// lock is free; the next one must not wait for a timeout to learn that its
// turn has come.
func TestHeadLeavingWakesNext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx))
		// A long queue timeout: only a wake-up can grant z in time.
		rdb := b.Universal(t)
		calls := &redistest.ScriptCalls{}
		rdb.AddHook(calls)
		c := clientOn(t, rdb, rlock.WithMaxPoll(time.Minute))
		a := newLock(t, c, name, fair.WithQueueTimeout(time.Hour))
		z := newLock(t, c, name, fair.WithQueueTimeout(time.Hour))
		actx, cancel := context.WithCancel(ctx)
		aDone := lockAsync(actx, a)
		waitQueued(t, holder, 1)
		zctx, zcancel := context.WithTimeout(ctx, 20*time.Second)
		defer zcancel()
		zDone := lockAsync(zctx, z)
		waitQueued(t, holder, 2)
		// Each tried, subscribed its channel, and tried again once the
		// subscription was confirmed; now both only wait.
		require.Eventually(t, func() bool { return calls.N() == 4 }, 10*time.Second, time.Millisecond)

		// Free the lock without waking anyone (as an expiry would).
		require.NoError(t, b.Universal(t).Del(ctx, name).Err())
		cancel()
		require.ErrorIs(t, <-aDone, context.Canceled)
		require.NoError(t, <-zDone)
		require.NoError(t, z.Unlock(ctx))
	})
}

// TestLeaseExpiryGrantsHead: expiry publishes nothing; the head waiter
// retries when the TTL it saw has passed.
func TestLeaseExpiryGrantsHead(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		name := redistest.Name(t)
		holder := newLock(t, newClient(t, b), name, fair.WithLease(300*time.Millisecond))
		require.NoError(t, holder.Lock(ctx))
		w := newLock(t, newClient(t, b), name)
		require.NoError(t, w.Lock(ctx))
		require.ErrorIs(t, holder.Unlock(ctx), rlock.ErrNotHeld)
		require.NoError(t, w.Unlock(ctx))
	})
}

func TestReentryAndNonOwner(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := newClient(t, b)
		l := newLock(t, c, name)
		other := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Lock(l.Ctx()))    // re-entry: a ctx from the holding
		require.NoError(t, l.TryLock(l.Ctx())) // re-entry
		n, err := l.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, n)

		require.ErrorIs(t, other.Unlock(ctx), rlock.ErrNotHeld)
		require.ErrorIs(t, other.TryLock(ctx), rlock.ErrNotObtained)
		n, err = l.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, n, "a non-owner changed nothing")

		// Explicit owners re-enter across handles.
		octx := rlock.WithOwner(ctx, "job-7")
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, l.Lock(octx))
		require.NoError(t, other.Lock(octx))
		n, err = other.HoldCount(octx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.NoError(t, l.Unlock(octx))
		require.NoError(t, other.Unlock(octx))
		locked, err := l.IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked)
	})
}

// TestWatchdogKeepsFairLock: in watchdog mode the lock outlives many
// leases while held, and its loss is reported.
func TestWatchdogKeepsFairLock(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		const lease = 150 * time.Millisecond
		c := newClient(t, b, rlock.WithWatchdogLease(lease))
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))
		rounds := c.WatchdogStats().Rounds
		require.Eventually(t, func() bool { return c.WatchdogStats().Rounds >= rounds+6 }, 10*time.Second, time.Millisecond)
		held, err := l.IsHeld(ctx)
		require.NoError(t, err)
		require.True(t, held, "renewed past two leases")

		_, err = newLock(t, c, name).ForceUnlock(ctx)
		require.NoError(t, err)
		select {
		case <-l.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("loss not reported")
		}
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
	})
}

// TestManyWaitersNoStall: 500 concurrent waiters on four clients all get
// the lock, one at a time.
func TestManyWaitersNoStall(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		name := redistest.Name(t)
		clients := make([]*rlock.Client, 4)
		for i := range clients {
			clients[i] = newClient(t, b)
		}
		const n = 500
		var inside, granted atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			l := newLock(t, clients[i%len(clients)], name)
			wg.Go(func() {
				if err := l.Lock(ctx); err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					errs <- errors.New("two holders at once")
				}
				granted.Add(1)
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, int32(n), granted.Load())
		for _, c := range clients {
			require.Zero(t, c.Waiters().Waiters)
		}
	})
}

// TestCloseLeavesQueue: closing the client ends its waits with ErrClosed
// and takes its waiters out of the queue.
func TestCloseLeavesQueue(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx))
		c, err := rlock.NewClient(b.NewClient(t))
		require.NoError(t, err)
		done := lockAsync(ctx, newLock(t, c, name))
		waitQueued(t, holder, 1)
		require.NoError(t, c.Close())
		require.ErrorIs(t, <-done, rlock.ErrClosed)
		require.Empty(t, queue(t, holder))
		require.NoError(t, holder.Unlock(ctx))
	})
}

const waiterEnv = "RLOCK_TEST_FAIR_WAITER" // "addr name queueTimeoutMillis"

// TestHelperWaiter is not a test: it is the child process of
// TestCrashedWaiterIsPruned. It queues for the lock, says so, and waits to
// be killed.
func TestHelperWaiter(t *testing.T) {
	if !redistest.IsHelperProcess() {
		t.Skip("helper process for TestCrashedWaiterIsPruned")
	}
	args := strings.Fields(os.Getenv(waiterEnv))
	require.Len(t, args, 3)
	ms, err := strconv.Atoi(args[2])
	require.NoError(t, err)
	c, err := rlock.NewClient(redis.NewClient(&redis.Options{Addr: args[0]}))
	require.NoError(t, err)
	l, err := fair.New(c, args[1], fair.WithQueueTimeout(time.Duration(ms)*time.Millisecond))
	require.NoError(t, err)
	go func() {
		me, _ := l.Owner(context.Background())
		for {
			q, err := l.Queue(context.Background())
			if err == nil && len(q) > 0 && q[len(q)-1].Owner == me {
				os.Stdout.WriteString("queued\n")
				return
			}
			time.Sleep(time.Millisecond) // polling a foreign process's state
		}
	}()
	err = l.Lock(context.Background())
	t.Fatalf("the helper got the lock or failed: %v", err)
}

// TestCrashedWaiterIsPruned: a waiter process killed while first in line
// cannot block the queue: the next waiter is granted once the dead
// waiter's deadline has passed, not later.
func TestCrashedWaiterIsPruned(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := redistest.Name(t)
		const timeout = 900 * time.Millisecond
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx))
		child := redistest.StartHelperProcess(t, "TestHelperWaiter",
			waiterEnv+"="+b.Addr+" "+name+" "+strconv.Itoa(int(timeout.Milliseconds())))
		child.WaitLine(t, "queued", 20*time.Second)

		next := newLock(t, newClient(t, b), name, fair.WithQueueTimeout(timeout))
		done := lockAsync(ctx, next)
		waitQueued(t, holder, 2)
		child.Kill()
		q, err := holder.Queue(ctx)
		require.NoError(t, err)
		deadline := q[0].Deadline              // the dead waiter's last renewal + timeout
		require.NoError(t, holder.Unlock(ctx)) // wakes the dead head: nobody answers

		require.NoError(t, <-done)
		granted := time.Now()
		require.Less(t, granted.Sub(deadline), 500*time.Millisecond,
			"granted %v after the dead waiter's deadline", granted.Sub(deadline))
		require.Empty(t, queue(t, holder), "the dead waiter was pruned")
		require.NoError(t, next.Unlock(ctx))
	})
}

// TestLiveWaiterKeepsPlace: waiters that wait far longer than the queue
// timeout keep their places, because they renew them (Redisson's fair
// lock drops them as dead).
func TestLiveWaiterKeepsPlace(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		const timeout = 200 * time.Millisecond // renewed every third: robust on a loaded machine
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx))
		c := newClient(t, b)
		a := newLock(t, c, name, fair.WithQueueTimeout(timeout))
		z := newLock(t, c, name, fair.WithQueueTimeout(timeout))
		aDone := lockAsync(ctx, a)
		waitQueued(t, holder, 1)
		zDone := lockAsync(ctx, z)
		waitQueued(t, holder, 2)

		// Let ten queue timeouts pass; the places are renewed meanwhile.
		start := time.Now()
		require.Eventually(t, func() bool {
			q, err := holder.Queue(ctx)
			return err == nil && len(q) == 2 && time.Since(start) > 10*timeout &&
				q[0].Owner == owner(t, a) && q[0].Left > 0
		}, 10*time.Second, 5*time.Millisecond)
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-aDone)
		select {
		case err := <-zDone:
			t.Fatalf("the second waiter was granted before the first: %v", err)
		default:
		}
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, <-zDone)
		require.NoError(t, z.Unlock(ctx))
	})
}

func TestBadInput(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	c := clientOn(t, rdb)
	_, err := fair.New(nil, "x")
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = fair.New(c, "")
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = fair.New(c, strings.Repeat("n", base.MaxNameLen+1))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	for _, o := range []fair.Option{
		fair.WithLease(-time.Second), fair.WithLease(time.Microsecond),
		fair.WithQueueTimeout(0), fair.WithQueueTimeout(time.Millisecond),
	} {
		_, err = fair.New(c, "x", o)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	}
	l, err := fair.New(c, "x", nil)
	require.NoError(t, err, "nil options are ignored")
	bad := rlock.WithOwner(context.Background(), "#1")
	require.ErrorIs(t, l.Lock(bad), rlock.ErrInvalidArgument)
	require.ErrorIs(t, l.Unlock(bad), rlock.ErrInvalidArgument)
	require.ErrorIs(t, l.LockLease(context.Background(), -1), rlock.ErrInvalidArgument)
	// A Redis error is never "acquired".
	require.Error(t, l.TryLock(context.Background()))
	require.NotErrorIs(t, l.TryLock(context.Background()), rlock.ErrNotObtained)
}
