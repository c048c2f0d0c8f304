package fair_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
)

// Defect 1, fair lock: a ForceUnlock that deleted nothing and whose reply
// was lost was re-sent after another owner took the lock, and deleted it.
func TestResentForceUnlockDoesNotDeleteNewHolder(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t)
		c := clientOn(t, viaProxy)
		redistest.LoadScripts(t, viaProxy)
		other := newLock(t, newClient(t, b), name)

		proxy.DropNextReplyThen("evalsha", func() {
			if err := other.TryLock(ctx); err != nil {
				t.Errorf("the other owner could not take the free lock: %v", err)
			}
		})
		deleted, err := newLock(t, c, name).ForceUnlock(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, proxy.Dropped())
		require.False(t, deleted, "the lock was free when the force unlock ran")
		held, err := other.IsHeld(ctx)
		require.NoError(t, err)
		require.True(t, held, "the re-sent force unlock deleted the new holder's lock")
		require.NoError(t, other.Unlock(ctx))
	})
}

// Defect 2, fair lock: after an Unlock whose reply was lost, the owner's
// next Unlock was taken for a re-send and changed nothing; the queue never
// moved again.
func TestQueueMovesAfterUnlockWithUnknownOutcome(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t, func(o *redis.Options) { o.MaxRetries = -1 })
		c := clientOn(t, viaProxy)
		redistest.LoadScripts(t, viaProxy)
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Lock(l.Ctx())) // re-entry

		waiter := newLock(t, newClient(t, b), name)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(wctx) }()
		require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, queue(c, l), 1) }, 5*time.Second, time.Millisecond)

		proxy.DropNextReply("evalsha")
		require.Error(t, l.Unlock(ctx), "the release ran but its reply was lost")
		require.NoError(t, l.Unlock(ctx), "the owner's last hold")
		require.NoError(t, <-got, "the queue did not move")
		require.NoError(t, waiter.Unlock(ctx))
	})
}

// A waiter that gives up leaves the queue in the background; when the
// leave's reply was lost (go-redis' retries off), the place stayed until
// its liveness deadline (the queue timeout, 30 s by default) and, at the
// head, held up every waiter behind it for that long. Leaving is
// idempotent, so a leave whose outcome is unknown is sent again.
func TestLeaveWithLostReplyIsSentAgain(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx))

		proxy, viaProxy := b.NewProxiedClient(t, func(o *redis.Options) { o.MaxRetries = -1 })
		c := clientOn(t, viaProxy)
		redistest.LoadScripts(t, viaProxy)
		waiter := newLock(t, c, name)
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(wctx) }()
		require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, queue(c, holder), 1) }, 5*time.Second, time.Millisecond)

		proxy.DropNextReply("evalsha") // the leave's
		cancel()
		require.ErrorIs(t, <-got, context.Canceled)
		require.Eventually(t, func() bool { return proxy.Dropped() == 1 }, 5*time.Second, time.Millisecond)
		require.EventuallyWithT(t, func(c *assert.CollectT) { require.Empty(c, queue(c, holder)) }, 5*time.Second, 5*time.Millisecond,
			"the waiter that gave up kept its place")
		require.NoError(t, holder.Unlock(ctx))
	})
}

// Latch keys piled up with short-lived handles (see the reentrant test of
// that name): every owner's last release left a latch key of its own for
// the replay window. A fair lock's releases share one latch key too.
func TestLatchKeysBoundedWithHandlePerOperation(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		rdb := b.NewClient(t)
		c := newClient(t, b)
		const releases = 100
		for range releases {
			l := newLock(t, c, name) // a new handle, so a new owner, per operation
			require.NoError(t, l.Lock(ctx))
			require.NoError(t, l.Unlock(ctx))
		}
		keys, err := rdb.Keys(ctx, "*"+name+"*").Result()
		require.NoError(t, err)
		require.LessOrEqual(t, len(keys), 1, "%d keys left by %d releases of one lock, among them %q", len(keys), releases, keys[0])
	})
}
