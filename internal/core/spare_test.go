package core

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestForgottenOwnerStateIsTakenUpClean: once the client forgets a
// handle's own owner (its last release), the handle keeps the state and
// its next call takes it up again, as a new state would be: no count, no
// unknown outcome, no lease, no watchdog registration, no holding. An
// explicit owner's state is not kept.
func TestForgottenOwnerStateIsTakenUpClean(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c, err := NewClient(b.NewClient(t), Config{})
		require.NoError(t, err)
		defer c.Close()
		l, err := c.NewLock(redistest.Name(t), LockConfig{})
		require.NoError(t, err)

		require.NoError(t, l.TryLock(ctx))
		first := l.last.Load()
		require.NoError(t, l.Unlock(ctx))
		c.mu.Lock()
		records, spare := len(c.owners), l.spare
		c.mu.Unlock()
		require.Zero(t, records, "the owner is forgotten after its last release")
		require.NotNil(t, spare, "the handle keeps its own owner's state")

		// Leave traces a new state would not have.
		spare.unsureUntil = time.Now().Add(time.Hour)
		spare.lease = time.Minute

		require.NoError(t, l.TryLock(ctx))
		o := c.owner(l, l.name, l.ownKind)
		require.Same(t, spare, o, "the next call takes the kept state up")
		require.NoError(t, o.acquire(ctx))
		require.Equal(t, int64(1), o.count)
		require.False(t, o.unsure)
		require.True(t, o.unsureUntil.IsZero())
		require.Equal(t, c.wd.LeaseDuration(), o.lease)
		require.NotNil(t, o.watch)
		require.NotSame(t, first, o.holding.Load(), "a new holding")
		require.NoError(t, l.Err())
		o.release()
		c.putOwner(o)
		require.NoError(t, l.Unlock(ctx))

		// An explicit owner's state is forgotten for good.
		octx := base.WithOwner(ctx, "explicit")
		require.NoError(t, l.TryLock(octx))
		require.NoError(t, l.Unlock(octx))
		c.mu.Lock()
		require.Same(t, o, l.spare, "the handle keeps only its own owner's state")
		c.mu.Unlock()
	})
}
