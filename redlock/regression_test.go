package redlock_test

import (
	"context"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/redlock"
	"github.com/rlock-go/rlock/reentrant"
)

// Regression (issue 12): a nil context made every entry point panic.
func TestNilContextIsAnError(t *testing.T) {
	b := redistest.Mini(t)
	c, err := rlock.NewClient(b.NewClient(t))
	require.NoError(t, err)
	defer c.Close()
	rl := newRedLock(t, redistest.Name(t), []*rlock.Client{c})
	var nilCtx context.Context
	require.ErrorIs(t, rl.Lock(nilCtx), rlock.ErrInvalidArgument)
	require.ErrorIs(t, rl.TryLock(nilCtx), rlock.ErrInvalidArgument)
	require.ErrorIs(t, rl.LockLease(nilCtx, time.Second), rlock.ErrInvalidArgument)
	require.ErrorIs(t, rl.TryLockLease(nilCtx, time.Second), rlock.ErrInvalidArgument)
	require.ErrorIs(t, rl.SetLease(nilCtx, time.Second), rlock.ErrInvalidArgument)
	require.ErrorIs(t, rl.Unlock(nilCtx), rlock.ErrInvalidArgument)
}

// Regression (issue 12, defect 3, MultiLock form): a MultiLock with an
// explicit lease over a RedLock the owner already held in watchdog mode
// set the lease on the RedLock's nodes, which stopped their renewal; after
// the MultiLock's Unlock the owner's RedLock expired and nothing reported
// it. (Also: the nodes' acquisitions must not report to the MultiLock, a
// data race under -race.)
func TestMultiLockLeaseDoesNotShortenARedLockItDidNotCreate(t *testing.T) {
	const lease = 200 * time.Millisecond
	each5(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		name := redistest.Name(t)
		cs := c.clients(t, rlock.WithWatchdogLease(2*time.Second))
		rl := newRedLock(t, name, cs)
		require.NoError(t, rl.Lock(ctx)) // watchdog mode

		other := newRedLock(t, name+":2", cs)
		m, err := multilock.New([]rlock.Locker{rl, other}, multilock.WithLease(lease))
		require.NoError(t, err)
		require.NoError(t, m.Lock(rl.Ctx())) // re-enters rl
		require.True(t, rl.Until().After(time.Now().Add(lease)), "the re-entered RedLock got the MultiLock's lease")
		require.False(t, other.Until().IsZero())
		require.False(t, other.Until().After(time.Now().Add(lease)), "the RedLock the MultiLock took has its lease")
		for i, rdb := range c.rdbs {
			ttl, err := rdb.PTTL(ctx, name).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, time.Second, "node %d lost its watchdog lease", i)
		}
		require.NoError(t, m.Unlock(ctx))
		require.Never(t, func() bool {
			for _, rdb := range c.rdbs {
				if n, err := rdb.Exists(ctx, name).Result(); err == nil && n == 0 {
					return true
				}
			}
			return false
		}, 5*lease, lease/10, "a node's lock expired unrenewed")
		require.NoError(t, rl.Err())
		require.NoError(t, rl.Unlock(ctx))
	})
}

// Regression (issue 12, suspicion: same-owner RedLock calls racing with
// different leases). Two calls of one owner attempt at once, one with a
// long lease and one with a short one; on each node the second re-enters
// the first's hold. The call that loses the race keeps the winner's
// holding and rolls its own holds back, and that release used to restore
// the loser's shorter lease: the nodes expired long before the validity
// (Until) the holder relies on. Every node must outlive the validity.
func TestSameOwnerRaceNeverLeavesNodesShorterThanTheValidity(t *testing.T) {
	const long, short = time.Minute, 300 * time.Millisecond
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		var cs []*rlock.Client
		var rdbs []*redis.Client
		for range 3 {
			start := redistest.Mini
			if b.IsReal() {
				start = redistest.Real
			}
			p, rdb := start(t).NewProxiedClient(t, fast)
			p.SetLatency(5 * time.Millisecond) // the two attempts overlap on every node
			rc, err := rlock.NewClient(rdb)
			require.NoError(t, err)
			t.Cleanup(func() { _ = rc.Close() })
			cs, rdbs = append(cs, rc), append(rdbs, rdb)
		}
		for trial := range 8 {
			name := redistest.Name(t)
			rl := newRedLock(t, name, cs, redlock.WithNodeWait(5*time.Second))
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, lease := range []time.Duration{long, short} {
				wg.Go(func() {
					<-start
					// One explicit owner: two goroutines of one job race.
					if err := rl.TryLockLease(rlock.WithOwner(ctx, "job"), lease); err != nil {
						t.Errorf("TryLockLease(%v): %v", lease, err)
					}
				})
			}
			close(start)
			wg.Wait()
			require.Zero(t, waitPending(t, rl))
			until := rl.Until()
			for i, rdb := range rdbs {
				ttl, err := rdb.PTTL(ctx, name).Result()
				require.NoError(t, err)
				require.GreaterOrEqual(t, ttl, time.Until(until), "trial %d: node %d expires before the validity ends", trial, i)
			}
			jctx := rlock.WithOwner(ctx, "job")
			require.NoError(t, rl.Unlock(jctx))
			require.NoError(t, rl.Unlock(jctx))
		}
	})
}

// waitPending waits until r's background releases are done.
func waitPending(t *testing.T, r *redlock.RedLock) int {
	t.Helper()
	require.Eventually(t, func() bool { return redlock.PendingReleases(r) == 0 }, 10*time.Second, time.Millisecond)
	return redlock.PendingReleases(r)
}

// Regression (issue 12, suspicion: the success path kept nodes whose
// outcome is unknown). A node runs the acquire script but its reply is
// lost, while a quorum of other nodes grants: the RedLock is held, and the
// hold on the lost-reply node must be given back at once, not left until
// its lease (a minute) or, after the RedLock's Unlock, forever in the way
// of other owners.
func TestSuccessGivesBackANodeWhoseReplyWasLost(t *testing.T) {
	for _, kind := range []struct {
		name  string
		start func(testing.TB) *redistest.Backend
	}{{redistest.MiniName, redistest.Mini}, {redistest.RealName, redistest.Real}} {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			name := redistest.Name(t)
			p, rdb0 := kind.start(t).NewProxiedClient(t, fast)
			rdbs := []*redis.Client{rdb0, kind.start(t).NewClient(t, fast), kind.start(t).NewClient(t, fast)}
			cs := make([]*rlock.Client, 3)
			for i, rdb := range rdbs {
				rc, err := rlock.NewClient(rdb)
				require.NoError(t, err)
				t.Cleanup(func() { _ = rc.Close() })
				cs[i] = rc
			}
			warm := newRedLock(t, name+":warm", cs) // loads the scripts
			require.NoError(t, warm.TryLock(ctx))
			require.NoError(t, warm.Unlock(ctx))

			rl := newRedLock(t, name, cs, redlock.WithLease(time.Minute))
			p.DropNextReply("evalsha") // node 0 grants, its reply is lost
			require.NoError(t, rl.TryLock(ctx))
			require.Equal(t, 1, p.Dropped())
			require.Eventually(t, func() bool {
				n, err := rdb0.Exists(ctx, name).Result()
				return err == nil && n == 0
			}, 10*time.Second, 10*time.Millisecond, "node 0 stays locked")
			require.NoError(t, rl.Unlock(ctx))
			for i, ok := range []*redis.Client{rdb0} {
				n, err := ok.Exists(ctx, name).Result()
				require.NoError(t, err)
				require.Zero(t, n, "node %d", i)
			}
		})
	}
}

// The rollback of a failed attempt gives back only what the attempt got.
// A node whose reply was lost has its unreported grant given back by the
// node's client; the rollback releasing it too took one more hold: here
// the hold the owner had on that node's key through a handle of its own.
func TestRollbackNeverReleasesAHoldTheAttemptDidNotGet(t *testing.T) {
	for _, kind := range []struct {
		name  string
		start func(testing.TB) *redistest.Backend
	}{{redistest.MiniName, redistest.Mini}, {redistest.RealName, redistest.Real}} {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			xctx := rlock.WithOwner(ctx, "x")
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
			own, err := reentrant.New(mine[0], name) // x's own hold on node 0's key
			require.NoError(t, err)
			require.NoError(t, own.TryLockLease(xctx, time.Minute))

			rl := newRedLock(t, name, mine)
			p.DropNextReply("evalsha") // node 0 re-enters, its reply is lost
			require.ErrorIs(t, rl.TryLock(xctx), rlock.ErrNotObtained)
			require.Equal(t, 1, p.Dropped())
			require.Zero(t, waitPending(t, rl))
			require.Eventually(t, func() bool {
				n, err := own.HoldCount(xctx)
				return err == nil && n == 1
			}, 10*time.Second, 10*time.Millisecond, "the re-entry is not given back")
			n, err := own.HoldCount(xctx)
			require.NoError(t, err)
			require.Equal(t, 1, n, "x's own hold was released")
			require.NoError(t, own.Unlock(xctx))
		})
	}
}

// forceUnlock deletes name on the given nodes, as another process would.
func forceUnlock(t *testing.T, c *cluster, name string, nodes ...int) {
	t.Helper()
	admin := c.clients(t)
	for _, i := range nodes {
		l, err := reentrant.New(admin[i], name)
		require.NoError(t, err)
		_, err = l.ForceUnlock(context.Background())
		require.NoError(t, err)
	}
}

// Regression (issue 12, suspicion on the loss watcher): the watcher read a
// node's Err from the node handle, whose last holding period may be
// another owner's. Owner x loses two of five nodes; owner y, through the
// same RedLock handle, takes them and fails (no quorum), releasing them;
// x then finds its two nodes lost. Their failures were reported as
// "released on the node" (y's clean release) instead of x's own cause.
func TestLossWatcherReadsItsOwnNodeHoldings(t *testing.T) {
	each5(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		xctx, yctx := rlock.WithOwner(ctx, "x"), rlock.WithOwner(ctx, "y")
		name := redistest.Name(t)
		rl := newRedLock(t, name, c.clients(t))
		require.NoError(t, rl.Lock(xctx))

		forceUnlock(t, c, name, 0, 1)
		require.ErrorIs(t, rl.TryLock(yctx), rlock.ErrNotObtained) // y got nodes 0 and 1, then let them go
		require.Zero(t, waitPending(t, rl))

		err := rl.SetLease(xctx, rlock.WatchdogMode) // x finds nodes 0 and 1 lost
		var ne *multilock.Error
		require.ErrorAs(t, err, &ne)
		require.Equal(t, 3, ne.Held) // still held on a quorum
		require.NoError(t, rl.Err())
		forceUnlock(t, c, name, 2)
		require.ErrorIs(t, rl.SetLease(xctx, rlock.WatchdogMode), rlock.ErrNotHeld)
		<-rl.Done()
		err = rl.Err()
		require.ErrorIs(t, err, rlock.ErrLockLost)
		require.ErrorAs(t, err, &ne)
		require.Len(t, ne.Failures, 3)
		for _, f := range ne.Failures {
			require.ErrorContains(t, f.Err, "no longer held when its lease was set", "node %d", f.Index)
		}
		require.ErrorIs(t, rl.Unlock(xctx), rlock.ErrLockLost)
	})
}

// Regression (issue 12, defect 10's converse for RedLock): an Unlock that
// finds the lock lost on so many nodes that fewer than a quorum still held
// it ended the holding as a clean release: Err was nil.
func TestLossFoundByUnlockIsReported(t *testing.T) {
	each5(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		name := redistest.Name(t)
		rl := newRedLock(t, name, c.clients(t))
		require.NoError(t, rl.Lock(ctx))
		forceUnlock(t, c, name, 0, 1, 2)
		require.ErrorIs(t, rl.Unlock(ctx), rlock.ErrNotHeld)
		<-rl.Done()
		require.ErrorIs(t, rl.Err(), rlock.ErrLockLost)

		// A clean Unlock ends it without error.
		require.NoError(t, rl.Lock(ctx))
		require.NoError(t, rl.Unlock(ctx))
		<-rl.Done()
		require.NoError(t, rl.Err())
	})
}

// A MultiLock over a RedLock watches the RedLock holding its acquisition
// is part of, not the RedLock handle's latest (another owner's): owner x
// loses the RedLock, owner y takes it through the same handle, and x's
// MultiLock must report x's loss.
func TestMultiLockOverRedLockWatchesItsOwnHolding(t *testing.T) {
	each5(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		xctx, yctx := rlock.WithOwner(ctx, "x"), rlock.WithOwner(ctx, "y")
		name := redistest.Name(t)
		rl := newRedLock(t, name, c.clients(t))
		m, err := multilock.New([]rlock.Locker{rl})
		require.NoError(t, err)
		require.NoError(t, m.Lock(xctx))

		forceUnlock(t, c, name, 0, 1, 2, 3, 4)
		require.NoError(t, rl.TryLock(yctx)) // the handle's latest holding is y's
		require.ErrorIs(t, m.Unlock(xctx), rlock.ErrNotHeld)
		<-m.Done()
		require.ErrorIs(t, m.Err(), rlock.ErrLockLost)
		require.NoError(t, rl.Err()) // y's holding goes on
		require.NoError(t, rl.Unlock(yctx))
	})
}

// A RedLock answers IsHeld, its Until moves on with the nodes' watchdog
// renewals, and its Ctx is cancelled with a cause naming the nodes lost
// once fewer than a quorum hold.
func TestRedLockQueriesAndCtx(t *testing.T) {
	const lease = 300 * time.Millisecond
	each5(t, func(t *testing.T, c *cluster) {
		ctx := context.Background()
		name := redistest.Name(t)
		rl := newRedLock(t, name, c.clients(t, rlock.WithWatchdogLease(lease)), redlock.WithNodeNames("a", "b", "c", "d", "e"))
		held, err := rl.IsHeld(ctx)
		require.NoError(t, err)
		require.False(t, held)
		require.NoError(t, rl.Lock(ctx))
		held, err = rl.IsHeld(ctx)
		require.NoError(t, err)
		require.True(t, held)
		first := rl.Until()
		require.True(t, time.Now().Before(first))
		require.Eventually(t, func() bool { return rl.Until().After(first.Add(lease / 2)) }, 10*time.Second, 10*time.Millisecond)

		hctx := rl.Ctx()
		forceUnlock(t, c, name, 1, 2, 3)
		<-hctx.Done()
		cause := context.Cause(hctx)
		require.ErrorIs(t, cause, rlock.ErrLockLost)
		var e *multilock.Error
		require.ErrorAs(t, cause, &e)
		require.Len(t, e.Failures, 3)
		for _, n := range []string{"b", "c", "d"} {
			require.ErrorContains(t, cause, n+": ")
		}
		held, err = rl.IsHeld(ctx)
		require.NoError(t, err)
		require.False(t, held)
		require.ErrorIs(t, rl.Unlock(ctx), rlock.ErrLockLost)
	})
}

// Issue 15: a RedLock's lock+unlock started a goroutine per node for the
// attempt and one per node but one for the release, and each grew its
// stack to a script call's depth: about a tenth of the client's CPU per
// lock+unlock, on one CPU as much as the wall time. The nodes' attempts
// and releases run on their clients' parked background workers instead.
func TestLockUnlockStartsNoGoroutinePerNode(t *testing.T) {
	each5(t, func(t *testing.T, c *cluster) {
		rl := newRedLock(t, redistest.Name(t), c.clients(t))
		cycle := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, rl.Lock(ctx))
			require.NoError(t, rl.Unlock(ctx))
		}
		for range 3 { // connections, scripts, workers
			cycle()
		}
		const cycles = 20
		before := goroutinesCreated()
		for range cycles {
			cycle()
		}
		require.Less(t, goroutinesCreated()-before, uint64(cycles), "goroutines started by %d lock+unlock cycles", cycles)
	})
}

// goroutinesCreated returns how many goroutines the process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Regression (quorum form of issue 12, defect 3): the owner holds the
// lock on node 0 in watchdog mode through a plain reentrant lock, and
// takes the RedLock of the same name. SetLease set the lease on every node
// that granted, node 0's re-entry included: its renewal stopped, its TTL
// became the RedLock's 300 ms and, after the RedLock's Unlock, the outer
// hold expired unrenewed. Until stays within node 0's protection too.
func TestRedLockSetLeaseDoesNotShortenAHoldItDidNotCreate(t *testing.T) {
	const lease = 300 * time.Millisecond
	each5(t, func(t *testing.T, c *cluster) {
		ctx := rlock.WithOwner(context.Background(), "x")
		name := redistest.Name(t)
		cs := c.clients(t, rlock.WithWatchdogLease(2*time.Second))
		outer, err := reentrant.New(cs[0], name)
		require.NoError(t, err)
		require.NoError(t, outer.Lock(ctx)) // watchdog mode

		rl := newRedLock(t, name, cs)
		require.NoError(t, rl.Lock(ctx))
		require.NoError(t, rl.SetLease(ctx, lease))
		for i, rdb := range c.rdbs {
			ttl, err := rdb.PTTL(ctx, name).Result()
			require.NoError(t, err)
			if i == 0 {
				require.Greater(t, ttl, time.Second, "node 0's outer hold lost its watchdog lease")
			} else {
				require.LessOrEqual(t, ttl, lease, "node %d, which the RedLock took, has its lease", i)
			}
		}
		require.NoError(t, rl.SetLease(ctx, time.Minute))
		require.False(t, rl.Until().After(time.Now().Add(time.Minute)))
		require.NoError(t, rl.Unlock(ctx))

		require.Never(t, func() bool {
			n, err := c.rdbs[0].Exists(ctx, name).Result()
			return err == nil && n == 0
		}, 5*lease, lease/10, "node 0's outer hold expired unrenewed")
		require.NoError(t, outer.Err())
		require.NoError(t, outer.Unlock(ctx))
	})
}
