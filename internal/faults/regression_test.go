package faults

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// TestReentryAfterVanishedLockReportsLoss: an owner holds a lock
// once; the lock hash disappears before the watchdog notices (expiry while
// Redis was frozen, a restart without persistence, an operator's DEL); the
// owner re-enters. The acquire script finds no key and takes the lock anew
// with a hold count of 1, and the client accepts that reply as a re-entry:
// Lock returns nil, the holding period goes on (Done stays open), and the
// owner now has one hold where it made two acquisitions. Its inner Unlock
// then releases the lock completely while it still believes it holds the
// outer hold, and another owner can take the lock inside the outer
// critical section. Now: the re-entry reports the loss (an error
// wrapping rlock.ErrLockLost, or at least the first holding period ending
// as lost) instead of passing a fresh acquisition off as a re-entry. The
// client sends its hold count (ARGV[3]), so lock.lua can tell: no key but a
// count above zero means the holds were lost.
func TestReentryAfterVanishedLockReportsLoss(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		direct := b.NewClient(t)
		c, err := rlock.NewClient(b.NewClient(t)) // 30 s watchdog: it does not notice in time
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		l, err := reentrant.New(c, name)
		require.NoError(t, err)

		require.NoError(t, l.Lock(ctx))
		done := l.Done()
		require.NoError(t, direct.Del(ctx, name).Err()) // the lock vanishes

		err = l.Lock(l.Ctx()) // re-entry
		require.ErrorIs(t, err, rlock.ErrLockLost, "the loss is reported, not passed off as a re-entry")
		select {
		case <-done:
		default:
			t.Fatal("the holding period did not end")
		}
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
		require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld, "the outer hold is gone too")

		// Told of the loss, the owner starts afresh.
		require.NoError(t, l.Lock(ctx))
		n, err := l.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.NoError(t, l.Unlock(ctx))
	})
}
