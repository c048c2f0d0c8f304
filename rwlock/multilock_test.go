package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
)

// TestMultiLockReadAndWrite: a read lock of one RWLock and the write lock
// of another are members of one MultiLock; listing one RWLock's write lock
// before its read lock is a downgrade, the other order ErrUpgrade with
// nothing left held.
func TestMultiLockReadAndWrite(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := newClient(t, b)
		base := redistest.Name(t)
		config, cache := newRW(t, c, base+":config"), newRW(t, c, base+":cache")
		m, err := multilock.New([]rlock.Locker{config.ReadLock(), cache.WriteLock()})
		require.NoError(t, err)
		require.NoError(t, m.Lock(ctx))
		ok, err := m.IsHeld(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		other := newRW(t, c, base+":config")
		require.NoError(t, other.ReadLock().TryLock(ctx), "config is only read-locked")
		require.NoError(t, other.ReadLock().Unlock(ctx))
		require.ErrorIs(t, newRW(t, c, base+":cache").ReadLock().TryLock(ctx), rlock.ErrNotObtained, "cache is write-locked")
		require.NoError(t, m.Unlock(ctx))
		require.False(t, held(t, config.ReadLock()))
		require.False(t, held(t, cache.WriteLock()))

		down, err := multilock.New([]rlock.Locker{config.WriteLock(), config.ReadLock()})
		require.NoError(t, err)
		require.NoError(t, down.Lock(ctx), "write then read: a downgrade")
		require.NoError(t, down.Unlock(ctx))

		up, err := multilock.New([]rlock.Locker{config.ReadLock(), config.WriteLock()})
		require.NoError(t, err)
		require.ErrorIs(t, up.Lock(ctx), rlock.ErrUpgrade)
		require.False(t, held(t, config.ReadLock()), "the read member was given back")
		locked, err := config.IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked)
	})
}
