package fair_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
)

// A fenced TryLock whose token counter holds a hash: fair_lock.lua granted
// the lock (HSET, PEXPIRE) and then failed at INCR with WRONGTYPE (Redis
// keeps a script's writes before an error; so does miniredis). The client
// took the reply for a script that had not run: the caller was told it
// did not get the lock while the server held it for its owner for a whole
// lease, and nothing gave it back.
func TestFencedFairTryLockFailingAfterGrantLeftTheLockHeld(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		direct := b.NewClient(t)
		require.NoError(t, direct.HSet(ctx, base.DerivedKey(base.TokenPrefix, name), "x", "1").Err())

		l := newLock(t, newClient(t, b), name, fair.WithFencing())
		err := l.TryLock(ctx)
		require.Error(t, err)
		require.ErrorContains(t, err, "WRONGTYPE", "the server's reply is wrapped")
		require.Zero(t, direct.Exists(ctx, name).Val(), "the grant the caller was not told of is still in Redis: %v", direct.HGetAll(ctx, name).Val())
		other := newLock(t, newClient(t, b), name)
		require.NoError(t, other.TryLock(ctx), "another client is kept out by a hold nobody reported")
		require.NoError(t, other.Unlock(ctx))
	})
}

// A last Unlock with someone in line whose queue timeout set held a
// string: fair_unlock.lua deleted the lock (the release) and then failed
// at the set with WRONGTYPE while pruning the line. The handle went on
// saying it held (Err nil, Until ahead) while another client took the lock.
func TestFairUnlockFailingAfterReleaseKeptTheHandleHolding(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		direct := b.NewClient(t)
		l := newLock(t, newClient(t, b), name)
		require.NoError(t, l.TryLock(ctx))
		timeouts := base.DerivedKey(base.TimeoutPrefix, name)
		require.NoError(t, direct.RPush(ctx, base.DerivedKey(base.QueuePrefix, name), "ghost").Err())
		require.NoError(t, direct.Set(ctx, timeouts, "x", 0).Err())

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
		require.NoError(t, direct.Del(ctx, timeouts, base.DerivedKey(base.QueuePrefix, name)).Err())
		other := newLock(t, newClient(t, b), name)
		require.NoError(t, other.TryLock(ctx))
		require.NoError(t, other.Unlock(ctx))
	})
}
