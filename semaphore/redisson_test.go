package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/waiters"
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

// Go and Redisson share one expirable semaphore: a Redisson permit is
// released by ID from Go, a Go permit by ID from Redisson, a Redisson
// permit whose lease passed is reclaimed by Go's scripts, and a Go waiter
// is woken by a Redisson release.
func TestRedissonSharesExpirable(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := redistest.Name(t)
		r := redistest.NewRedisson(b.Universal(t), b.Name == redistest.ClusterName)
		js := r.ExpirableSemaphore(name)
		c := clientOn(t, b.Universal(t))
		ge := newExp(t, c, name, semaphore.WithPoll(time.Hour))
		_, err := ge.TrySetPermits(ctx, 2)
		require.NoError(t, err)

		id, ok, err := js.TryAcquire(ctx, time.Hour)
		require.NoError(t, err)
		require.True(t, ok)
		p, err := ge.TryAcquire(ctx, semaphore.WithLease(time.Hour))
		require.NoError(t, err)
		require.NotNil(t, p)
		_, ok, err = js.TryAcquire(ctx, time.Hour)
		require.NoError(t, err)
		require.False(t, ok)

		require.NoError(t, ge.Release(ctx, id), "Go releases Redisson's permit")
		released, err := js.Release(ctx, p.ID())
		require.NoError(t, err)
		require.True(t, released, "Redisson releases Go's permit")

		// A Redisson permit with a short lease is reclaimed by Go.
		_, ok, err = js.TryAcquire(ctx, 30*time.Millisecond)
		require.NoError(t, err)
		require.True(t, ok)
		_, ok, err = js.TryAcquire(ctx, time.Hour)
		require.NoError(t, err)
		require.True(t, ok)
		q, err := ge.Acquire(ctx, semaphore.WithLease(time.Hour)) // wakes at the nearest expiry
		require.NoError(t, err)
		require.NoError(t, q.Release(ctx))

		// A Go waiter woken by a Redisson release.
		id2, ok, err := js.TryAcquire(ctx, time.Hour)
		require.NoError(t, err)
		require.True(t, ok)
		got := make(chan error, 1)
		go func() {
			q, err := ge.Acquire(ctx)
			if err == nil {
				err = q.Release(ctx)
			}
			got <- err
		}()
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 }, 10*time.Second, time.Millisecond)
		_, err = js.Release(ctx, id2)
		require.NoError(t, err)
		require.NoError(t, <-got)
	})
}

// A Redisson waiter of an expirable semaphore is woken by a Go release
// that designates an rlock client first: its listener reads the
// designation's int value, 0, and ignores it, then wakes on the count.
// Classic and sharded pub/sub.
func TestRedissonExpirableWaiterWokenByDesignatingRelease(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := redistest.Name(t)
		r := redistest.NewRedisson(b.Universal(t), b.Name == redistest.ClusterName)
		js := r.ExpirableSemaphore(name)
		ge := newExp(t, clientOn(t, b.Universal(t)), name, semaphore.WithPoll(time.Hour))
		_, err := ge.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		p, err := ge.TryAcquire(ctx, semaphore.WithLease(time.Hour))
		require.NoError(t, err)
		require.NotNil(t, p)

		// An rlock client registered as waiting, so that the release
		// designates it before its count.
		registry := "{" + name + "}:rlock_waiters"
		res, err := lua.SemAcquire.Run(ctx, b.Universal(t), []string{name, "{" + name + "}:rlock_ops", registry},
			1, "registered-client-attempt", 60000, waiters.CountingDesignation("12345"), 60000, "0").Int64Slice()
		require.NoError(t, err)
		require.Equal(t, int64(0), res[0], "refused, and registered")

		waits := r.Waits()
		got := make(chan error, 1)
		go func() {
			_, err := js.Acquire(ctx, time.Hour)
			got <- err
		}()
		require.Eventually(t, func() bool { return r.Waits() > waits }, 10*time.Second, time.Millisecond)
		var sub *redis.PubSub
		if b.Name == redistest.ClusterName {
			sub = b.Universal(t).SSubscribe(ctx, "redisson_sc:{"+name+"}")
		} else {
			sub = b.Universal(t).Subscribe(ctx, "redisson_sc:{"+name+"}")
		}
		defer sub.Close()
		_, err = sub.Receive(ctx)
		require.NoError(t, err)
		require.NoError(t, p.Release(ctx))
		require.NoError(t, <-got, "Redisson's waiter woke on the count after the designation")
		var heard []string
		for len(heard) < 2 {
			m, err := sub.ReceiveMessage(ctx)
			require.NoError(t, err)
			heard = append(heard, m.Payload)
		}
		require.Equal(t, []string{waiters.CountingDesignation("12345"), "1"}, heard, "a designation, then the count")
	})
}
