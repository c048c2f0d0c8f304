package semaphore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
)

// A Release, AddPermits or TrySetPermits on a semaphore whose waiters'
// registry ({name}:rlock_waiters) held a string: the script counted the
// permits in (INCRBY or SET, and the operation's record) and then failed
// at the registry with WRONGTYPE, which Redis (and miniredis) keep. The
// caller was told of an error while the permits were in: released twice
// by a caller that tries again, for ever (a semaphore has no lease). The
// script now refuses before its first write: rlock.ErrWrongType, and
// nothing changed.
func TestReleaseFailingAfterIncrementCountedThePermits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		direct := b.NewClient(t)
		s := newSem(t, clientOn(t, b.Universal(t)), name)
		require.NoError(t, direct.Set(ctx, base.SemaphoreWaiters(name), "x", 0).Err())

		set, err := s.TrySetPermits(ctx, 2)
		require.ErrorIs(t, err, rlock.ErrWrongType)
		require.False(t, set)
		require.Zero(t, direct.Exists(ctx, name).Val(), "TrySetPermits set the count it reported failing")

		require.NoError(t, direct.Set(ctx, name, "1", 0).Err())
		require.ErrorIs(t, s.Release(ctx, 1), rlock.ErrWrongType)
		require.ErrorIs(t, s.AddPermits(ctx, 3), rlock.ErrWrongType)
		require.Equal(t, "1", direct.Get(ctx, name).Val(), "a failed Release or AddPermits counted its permits in")
	})
}
