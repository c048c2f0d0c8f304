package redlock_test

import (
	"context"
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
	"github.com/rlock-go/rlock/watchdog"
)

// Regression (issue 12): a nil context made every entry point panic.
func TestNilContextIsAnError(t *testing.T) {
	b := redistest.Mini(t)
	c, err := reentrant.NewClient(b.NewClient(t))
	require.NoError(t, err)
	defer c.Close()
	rl := newRedLock(t, redistest.Name(t), []*reentrant.Client{c})
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
		cs := c.clients(t, reentrant.WithWatchdog(watchdog.WithLease(2*time.Second)))
		rl := newRedLock(t, name, cs)
		require.NoError(t, rl.Lock(ctx)) // watchdog mode

		other := newRedLock(t, name+":2", cs)
		m, err := multilock.New([]rlock.Locker{rl, other}, multilock.WithLease(lease))
		require.NoError(t, err)
		require.NoError(t, m.Lock(ctx))
		require.True(t, rl.Until().IsZero(), "the re-entered RedLock got the MultiLock's lease")
		require.False(t, other.Until().IsZero(), "the RedLock the MultiLock took has its lease")
		for i, rdb := range c.rdbs {
			ttl, err := rdb.PTTL(ctx, name).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, time.Second, "node %d lost its watchdog lease", i)
		}
		require.NoError(t, m.Unlock(ctx))
		require.Never(t, func() bool {
			for _, ok := range c.exists(t, name) {
				if !ok {
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
		var cs []*reentrant.Client
		var rdbs []*redis.Client
		for range 3 {
			start := redistest.Mini
			if b.IsReal() {
				start = redistest.Real
			}
			p, rdb := start(t).NewProxiedClient(t, fast)
			p.SetLatency(5 * time.Millisecond) // the two attempts overlap on every node
			rc, err := reentrant.NewClient(rdb)
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
					if err := rl.TryLockLease(ctx, lease); err != nil {
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
			require.NoError(t, rl.Unlock(ctx))
			require.NoError(t, rl.Unlock(ctx))
		}
	})
}

// waitPending waits until r's background releases are done.
func waitPending(t *testing.T, r *redlock.RedLock) int {
	t.Helper()
	require.Eventually(t, func() bool { return redlock.PendingReleases(r) == 0 }, 10*time.Second, time.Millisecond)
	return redlock.PendingReleases(r)
}
