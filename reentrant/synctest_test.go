package reentrant_test

import (
	"context"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/watchdog"
)

// inBubble runs fn in a synctest bubble with a miniredis whose TTLs follow
// the bubble's fake clock, so the default 30 s lease can be tested over
// minutes in milliseconds.
func inBubble(t *testing.T, fn func(t *testing.T, newRDB func() *redis.Client)) {
	synctest.Test(t, func(t *testing.T) {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true)
		defer m.Close()
		newRDB := func() *redis.Client {
			rdb := redis.NewClient(&redis.Options{
				Addr:   "127.0.0.1:6379", // never dialled: the Dialer connects in memory
				Dialer: func(context.Context, string, string) (net.Conn, error) { return m.Dial() },
			})
			t.Cleanup(func() { _ = rdb.Close() })
			return rdb
		}
		fn(t, newRDB)
	})
}

func TestDefaultWatchdogOverMinutes(t *testing.T) {
	inBubble(t, func(t *testing.T, newRDB func() *redis.Client) {
		ctx := context.Background()
		c := clientOn(t, newRDB())
		cc, _ := core.Of(c)
		require.Equal(t, watchdog.DefaultLease, cc.Watchdog().LeaseDuration())
		require.Equal(t, 10*time.Second, cc.Watchdog().Interval())
		l := newLock(t, c, "orders:42")
		other := newLock(t, clientOn(t, newRDB()), "orders:42")
		require.NoError(t, l.Lock(ctx))

		// Five minutes: ten leases. The lock never lapses.
		for range 30 {
			time.Sleep(10 * time.Second)
			synctest.Wait()
			require.ErrorIs(t, other.TryLock(ctx), rlock.ErrNotObtained)
			ttl, err := l.TTL(ctx)
			require.NoError(t, err)
			require.Greater(t, ttl, 15*time.Second, "renewed every 10 s to 30 s")
		}
		require.GreaterOrEqual(t, c.WatchdogStats().Renewed, uint64(29))
		require.NoError(t, l.Err())

		require.NoError(t, l.Unlock(ctx))
		rounds := c.WatchdogStats().Rounds
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, rounds, c.WatchdogStats().Rounds, "no renewal after the last unlock")
		<-l.Done()
		require.NoError(t, l.Err())
	})
}

func TestExplicitLeaseExpiresInFakeTime(t *testing.T) {
	inBubble(t, func(t *testing.T, newRDB func() *redis.Client) {
		ctx := context.Background()
		holder := newLock(t, clientOn(t, newRDB()), "report", reentrant.WithLease(45*time.Second))
		waiter := newLock(t, clientOn(t, newRDB()), "report")
		start := time.Now()
		require.NoError(t, holder.Lock(ctx))
		require.NoError(t, waiter.Lock(ctx)) // bounded by the PTTL: no message comes
		waited := time.Since(start)
		require.GreaterOrEqual(t, waited, 45*time.Second)
		require.Less(t, waited, 45*time.Second+10*time.Millisecond)
		require.NoError(t, waiter.Unlock(ctx))
	})
}
