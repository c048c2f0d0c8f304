package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
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
