package rlock_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/reentrant"
)

func TestDoRunsHoldingAndReleases(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := sharedClients(t, b)[0]
		l, err := reentrant.New(c, redistest.Name(t))
		require.NoError(t, err)
		boom := errors.New("boom")
		err = rlock.Do(ctx, l, func(ctx context.Context) error {
			held, err := l.IsHeld(ctx)
			require.NoError(t, err)
			require.True(t, held)
			// Re-entry through fn's ctx, at depth.
			return rlock.Do(ctx, l, func(ctx context.Context) error {
				n, err := l.HoldCount(ctx)
				require.NoError(t, err)
				require.Equal(t, 2, n)
				return boom
			})
		})
		require.ErrorIs(t, err, boom)
		held, err := l.IsHeld(ctx)
		require.NoError(t, err)
		require.False(t, held, "Do released the lock")
		require.ErrorIs(t, rlock.Do(ctx, l, nil), rlock.ErrInvalidArgument)
	})
}

// TestDoCtxEndsOnLoss: fn's ctx ends when the lock is lost, and Do
// reports the loss.
func TestDoCtxEndsOnLoss(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := sharedClients(t, b)[0]
		l, err := reentrant.New(c, redistest.Name(t), reentrant.WithLease(200*time.Millisecond))
		require.NoError(t, err)
		err = rlock.Do(context.Background(), l, func(ctx context.Context) error {
			<-ctx.Done()
			require.ErrorIs(t, context.Cause(ctx), rlock.ErrLockLost)
			return ctx.Err()
		})
		require.ErrorIs(t, err, rlock.ErrLockLost)
	})
}

// TestDoOverNestedMultiLock: fn's ctx re-enters the MultiLock's members.
func TestDoOverNestedMultiLock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := sharedClients(t, b)[0]
		name := redistest.Name(t)
		a, err := reentrant.New(c, name+"a")
		require.NoError(t, err)
		bb, err := reentrant.New(c, name+"b")
		require.NoError(t, err)
		m, err := multilock.New([]rlock.Locker{a, bb})
		require.NoError(t, err)
		require.NoError(t, rlock.Do(ctx, m, func(ctx context.Context) error {
			require.NoError(t, a.TryLock(ctx), "a member re-enters through the MultiLock's ctx")
			require.NoError(t, a.Unlock(ctx))
			return m.TryLock(ctx) // and the MultiLock itself
		}))
		require.NoError(t, m.Unlock(ctx))
		held, err := a.IsHeld(ctx)
		require.NoError(t, err)
		require.False(t, held)
	})
}

func TestNewLockerExcludesAndPanicsOnMisuse(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := sharedClients(t, b)[0]
		l, err := reentrant.New(c, redistest.Name(t))
		require.NoError(t, err)
		mu := rlock.NewLocker(l)
		var inside, most atomic.Int32
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mu.Lock()
				now := inside.Add(1)
				if _, err := l.IsHeld(context.Background()); err != nil { // work inside
					t.Error(err)
				}
				most.Store(max(most.Load(), now, inside.Load()))
				inside.Add(-1)
				mu.Unlock()
			}()
		}
		wg.Wait()
		require.EqualValues(t, 1, most.Load())
		require.PanicsWithError(t, "rlock: lock not held by this owner: \""+l.Name()+"\"", mu.Unlock)
	})
}

// TestLockOnDeadRedisReturns: Lock(context.Background()) on a Redis that
// does not answer retried for ever (only go-redis's dial log showed).
func TestLockOnDeadRedisReturns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := rlock.NewClient(rdb, rlock.WithUnreachableTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l, err := reentrant.New(c, "dead")
	require.NoError(t, err)
	err = l.Lock(context.Background())
	require.ErrorIs(t, err, rlock.ErrUnreachable)
	var op *net.OpError
	require.ErrorAs(t, err, &op, "the Redis error is returned")
	require.Error(t, l.TryLock(context.Background()))
	_, err = rlock.NewClient(rdb, rlock.WithUnreachableTimeout(0))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
}

// TestLockRidesThroughShortOutage: a Lock waiting while Redis is cut off
// for a while shorter than the unreachable timeout goes on and gets the
// lock.
func TestLockRidesThroughShortOutage(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		holder := sharedClients(t, b)[0]
		name := redistest.Name(t)
		h, err := reentrant.New(holder, name)
		require.NoError(t, err)
		require.NoError(t, h.Lock(ctx))
		p, rdb := b.NewProxiedClient(t, func(o *redis.Options) {
			o.MaxRetries, o.DialTimeout, o.ReadTimeout = -1, 200*time.Millisecond, 200*time.Millisecond
		})
		c, err := rlock.NewClient(rdb, rlock.WithUnreachableTimeout(10*time.Second))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		l, err := reentrant.New(c, name)
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() { got <- l.Lock(ctx) }()
		p.Blackhole(true)
		p.ResetAll()
		require.NoError(t, h.Unlock(ctx))
		timer := time.NewTimer(2 * time.Second) // the outage
		<-timer.C
		p.Blackhole(false)
		require.NoError(t, <-got)
		require.NoError(t, l.Unlock(ctx))
	})
}
