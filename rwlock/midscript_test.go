package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/rwlock"
)

// Regression tests for scripts that Redis stops with an error reply after
// writes they made (a script is not rolled back; miniredis keeps them too).
// The client took every such reply but a cluster's non-local-key error for
// a script that had not run.

// A fenced write TryLock whose token counter holds a hash:
// rw_write_lock.lua granted the lock and then failed at INCR with
// WRONGTYPE. The caller was told it did not get the lock while the server
// held it for the owner for a whole lease.
func TestFencedWriteTryLockFailingAfterGrantLeftTheLockHeld(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		direct := b.NewClient(t)
		require.NoError(t, direct.HSet(ctx, base.DerivedKey(base.TokenPrefix, name), "x", "1").Err())

		l := newRW(t, newClient(t, b), name, rwlock.WithFencing())
		err := l.WriteLock().TryLock(ctx)
		require.Error(t, err)
		require.ErrorContains(t, err, "WRONGTYPE", "the server's reply is wrapped")
		require.Zero(t, direct.Exists(ctx, name).Val(), "the grant the caller was not told of is still in Redis: %v", direct.HGetAll(ctx, name).Val())
		other := newRW(t, newClient(t, b), name)
		require.NoError(t, other.ReadLock().TryLock(ctx), "another client is kept out by a hold nobody reported")
		require.NoError(t, other.ReadLock().Unlock(ctx))
	})
}

// A write Unlock whose lock has a key of another type under its readers'
// registry: rw_unlock_write.lua deleted the lock (the release) and then
// failed at the registry with WRONGTYPE. The handle went on saying it held
// (Err nil, Until ahead) while another client took the lock.
func TestWriteUnlockFailingAfterReleaseKeptTheHandleHolding(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		direct := b.NewClient(t)
		w := newRW(t, newClient(t, b), name).WriteLock()
		require.NoError(t, w.TryLock(ctx))
		require.NoError(t, direct.Set(ctx, base.RWReaders(name), "x", 0).Err())

		err := w.Unlock(ctx)
		require.Error(t, err)
		require.ErrorContains(t, err, "WRONGTYPE", "the server's reply is wrapped")
		require.Zero(t, direct.Exists(ctx, name).Val(), "the release ran before the failure")
		select {
		case <-w.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("the handle still says it holds (Err %v, Until in %v) after a release that ran", w.Err(), time.Until(w.Until()))
		}
		require.Error(t, w.Err())
		other := newRW(t, newClient(t, b), name)
		require.NoError(t, other.WriteLock().TryLock(ctx))
		require.NoError(t, direct.Del(ctx, base.RWReaders(name)).Err()) // or every release fails the same way
		require.NoError(t, other.WriteLock().Unlock(ctx))
	})
}
