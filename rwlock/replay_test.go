package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/rwlock"
)

// holds returns field's hold count in the hash and how many of its timeout
// keys 1..5 exist, read directly.
func holds(t require.TestingT, rdb *redis.Client, name, field string) (int, int) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	ctx := context.Background()
	n, err := rdb.HGet(ctx, name, field).Int()
	if err == redis.Nil {
		n, err = 0, nil
	}
	require.NoError(t, err)
	keys := 0
	for i := int64(1); i <= 5; i++ {
		e, err := rdb.Exists(ctx, base.RWTimeoutKey(name, field, i)).Result()
		require.NoError(t, err)
		keys += int(e)
	}
	return n, keys
}

// TestLostReplyChangesStateOnce drops the reply of every read-write script
// after the server ran it; go-redis sends it again, so each runs twice,
// and the hold counts (and a reader's timeout keys) still move by exactly
// one per call.
func TestLostReplyChangesStateOnce(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		direct := b.NewClient(t)
		proxy, viaProxy := b.NewProxiedClient(t)
		const lease = 400 * time.Millisecond
		c := clientOn(t, viaProxy, rlock.WithWatchdogLease(lease))
		l := newRW(t, c, name)
		owner, err := l.ReadLock().Owner(ctx)
		require.NoError(t, err)
		writer := base.WriterField(owner)

		// Load every script first, so each drop hits an EVALSHA that runs.
		warm := newRW(t, c, name+":warm")
		require.NoError(t, warm.WriteLock().Lock(ctx))
		require.NoError(t, warm.WriteLock().Unlock(ctx))
		require.NoError(t, warm.ReadLock().Lock(ctx))
		require.NoError(t, warm.ReadLock().Unlock(ctx))
		_, err = warm.ForceUnlock(ctx)
		require.NoError(t, err)
		_, err = warm.State(ctx)
		require.NoError(t, err)
		_, err = warm.ReadLock().HoldCount(ctx)
		require.NoError(t, err)

		step := func(what string, op func() error, field string, wantCount, wantKeys int) {
			t.Helper()
			dropped := proxy.Dropped()
			proxy.DropNextReply("evalsha")
			require.NoError(t, op(), what)
			require.Equal(t, dropped+1, proxy.Dropped(), "%s: the reply was dropped", what)
			n, keys := holds(t, direct, name, field)
			require.Equal(t, wantCount, n, what)
			require.Equal(t, wantKeys, keys, "%s: timeout keys", what)
		}
		r, w := l.ReadLock(), l.WriteLock()
		// Re-entries and the downgrade with a ctx from the holding that,
		// like ctx, cannot end: they run on the path a call with ctx would.
		from := func(h interface{ Ctx() context.Context }) context.Context { return context.WithoutCancel(h.Ctx()) }
		step("write acquire", func() error { return w.Lock(ctx) }, writer, 1, 0)
		step("write re-entry", func() error { return w.TryLock(from(w)) }, writer, 2, 0)
		step("downgrade", func() error { return r.Lock(from(w)) }, owner, 1, 1)
		step("write release", func() error { return w.Unlock(ctx) }, writer, 1, 0)
		step("last write release", func() error { return w.Unlock(ctx) }, writer, 0, 0)
		step("read re-entry", func() error { return r.TryLock(from(r)) }, owner, 2, 2)

		// Renewal: drop the reply of the next watchdog round.
		dropped := proxy.Dropped()
		proxy.DropNextReply("evalsha")
		require.Eventually(t, func() bool { return proxy.Dropped() == dropped+1 }, 5*time.Second, time.Millisecond)
		renewed := c.WatchdogStats().Renewed
		require.Eventually(t, func() bool { return c.WatchdogStats().Renewed > renewed+1 }, 5*time.Second, time.Millisecond)
		n, keys := holds(t, direct, name, owner)
		require.Equal(t, []int{2, 2}, []int{n, keys}, "renewal")
		require.NoError(t, r.Err(), "a lost renewal reply is not a lost lock")

		step("read release", func() error { return r.Unlock(ctx) }, owner, 1, 1)
		step("last read release", func() error { return r.Unlock(ctx) }, owner, 0, 0)
		require.NoError(t, r.Err())
		e, err := direct.Exists(ctx, name).Result()
		require.NoError(t, err)
		require.Zero(t, e)

		// Force unlock replayed: still reports that it deleted the lock.
		require.NoError(t, r.Lock(ctx))
		dropped = proxy.Dropped()
		proxy.DropNextReply("evalsha")
		ok, err := newRW(t, c, name).ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, dropped+1, proxy.Dropped())
	})
}

// TestLostReplyWithoutRetries: with retries off, a lost reply is an error
// TryLock's caller sees, and the hold it may have taken is given back; a
// blocking Lock settles and tries again. Counts stay exact on both sides.
func TestLostReplyWithoutRetries(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		direct := b.NewClient(t)
		proxy, viaProxy := b.NewProxiedClient(t, func(o *redis.Options) { o.MaxRetries = -1 })
		l := newRW(t, clientOn(t, viaProxy), name, rwlock.WithLease(time.Minute))
		owner, err := l.ReadLock().Owner(ctx)
		require.NoError(t, err)
		for _, side := range []struct {
			h     rlock.Locker
			field string
			keys  int
		}{{l.ReadLock(), owner, 1}, {l.WriteLock(), base.WriterField(owner), 0}} {
			require.NoError(t, side.h.Lock(ctx)) // loads the scripts
			require.NoError(t, side.h.Unlock(ctx))

			proxy.DropNextReply("evalsha")
			require.Error(t, side.h.TryLock(ctx), "the acquire ran but its reply was lost")
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				n, k := holds(c, direct, name, side.field)
				require.Equal(c, [2]int{0, 0}, [2]int{n, k})
			},
				5*time.Second, time.Millisecond, "the unreported grant is given back")
			proxy.DropNextReply("evalsha")
			require.NoError(t, side.h.Lock(ctx), "a blocking Lock outlives a lost reply")
			n, k := holds(t, direct, name, side.field)
			require.Equal(t, []int{1, side.keys}, []int{n, k})
			require.NoError(t, side.h.Unlock(ctx))
			require.ErrorIs(t, side.h.Unlock(ctx), rlock.ErrNotHeld)
		}
	})
}

// Latch keys piled up with short-lived handles (see the reentrant test of
// that name): every owner's last read or write release left a latch key
// of its own for the replay window. Both sides of a read-write lock share
// one latch key now.
func TestLatchKeysBoundedWithHandlePerOperation(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		rdb := b.NewClient(t)
		c := newClient(t, b)
		const releases = 50
		for range releases {
			l := newRW(t, c, name) // a new handle pair, so a new owner, per operation
			require.NoError(t, l.ReadLock().Lock(ctx))
			require.NoError(t, l.ReadLock().Unlock(ctx))
			require.NoError(t, l.WriteLock().Lock(ctx))
			require.NoError(t, l.WriteLock().Unlock(ctx))
		}
		keys, err := rdb.Keys(ctx, "*"+name+"*").Result()
		require.NoError(t, err)
		require.LessOrEqual(t, len(keys), 1, "%d keys left by %d read and %d write releases of one lock, among them %q", len(keys), releases, releases, keys[0])
	})
}
