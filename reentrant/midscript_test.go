package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// Regression tests for scripts that Redis stops with an error reply after
// writes they made (Redis keeps them: a script is not rolled back). The
// client took every such reply but a cluster's non-local-key error for a
// script that had not run. Both backends keep the partial writes
// (miniredis formats the reply differently; see ranInPart).

// A fenced TryLock whose token counter holds a hash: lock.lua granted the
// lock (HSET, PEXPIRE) and then failed at INCR with WRONGTYPE. The caller
// was told it did not get the lock while the server held it for its owner
// for a whole lease: nobody else could take it, and nothing gave it back.
// A waiting Lock fails the same way, at once (the error is final, not
// one to try again), and gives the grant back too.
func TestFencedTryLockFailingAfterGrantLeftTheLockHeld(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, call := range []string{"TryLock", "Lock"} {
			t.Run(call, func(t *testing.T) { testFencedAcquireFailingAfterGrant(t, b, call) })
		}
	})
}

func testFencedAcquireFailingAfterGrant(t *testing.T, b *redistest.Backend, call string) {
	ctx := context.Background()
	name := redistest.Name(t)
	direct := b.NewClient(t)
	require.NoError(t, direct.HSet(ctx, base.DerivedKey(base.TokenPrefix, name), "x", "1").Err())

	l := newLock(t, newClient(t, b), name, reentrant.WithFencing())
	var err error
	if call == "TryLock" {
		err = l.TryLock(ctx)
	} else {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err = l.Lock(wctx)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "the final error was taken for one to try again")
	}
	require.Error(t, err)
	require.ErrorContains(t, err, "WRONGTYPE", "the server's reply is wrapped")
	require.Zero(t, direct.Exists(ctx, name).Val(), "the grant the caller was not told of is still in Redis: %v", direct.HGetAll(ctx, name).Val())
	other := newLock(t, newClient(t, b), name)
	require.NoError(t, other.TryLock(ctx), "another client is kept out by a hold nobody reported")
	require.NoError(t, other.Unlock(ctx))
}

// An Unlock whose lock has a key of another type under its registry of
// waiting clients: unlock.lua deleted the lock (the release) and then
// failed at the registry with WRONGTYPE. The client took the reply for a
// release that had not run: the handle went on saying it held (Err nil,
// Until ahead, renewal running) while another client took the lock.
func TestUnlockFailingAfterReleaseKeptTheHandleHolding(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		direct := b.NewClient(t)
		l := newLock(t, newClient(t, b), name)
		require.NoError(t, l.TryLock(ctx))
		require.NoError(t, direct.Set(ctx, base.Waiters(name), "x", 0).Err())

		err := l.Unlock(ctx)
		require.Error(t, err)
		require.ErrorContains(t, err, "WRONGTYPE", "the server's reply is wrapped")
		require.Zero(t, direct.Exists(ctx, name).Val(), "the release ran before the failure")
		select {
		case <-l.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("the handle still says it holds (Err %v, Until in %v) after a release that ran", l.Err(), time.Until(l.Until()))
		}
		require.Error(t, l.Err())
		other := newLock(t, newClient(t, b), name)
		require.NoError(t, other.TryLock(ctx))
		require.NoError(t, direct.Del(ctx, base.Waiters(name)).Err()) // or every release fails the same way
		require.NoError(t, other.Unlock(ctx))
	})
}
