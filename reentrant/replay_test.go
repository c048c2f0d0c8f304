package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// TestLostReplyChangesStateOnce drops the reply of each kind of lock script
// after the server ran it. go-redis (MaxRetries 3 by default) then sends the
// same command again on a new connection, so every script runs twice; the
// hold count must still move by exactly one per call. Also with the scripts
// sent through go-redis's auto-pipeliner; and with a ctx that can end,
// with which an attempt runs on a background worker, or waits for the
// auto-pipeliner's reply on the caller's goroutine.
func TestLostReplyChangesStateOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, v := range clientVariants {
			t.Run(v.name, func(t *testing.T) { testLostReplyChangesStateOnce(t, b, context.Background(), v.opts...) })
			t.Run(v.name+"/cancellable-ctx", func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				testLostReplyChangesStateOnce(t, b, ctx, v.opts...)
			})
		}
	})
}

func testLostReplyChangesStateOnce(t *testing.T, b *redistest.Backend, ctx context.Context, opts ...rlock.ClientOption) {
	name := redistest.Name(t)
	direct := b.NewClient(t)
	proxy, viaProxy := b.NewProxiedClient(t)
	const lease = 400 * time.Millisecond
	c := clientOn(t, viaProxy, append(opts, shortWatchdog(lease))...)
	l := newLock(t, c, name)
	field, err := l.Owner(ctx)
	require.NoError(t, err)

	// Load every script first, so each drop hits an EVALSHA that runs.
	warm := newLock(t, c, name+":warm")
	require.NoError(t, warm.Lock(ctx))
	require.NoError(t, warm.Unlock(ctx))
	_, err = warm.ForceUnlock(ctx)
	require.NoError(t, err)

	step := func(what string, op func() error, wantCount int) {
		t.Helper()
		dropped := proxy.Dropped()
		proxy.DropNextReply("evalsha")
		require.NoError(t, op(), what)
		require.Equal(t, dropped+1, proxy.Dropped(), "%s: the reply was dropped", what)
		require.Equal(t, wantCount, holdCount(t, direct, name, field), what)
	}
	step("acquire", func() error { return l.Lock(ctx) }, 1)
	step("re-entry", func() error {
		rctx, cancel := reentryCtx(ctx, l.Ctx())
		defer cancel()
		return l.TryLock(rctx)
	}, 2)
	step("release", func() error { return l.Unlock(ctx) }, 1)

	// Renewal: drop the reply of the next watchdog round.
	dropped := proxy.Dropped()
	proxy.DropNextReply("evalsha")
	require.Eventually(t, func() bool { return proxy.Dropped() == dropped+1 }, 5*time.Second, time.Millisecond)
	renewed := c.WatchdogStats().Renewed
	require.Eventually(t, func() bool { return c.WatchdogStats().Renewed > renewed+1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, 1, holdCount(t, direct, name, field), "renewal")
	require.NoError(t, l.Err(), "a lost renewal reply is not a lost lock")

	step("last release", func() error { return l.Unlock(ctx) }, 0)
	require.NoError(t, l.Err())
	n, err := direct.Exists(ctx, name).Result()
	require.NoError(t, err)
	require.Zero(t, n)

	// Force unlock replayed: still reports that it deleted the lock.
	require.NoError(t, l.Lock(ctx))
	dropped = proxy.Dropped()
	proxy.DropNextReply("evalsha")
	ok, err := newLock(t, c, name).ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, dropped+1, proxy.Dropped())
}

// reentryCtx returns a ctx that re-enters the lock held with holding (its
// Ctx) and can end exactly when ctx can: one that cannot end
// (context.WithoutCancel) when ctx cannot, so that the re-entry runs on
// the same path as a call with ctx would.
func reentryCtx(ctx, holding context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return context.WithoutCancel(holding), func() {}
	}
	return core.Join(ctx, holding)
}

// TestLostReplyWithoutRetries: with retries off, a lost reply is an error
// that TryLock's caller sees, and the hold it may have taken is given back
// (a call that returns an error holds no more than before); a blocking
// Lock settles what happened and tries again. Counts stay exact.
func TestLostReplyWithoutRetries(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		direct := b.NewClient(t)
		proxy, viaProxy := b.NewProxiedClient(t, func(o *redis.Options) { o.MaxRetries = -1 })
		l := newLock(t, clientOn(t, viaProxy), name, reentrant.WithLease(time.Minute))
		field, err := l.Owner(ctx)
		require.NoError(t, err)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Unlock(ctx))

		proxy.DropNextReply("evalsha")
		require.Error(t, l.TryLock(ctx), "the acquire ran but its reply was lost")
		require.EventuallyWithT(t, func(c *assert.CollectT) { require.Zero(c, holdCount(c, direct, name, field)) },
			5*time.Second, time.Millisecond, "the unreported grant is given back")
		proxy.DropNextReply("evalsha")
		require.NoError(t, l.Lock(ctx), "a blocking Lock outlives a lost reply")
		require.Equal(t, 2, proxy.Dropped())
		require.Equal(t, 1, holdCount(t, direct, name, field))
		require.NoError(t, l.Unlock(ctx))
		require.Zero(t, holdCount(t, direct, name, field))
		require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld)
	})
}
