package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/semaphore"
)

// Go and Redisson (the test double) share one semaphore by name: permits
// taken on one side are returned on the other, and waiters are woken both
// ways; on the cluster the double uses sharded pub/sub (SPUBLISH,
// SSUBSCRIBE), as Redisson does on Redis 7+.
func TestRedissonSharesSemaphore(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := redistest.Name(t)
		r := redistest.NewRedisson(b.Universal(t), b.Name == redistest.ClusterName)
		js := r.Semaphore(name)
		c := clientOn(t, b.Universal(t))
		gs := newSem(t, c, name, semaphore.WithPoll(time.Hour)) // woken by messages only

		ok, err := js.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		require.EqualValues(t, 1, available(t, gs))
		ok, err = gs.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = js.TryAcquire(ctx, 1)
		require.NoError(t, err)
		require.False(t, ok)

		// A Redisson waiter woken by a Go release.
		waits := r.Waits()
		done := make(chan error, 1)
		go func() { done <- js.Acquire(ctx, 1) }()
		require.Eventually(t, func() bool { return r.Waits() > waits }, 10*time.Second, time.Millisecond)
		require.NoError(t, gs.Release(ctx, 1))
		require.NoError(t, <-done)

		// A Go waiter woken by a Redisson release.
		go func() { done <- gs.Acquire(ctx, 1) }()
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 }, 10*time.Second, time.Millisecond)
		require.NoError(t, js.Release(ctx, 1))
		require.NoError(t, <-done)
		n, err := js.AvailablePermits(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
	})
}
