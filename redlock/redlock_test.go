package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/redlock"
	"github.com/rlock-go/rlock/reentrant"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // dead nodes are expected here; keep the output readable
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// fast are go-redis options that make a dead or frozen node fail fast, as
// the package documentation recommends.
func fast(o *redis.Options) {
	o.DialTimeout = time.Second
	o.ReadTimeout = time.Second
	o.WriteTimeout = time.Second
	o.MaxRetries = -1
	o.DialerRetries = 1
}

// cluster is n independent servers with one go-redis client each.
type cluster struct {
	real []*redistest.Server  // nil for miniredis
	bs   []*redistest.Backend // the backends
	rdbs []*redis.Client
}

func startCluster(t *testing.T, n int, start func(testing.TB) *redistest.Backend) *cluster {
	t.Helper()
	c := &cluster{}
	for range n {
		b := start(t)
		c.bs = append(c.bs, b)
		c.real = append(c.real, b.Real)
		c.rdbs = append(c.rdbs, b.NewClient(t, fast))
	}
	return c
}

// clients returns one rlock client per node (one simulated process).
func (c *cluster) clients(t *testing.T, opts ...rlock.ClientOption) []*rlock.Client {
	t.Helper()
	cs := make([]*rlock.Client, len(c.rdbs))
	for i, rdb := range c.rdbs {
		rc, err := rlock.NewClient(rdb, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = rc.Close() })
		cs[i] = rc
	}
	return cs
}

// exists reports, per node, whether the key name exists.
func (c *cluster) exists(t *testing.T, name string) []bool {
	t.Helper()
	out := make([]bool, len(c.rdbs))
	for i, rdb := range c.rdbs {
		n, err := rdb.Exists(context.Background(), name).Result()
		require.NoError(t, err)
		out[i] = n == 1
	}
	return out
}

// each5 runs fn on five miniredis servers and on five real redis-servers.
func each5(t *testing.T, fn func(t *testing.T, c *cluster)) {
	t.Helper()
	t.Run(redistest.MiniName, func(t *testing.T) { fn(t, startCluster(t, 5, redistest.Mini)) })
	t.Run(redistest.RealName, func(t *testing.T) { fn(t, startCluster(t, 5, redistest.Real)) })
}

func newRedLock(t *testing.T, name string, cs []*rlock.Client, opts ...redlock.Option) *redlock.RedLock {
	t.Helper()
	rl, err := redlock.New(cs, name, opts...)
	require.NoError(t, err)
	return rl
}

func TestBadInput(t *testing.T) {
	b := redistest.Mini(t)
	c, err := rlock.NewClient(b.NewClient(t))
	require.NoError(t, err)
	defer c.Close()
	c2, err := rlock.NewClient(b.NewClient(t))
	require.NoError(t, err)
	defer c2.Close()

	for _, tc := range []struct {
		name  string
		nodes []*rlock.Client
		opts  []redlock.Option
	}{
		{"n", nil, nil},
		{"n", []*rlock.Client{}, nil},
		{"n", []*rlock.Client{c, nil}, nil},
		{"n", []*rlock.Client{c, c}, nil},
		{"", []*rlock.Client{c}, nil},
		{"n", []*rlock.Client{c}, []redlock.Option{redlock.WithLease(time.Microsecond)}},
		{"n", []*rlock.Client{c}, []redlock.Option{redlock.WithNodeWait(0)}},
		{"n", []*rlock.Client{c}, []redlock.Option{redlock.WithRetryDelay(time.Second, time.Millisecond)}},
		{"n", []*rlock.Client{c, c2}, []redlock.Option{redlock.WithNodeNames("a")}},
	} {
		_, err := redlock.New(tc.nodes, tc.name, tc.opts...)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument, "%+v", tc)
	}
	_, err = redlock.New([]*rlock.Client{c}, "n", redlock.WithLease(rlock.WatchdogMode))
	require.NoError(t, err, "the zero lease is watchdog mode, as for every lock kind")
	rl, err := redlock.New([]*rlock.Client{c, c2}, "n", nil)
	require.NoError(t, err)
	require.Equal(t, 2, rl.Quorum())
	ctx := context.Background()
	require.ErrorIs(t, rl.Unlock(ctx), rlock.ErrNotHeld)
	require.ErrorIs(t, rl.TryLock(rlock.WithOwner(ctx, "#bad")), rlock.ErrInvalidArgument)
}

// For every subset of nodes held by another owner, TryLock succeeds
// exactly when a quorum of nodes is free, and a failed attempt leaves
// nothing behind.
func TestEveryMask(t *testing.T) {
	each5(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		mine, theirs := c.clients(t), c.clients(t)
		for mask := range 32 {
			name := fmt.Sprintf("%s:%d", redistest.Name(t), mask)
			var others []*reentrant.Lock
			free := 0
			for i := range 5 {
				if mask&(1<<i) == 0 {
					free++
					continue
				}
				l, err := reentrant.New(theirs[i], name)
				require.NoError(t, err)
				require.NoError(t, l.TryLock(ctx))
				others = append(others, l)
			}
			rl := newRedLock(t, name, mine)
			err := rl.TryLock(ctx)
			if free >= 3 {
				require.NoError(t, err, "mask %05b", mask)
				require.NoError(t, rl.Unlock(ctx))
			} else {
				require.ErrorIs(t, err, rlock.ErrNotObtained, "mask %05b", mask)
				var ne *multilock.Error
				require.ErrorAs(t, err, &ne)
				require.Len(t, ne.Failures, 5-free)
				for _, f := range ne.Failures {
					require.NotZero(t, mask&(1<<f.Index), "node %d failed but was free", f.Index)
					require.ErrorIs(t, f.Err, rlock.ErrNotObtained)
				}
			}
			// Only the other owner's locks remain.
			for i, ok := range c.exists(t, name) {
				require.Equal(t, mask&(1<<i) != 0, ok, "mask %05b node %d", mask, i)
			}
			for _, l := range others {
				require.NoError(t, l.Unlock(ctx))
			}
		}
	})
}

func TestKilledNodes(t *testing.T) {
	t.Run(redistest.RealName, func(t *testing.T) {
		c := startCluster(t, 5, redistest.Real)
		killed(t, c, func(i int) { c.real[i].Kill() })
	})
	t.Run(redistest.MiniName, func(t *testing.T) {
		c := startCluster(t, 5, redistest.Mini)
		killed(t, c, func(i int) { c.bs[i].Mini.Close() })
	})
}

func killed(t *testing.T, c *cluster, kill func(int)) {
	ctx := context.Background()
	cs := c.clients(t)
	name := redistest.Name(t)
	rl := newRedLock(t, name, cs, redlock.WithLease(10*time.Second))

	kill(0)
	kill(3)
	require.NoError(t, rl.TryLock(ctx))
	require.NoError(t, rl.Unlock(ctx))
	require.NoError(t, rl.Lock(ctx))
	require.NoError(t, rl.Unlock(ctx))

	kill(4)
	// One attempt with a 1 s budget: 200 ms per node. It fails as "not
	// obtained", not as the context's deadline, so it returned within
	// the budget.
	bctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := rl.TryLock(bctx)
	require.ErrorIs(t, err, rlock.ErrNotObtained)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	var ne *multilock.Error
	require.ErrorAs(t, err, &ne)
	require.Equal(t, 2, ne.Held)
	require.Len(t, ne.Failures, 3)
	for _, f := range ne.Failures {
		require.Contains(t, []int{0, 3, 4}, f.Index)
	}
	require.ErrorContains(t, err, "node 4")
	for _, i := range []int{1, 2} {
		n, err := c.rdbs[i].Exists(ctx, name).Result()
		require.NoError(t, err)
		require.Zero(t, n, "node %d keeps a key", i)
	}
	// Lock keeps trying until its context ends, and says so.
	lctx, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	err = rl.Lock(lctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, rlock.ErrNotObtained)
}

// A frozen node delays an attempt by the per-node wait at most, and a key
// it grants after thawing does not outlive its lease.
func TestFrozenNode(t *testing.T) {
	c := startCluster(t, 5, redistest.Real)
	ctx := context.Background()
	cs := c.clients(t)
	name := redistest.Name(t)
	const lease = 2 * time.Second
	rl := newRedLock(t, name, cs, redlock.WithLease(lease), redlock.WithNodeWait(100*time.Millisecond))

	c.real[2].Freeze()
	frozen := true
	defer func() {
		if frozen {
			c.real[2].Thaw()
		}
	}()
	// The context's deadline is beyond the per-node wait (100 ms) but well
	// before the go-redis read timeout (1 s): the attempt ends at the
	// per-node wait, or the error would be the deadline's.
	for _, lock := range []func(context.Context) error{rl.TryLock, rl.Lock} {
		bctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
		require.NoError(t, lock(bctx))
		cancel()
		require.True(t, time.Now().Before(rl.Until()))
		require.NoError(t, rl.Unlock(ctx))
	}

	c.real[2].Thaw()
	frozen = false
	// Wait for everything still running against the thawed node: the
	// background releases, then the attempts (closing a client waits for
	// them). Every command sent is answered by then. A key a late attempt
	// left has at most the lease left, and goes away within it.
	require.Eventually(t, func() bool { return redlock.PendingReleases(rl) == 0 }, 10*time.Second, 10*time.Millisecond)
	for _, rc := range cs {
		require.NoError(t, rc.Close())
	}
	if ttl, err := c.rdbs[2].PTTL(ctx, name).Result(); err == nil && ttl > 0 {
		require.LessOrEqual(t, ttl, lease)
	}
	require.Eventually(t, func() bool {
		n, err := c.rdbs[2].Exists(ctx, name).Result()
		return err == nil && n == 0
	}, lease+time.Second, 20*time.Millisecond)
	for i, ok := range c.exists(t, name) {
		require.False(t, ok, "node %d", i)
	}
}

func TestMutualExclusion(t *testing.T) {
	each5(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		name := redistest.Name(t)
		sets := [][]*rlock.Client{c.clients(t), c.clients(t)} // two processes
		var inside, entries atomic.Int32
		var wg sync.WaitGroup
		for g := range 8 {
			rl := newRedLock(t, name, sets[g%2], redlock.WithRetryDelay(time.Millisecond, 10*time.Millisecond))
			wg.Go(func() {
				for range 3 {
					if err := rl.Lock(ctx); err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					if inside.Add(1) != 1 {
						t.Errorf("two holders at once")
					}
					entries.Add(1)
					inside.Add(-1)
					if err := rl.Unlock(ctx); err != nil {
						t.Errorf("Unlock: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 24, entries.Load())
		for i, ok := range c.exists(t, name) {
			require.False(t, ok, "node %d", i)
		}
	})
}

func TestReentry(t *testing.T) {
	each5(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		name := redistest.Name(t)
		cs := c.clients(t)
		rl := newRedLock(t, name, cs)
		other := newRedLock(t, name, cs)
		require.NoError(t, rl.Lock(ctx))
		require.NoError(t, rl.TryLock(rl.Ctx())) // re-entry through the holding's ctx
		require.ErrorIs(t, other.TryLock(ctx), rlock.ErrNotObtained)
		require.NoError(t, rl.Unlock(ctx))
		require.ErrorIs(t, other.TryLock(ctx), rlock.ErrNotObtained)
		require.NoError(t, rl.Unlock(ctx))
		require.ErrorIs(t, rl.Unlock(ctx), rlock.ErrNotHeld)
		require.NoError(t, other.TryLock(ctx))
		require.NoError(t, other.Unlock(ctx))

		// An explicit owner: two goroutines of one job share the lock.
		jctx := rlock.WithOwner(ctx, "job-1")
		require.NoError(t, rl.Lock(jctx))
		require.ErrorIs(t, rl.TryLock(ctx), rlock.ErrNotObtained) // the handle is another owner
		require.NoError(t, rl.TryLock(jctx))
		require.NoError(t, rl.Unlock(jctx))
		require.NoError(t, rl.Unlock(jctx))
		for i, ok := range c.exists(t, name) {
			require.False(t, ok, "node %d", i)
		}
	})
}

func TestCancellationIsNotNotObtained(t *testing.T) {
	each5(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		name := redistest.Name(t)
		cs := c.clients(t)
		holder, rl := newRedLock(t, name, cs), newRedLock(t, name, cs)
		require.NoError(t, holder.Lock(ctx))

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := rl.TryLock(cctx)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, rlock.ErrNotObtained)

		dctx, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel2()
		err = rl.Lock(dctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, rlock.ErrNotObtained)

		// A Lock waiting for the holder gets the lock once it is released.
		done := make(chan error, 1)
		go func() { done <- rl.Lock(ctx) }()
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-done)
		require.NoError(t, rl.Unlock(ctx))
	})
}

// A lease too short for the time an attempt takes yields no lock, and the
// nodes that granted it are released.
func TestValidityNotPositive(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		var cs []*rlock.Client
		var rdbs []*redis.Client
		for range 3 {
			var p *redistest.Proxy
			var rdb *redis.Client
			if b.IsMini() {
				p, rdb = redistest.Mini(t).NewProxiedClient(t, fast)
			} else {
				p, rdb = redistest.Real(t).NewProxiedClient(t, fast)
			}
			p.SetLatency(30 * time.Millisecond)
			rc, err := rlock.NewClient(rdb)
			require.NoError(t, err)
			t.Cleanup(func() { _ = rc.Close() })
			cs, rdbs = append(cs, rc), append(rdbs, rdb)
		}
		rl := newRedLock(t, name, cs, redlock.WithLease(20*time.Millisecond), redlock.WithNodeWait(time.Second))
		err := rl.TryLock(ctx)
		require.ErrorIs(t, err, rlock.ErrNotObtained)
		var ne *multilock.Error
		require.ErrorAs(t, err, &ne)
		require.Equal(t, 3, ne.Held)
		require.LessOrEqual(t, ne.Validity, time.Duration(0))
		require.ErrorContains(t, err, "validity")
		for i, rdb := range rdbs {
			n, err := rdb.Exists(ctx, name).Result()
			require.NoError(t, err)
			require.Zero(t, n, "node %d", i)
		}
	})
}

func TestLossIsReported(t *testing.T) {
	each5(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		name := redistest.Name(t)
		cs := c.clients(t, rlock.WithWatchdogLease(300*time.Millisecond))
		rl := newRedLock(t, name, cs, redlock.WithNodeNames("a", "b", "c", "d", "e"))
		require.NoError(t, rl.Lock(ctx))
		require.NoError(t, rl.Lock(rl.Ctx())) // two holds
		// Watchdog mode: known held for the watchdog lease from the
		// acquisition, less the drift allowance.
		require.True(t, time.Now().Before(rl.Until()))
		require.False(t, rl.Until().After(time.Now().Add(300*time.Millisecond)))
		// The watchdog renews every node: held well past the 300 ms lease.
		require.Never(t, func() bool {
			select {
			case <-rl.Done():
				t.Logf("ended: %v", rl.Err())
				return true
			default:
				return false
			}
		}, 900*time.Millisecond, 50*time.Millisecond)
		require.NoError(t, rl.Err())
		for i, ok := range c.exists(t, name) {
			require.True(t, ok, "node %d", i)
		}
		// Another process force-unlocks three of five nodes.
		admin := c.clients(t)
		for _, i := range []int{0, 2, 4} {
			l, err := reentrant.New(admin[i], name)
			require.NoError(t, err)
			_, err = l.ForceUnlock(ctx)
			require.NoError(t, err)
		}
		<-rl.Done()
		err := rl.Err()
		require.ErrorIs(t, err, rlock.ErrLockLost)
		var ne *multilock.Error
		require.ErrorAs(t, err, &ne)
		require.Less(t, ne.Held, 3)
		err = rl.Unlock(ctx) // the first of two reports the loss and ends it
		require.ErrorIs(t, err, rlock.ErrLockLost)
		require.ErrorIs(t, rl.Unlock(ctx), rlock.ErrNotHeld)
		for i, ok := range c.exists(t, name) {
			require.False(t, ok, "node %d", i)
		}

		// With a lease, the validity running out ends the holding.
		rl = newRedLock(t, name, cs, redlock.WithLease(500*time.Millisecond))
		require.NoError(t, rl.TryLock(ctx))
		until := rl.Until()
		require.False(t, until.IsZero())
		<-rl.Done()
		require.ErrorIs(t, rl.Err(), rlock.ErrLockLost)
		require.False(t, time.Now().Before(until))
		// The lost holding still needs its Unlock, which reports the loss
		// and lets the handle's goroutines in again (as with sync.Mutex).
		require.ErrorIs(t, rl.Unlock(ctx), rlock.ErrLockLost)
		require.NoError(t, rl.TryLock(ctx)) // a fresh acquisition, not a re-entry
		require.NoError(t, rl.Unlock(ctx))
		<-rl.Done()
		require.NoError(t, rl.Err())
	})
}

func TestNodeErrorUnwraps(t *testing.T) {
	boom := errors.New("boom")
	e := &multilock.Error{Name: "n", Op: "lock", Quorum: 2, Failures: []multilock.Failure{{Index: 1, Member: "x", Err: boom}}}
	require.ErrorIs(t, e, boom)
	require.Contains(t, e.Error(), "x: boom")
}

func TestLeasePerCall(t *testing.T) {
	each5(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		name := redistest.Name(t)
		rl := newRedLock(t, name, c.clients(t))
		require.ErrorIs(t, rl.TryLockLease(ctx, -time.Second), rlock.ErrInvalidArgument)
		require.ErrorIs(t, rl.TryLockLease(ctx, time.Microsecond), rlock.ErrInvalidArgument)
		require.ErrorIs(t, rl.SetLease(ctx, time.Second), rlock.ErrNotHeld)

		const lease = 5 * time.Second
		before := time.Now()
		require.NoError(t, rl.TryLockLease(ctx, lease))
		after := time.Now()
		until := rl.Until()
		require.True(t, until.After(before))
		require.False(t, until.After(after.Add(lease-multilock.Drift(lease))))
		for i, rdb := range c.rdbs {
			ttl, err := rdb.PTTL(ctx, name).Result()
			require.NoError(t, err)
			require.LessOrEqual(t, ttl, lease, "node %d", i)
		}

		require.NoError(t, rl.SetLease(ctx, 4*lease))
		require.True(t, rl.Until().After(until))
		for i, rdb := range c.rdbs {
			ttl, err := rdb.PTTL(ctx, name).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, lease, "node %d", i)
		}
		require.NoError(t, rl.SetLease(ctx, rlock.WatchdogMode))
		// The nodes' watchdog lease (30 s by default) from now, less the drift.
		require.WithinDuration(t, time.Now().Add(30*time.Second), rl.Until(), 2*time.Second)
		require.NoError(t, rl.Err())
		require.NoError(t, rl.Unlock(ctx))
		<-rl.Done()
		require.NoError(t, rl.Err())

		// A RedLock nests in a MultiLock like any rlock.LeaseLocker.
		other := newRedLock(t, name+":2", c.clients(t))
		m, err := multilock.New([]rlock.Locker{rl, other}, multilock.WithLease(lease))
		require.NoError(t, err)
		require.NoError(t, m.Lock(ctx))
		require.False(t, rl.Until().IsZero())
		require.NoError(t, m.Unlock(ctx))
		for i, ok := range c.exists(t, name) {
			require.False(t, ok, "node %d", i)
		}
	})
}

// A node whose reply is lost after its script ran is released by the
// rollback, long before its lease would end it.
func TestLostReplyIsRolledBack(t *testing.T) {
	for _, kind := range []struct {
		name  string
		start func(testing.TB) *redistest.Backend
	}{{redistest.MiniName, redistest.Mini}, {redistest.RealName, redistest.Real}} {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			name := redistest.Name(t)
			p, rdb0 := kind.start(t).NewProxiedClient(t, fast)
			rdbs := []*redis.Client{rdb0, kind.start(t).NewClient(t, fast), kind.start(t).NewClient(t, fast)}
			mine, theirs := make([]*rlock.Client, 3), make([]*rlock.Client, 3)
			for i, rdb := range rdbs {
				for _, set := range [][]*rlock.Client{mine, theirs} {
					rc, err := rlock.NewClient(rdb)
					require.NoError(t, err)
					t.Cleanup(func() { _ = rc.Close() })
					set[i] = rc
				}
			}
			warm := newRedLock(t, name+":warm", mine) // loads the scripts
			require.NoError(t, warm.TryLock(ctx))
			require.NoError(t, warm.Unlock(ctx))
			for i := 1; i < 3; i++ { // another owner holds nodes 1 and 2
				l, err := reentrant.New(theirs[i], name)
				require.NoError(t, err)
				require.NoError(t, l.TryLock(ctx))
			}

			const lease = time.Minute
			rl := newRedLock(t, name, mine, redlock.WithLease(lease))
			p.DropNextReply("evalsha") // node 0 grants, its reply is lost
			err := rl.TryLock(ctx)
			require.ErrorIs(t, err, rlock.ErrNotObtained)
			var ne *multilock.Error
			require.ErrorAs(t, err, &ne)
			require.Len(t, ne.Failures, 3)
			require.NotErrorIs(t, ne.Failures[0].Err, rlock.ErrNotObtained) // a Redis error
			require.Equal(t, 1, p.Dropped())
			// The key node 0 granted goes away by the rollback, not by the
			// lease (a minute).
			require.Eventually(t, func() bool {
				n, err := rdb0.Exists(ctx, name).Result()
				return err == nil && n == 0
			}, 10*time.Second, 10*time.Millisecond)
		})
	}
}

func TestClosedClients(t *testing.T) {
	c := startCluster(t, 3, redistest.Mini)
	cs := c.clients(t)
	rl := newRedLock(t, redistest.Name(t), cs)
	require.NoError(t, cs[0].Close())
	ctx := context.Background()
	require.NoError(t, rl.Lock(ctx)) // two of three are enough
	require.NoError(t, rl.Unlock(ctx))
	require.NoError(t, cs[1].Close())
	// No quorum can be reached any more: Lock fails instead of waiting.
	err := rl.Lock(ctx)
	require.ErrorIs(t, err, rlock.ErrNotObtained)
	require.ErrorIs(t, err, rlock.ErrClosed)
}
