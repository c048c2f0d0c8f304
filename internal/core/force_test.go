package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// `rlock unlock --force` read the holder, asked, and deleted in a second
// step: a lock that changed hands in between was deleted from its new
// holder. ForceUnlockHeldBy checks and deletes in one script.
func TestForceUnlockHeldByChecksAndDeletesInOneStep(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		for _, kind := range []core.Kind{core.Reentrant, core.Fair} {
			c, err := rlock.NewClient(b.NewClient(t))
			require.NoError(t, err)
			defer c.Close()
			cc, ok := core.Of(c)
			require.True(t, ok)
			newLock := func() *core.Lock {
				l, err := cc.NewLock(name, core.LockConfig{Kind: kind, Lease: rlock.WatchdogMode})
				require.NoError(t, err)
				return l
			}
			seen, now := newLock(), newLock()
			require.NoError(t, seen.Lock(ctx))
			seenField, err := seen.Owner(ctx)
			require.NoError(t, err)
			require.NoError(t, seen.Unlock(ctx))
			require.NoError(t, now.Lock(ctx)) // changed hands after the operator looked

			n, err := newLock().ForceUnlockHeldBy(ctx, []string{seenField})
			require.NoError(t, err)
			require.EqualValues(t, -1, n)
			held, err := now.HoldCount(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, held, "the new holder's lock was deleted")

			nowField, err := now.Owner(ctx)
			require.NoError(t, err)
			n, err = newLock().ForceUnlockHeldBy(ctx, []string{nowField})
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			n, err = newLock().ForceUnlockHeldBy(ctx, []string{nowField})
			require.NoError(t, err)
			require.EqualValues(t, 0, n)
		}
	})
}
