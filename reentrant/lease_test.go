package reentrant_test

import (
	"context"
	"github.com/rlock-go/rlock/internal/base"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// TestSetLeaseSwitchesBetweenWatchdogAndExplicit: SetLease moves a held
// lock from watchdog renewal to a fixed lease and back (what MultiLock
// does with its members once all are taken).
func TestSetLeaseSwitchesBetweenWatchdogAndExplicit(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b, shortWatchdog(300*time.Millisecond))
		l := newLock(t, c, redistest.Name(t))
		require.ErrorIs(t, l.SetLease(ctx, time.Second), rlock.ErrNotHeld)

		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Lock(l.Ctx())) // re-entry
		require.Equal(t, 1, c.WatchdogStats().Registered)
		require.NoError(t, l.SetLease(ctx, 5*time.Second))
		require.Equal(t, 0, c.WatchdogStats().Registered, "an explicit lease is not renewed")
		ttl, err := l.TTL(ctx)
		require.NoError(t, err)
		require.Greater(t, ttl, 4*time.Second)

		// A release that leaves holds restores the new lease.
		require.NoError(t, l.Unlock(ctx))
		ttl, err = l.TTL(ctx)
		require.NoError(t, err)
		require.Greater(t, ttl, 4*time.Second)

		require.NoError(t, l.SetLease(ctx, rlock.WatchdogMode))
		require.Equal(t, 1, c.WatchdogStats().Registered)
		ttl, err = l.TTL(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, ttl, 300*time.Millisecond)
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, l.Err())
		require.Equal(t, 0, c.WatchdogStats().Registered)

		// A lock lost behind the client's back: SetLease reports it.
		require.NoError(t, l.Lock(ctx))
		_, err = newLock(t, c, l.Name()).ForceUnlock(ctx)
		require.NoError(t, err)
		require.ErrorIs(t, l.SetLease(ctx, time.Second), rlock.ErrNotHeld)
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
	})
}

func TestLeasePerAcquisition(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b, shortWatchdog(300*time.Millisecond))
		l := newLock(t, c, redistest.Name(t), reentrant.WithLease(time.Minute))

		require.NoError(t, l.LockLease(ctx, rlock.WatchdogMode))
		require.Equal(t, 1, c.WatchdogStats().Registered, "watchdog mode for this acquisition")
		require.NoError(t, l.Unlock(ctx))

		require.NoError(t, l.TryLockLease(ctx, 5*time.Second))
		ttl, err := l.TTL(ctx)
		require.NoError(t, err)
		require.Greater(t, ttl, 4*time.Second)
		require.LessOrEqual(t, ttl, 5*time.Second)
		require.Equal(t, 0, c.WatchdogStats().Registered)
		require.NoError(t, l.Unlock(ctx))

		require.NoError(t, l.Lock(ctx)) // the handle's own lease again
		ttl, err = l.TTL(ctx)
		require.NoError(t, err)
		require.Greater(t, ttl, 50*time.Second)
		require.NoError(t, l.Unlock(ctx))
	})
}

// TestFencingTokens: every grant from free to held draws a larger token,
// on any client; re-entry keeps it.
func TestFencingTokens(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		a := newLock(t, newClient(t, b), name, reentrant.WithFencing())
		z := newLock(t, newClient(t, b), name, reentrant.WithFencing())
		require.Zero(t, a.Token(), "no token before the first grant")
		var last int64
		for i := range 6 {
			l := a
			if i%2 == 1 {
				l = z
			}
			require.NoError(t, l.Lock(ctx))
			tok := l.Token()
			require.Greater(t, tok, last)
			last = tok
			require.NoError(t, l.Lock(l.Ctx())) // re-entry
			require.Equal(t, tok, l.Token())
			require.NoError(t, l.Unlock(ctx))
			require.NoError(t, l.Unlock(ctx))
			require.Equal(t, tok, l.Token(), "the last period's token stays readable")
		}

		// Without fencing: no token, and no counter key written.
		plain := newLock(t, newClient(t, b), redistest.Name(t)+"-plain")
		require.NoError(t, plain.Lock(ctx))
		require.Zero(t, plain.Token())
		require.NoError(t, plain.Unlock(ctx))
		n, err := b.Universal(t).Exists(ctx, base.DerivedKey(base.TokenPrefix, plain.Name())).Result()
		require.NoError(t, err)
		require.Zero(t, n)
	})
}
