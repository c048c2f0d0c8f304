package fair_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
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

// TestSecondCallOfQueuedOwnerKeepsOnePlace: an owner's second waiting
// call, whose first attempt asks to join (a call's first attempt expects
// no place), finds the owner queued ahead of another waiter: its ZADD NX
// adds nothing, it takes back the place it pushed and renews the one
// there is (issue 30: the join no longer reads the owner's score first).
// The queue keeps one place per owner, in arrival order.
func TestSecondCallOfQueuedOwnerKeepsOnePlace(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name := redistest.Name(t)
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx))
		rdb := b.NewClient(t)
		calls := &redistest.ScriptCalls{}
		rdb.AddHook(calls)
		c := clientOn(t, rdb)
		octx := rlock.WithOwner(ctx, "job-1")
		first, second := newLock(t, c, name), newLock(t, c, name)
		firstDone := lockAsync(octx, first)
		waitQueued(t, holder, 1)
		other := newLock(t, newClient(t, b), name)
		otherDone := lockAsync(ctx, other)
		waitQueued(t, holder, 2)
		job, err := first.Owner(octx)
		require.NoError(t, err)
		want := []string{job, owner(t, other)}
		// The first call joined, then tried again once its channel's
		// subscription was confirmed; the second call's attempt is the third.
		require.Eventually(t, func() bool { return calls.N() == 2 }, 10*time.Second, time.Millisecond)
		sctx, scancel := context.WithCancel(octx)
		secondDone := lockAsync(sctx, second)
		require.Eventually(t, func() bool { return calls.N() == 3 }, 10*time.Second, time.Millisecond)
		require.Equal(t, want, queue(t, holder), "one place for the owner, still first")
		o, _ := queuedScores(t, rdb, name)
		require.Equal(t, want, o, "one score each")
		scancel() // the owner's first call still waits: its place stays
		require.ErrorIs(t, <-secondDone, context.Canceled)
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-firstDone)
		require.NoError(t, first.Unlock(octx))
		require.NoError(t, <-otherDone)
		require.NoError(t, other.Unlock(ctx))
		require.Empty(t, queue(t, holder))
	})
}
