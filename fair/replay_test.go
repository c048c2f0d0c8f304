package fair_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
)

// TestLostReplyChangesQueueOnce drops the reply of each fair-lock script
// after the server ran it; go-redis sends the command again, so each runs
// twice. Queue places and hold counts must still change once per call.
func TestLostReplyChangesQueueOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t)
		c := clientOn(t, viaProxy)
		holder := newLock(t, newClient(t, b), name)

		// Load every script through the proxy first, so each drop hits an
		// EVALSHA that runs.
		warm := newLock(t, c, name+":warm")
		require.NoError(t, warm.Lock(ctx))
		require.NoError(t, warm.Unlock(ctx))
		_, err := warm.ForceUnlock(ctx)
		require.NoError(t, err)
		_, err = warm.Queue(ctx)
		require.NoError(t, err)
		wholder := newLock(t, newClient(t, b), name+":warm")
		require.NoError(t, wholder.Lock(ctx))
		wctx, wcancel := context.WithCancel(ctx)
		wdone := lockAsync(wctx, warm)
		waitQueued(t, wholder, 1)
		wcancel()
		<-wdone
		waitQueued(t, wholder, 0) // the leave script ran

		drop := func(what string) func() {
			dropped := proxy.Dropped()
			proxy.DropNextReply("evalsha")
			return func() {
				t.Helper()
				require.Eventually(t, func() bool { return proxy.Dropped() == dropped+1 }, 10*time.Second, time.Millisecond, what)
			}
		}

		require.NoError(t, holder.Lock(ctx))
		a, z := newLock(t, c, name), newLock(t, c, name)

		dropped := drop("join")
		aDone := lockAsync(ctx, a)
		dropped()
		waitQueued(t, holder, 1)
		zctx, zcancel := context.WithCancel(ctx)
		zDone := lockAsync(zctx, z)
		waitQueued(t, holder, 2)
		require.Equal(t, []string{owner(t, a), owner(t, z)}, queue(t, holder), "one place each")

		dropped = drop("leave")
		zcancel()
		require.ErrorIs(t, <-zDone, context.Canceled)
		dropped()
		waitQueued(t, holder, 1)

		dropped = drop("grant")
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-aDone)
		dropped()
		n, err := a.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Empty(t, queue(t, holder))

		dropped = drop("re-entry")
		// A ctx from the holding that, like ctx, cannot end: the re-entry
		// runs on the path a call with ctx would.
		require.NoError(t, a.Lock(context.WithoutCancel(a.Ctx())))
		dropped()
		n, err = a.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)

		dropped = drop("release")
		require.NoError(t, a.Unlock(ctx))
		dropped()
		dropped = drop("last release")
		require.NoError(t, a.Unlock(ctx))
		dropped()
		locked, err := a.IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked)
	})
}
