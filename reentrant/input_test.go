package reentrant_test

import (
	"context"
	"github.com/rlock-go/rlock/internal/base"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

func TestBadInputIsAnErrorNotAPanic(t *testing.T) {
	var nilClient *redis.Client
	_, err := rlock.NewClient(nil)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = rlock.NewClient(nilClient)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	for _, opt := range []rlock.ClientOption{
		rlock.WithClientID(""),
		rlock.WithClientID("a:b"),
		rlock.WithClientID(strings.Repeat("x", 129)),
		rlock.WithReplayWindow(0),
		rlock.WithMaxPoll(-time.Second),
		rlock.WithLogger(nil),
		rlock.WithWatchdogLease(0),
		rlock.WithWatchdogInterval(time.Hour), // not less than the watchdog lease
		rlock.WithWatchdogBatchSize(0),
	} {
		_, err := rlock.NewClient(rdb, opt)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	}
	c, err := rlock.NewClient(rdb, nil, nil)
	require.NoError(t, err, "nil options are ignored")
	t.Cleanup(func() { _ = c.Close() })

	_, err = reentrant.New(nil, "x")
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	for _, name := range []string{"", strings.Repeat("n", base.MaxNameLen+1)} {
		_, err = reentrant.New(c, name)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	}
	for _, lease := range []time.Duration{-time.Second, time.Microsecond} {
		_, err = reentrant.New(c, "x", reentrant.WithLease(lease))
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	}
	_, err = reentrant.New(c, "x", reentrant.WithLease(rlock.WatchdogMode))
	require.NoError(t, err, "WatchdogMode is the default lease")
	l, err := reentrant.New(c, "x", nil)
	require.NoError(t, err)
	for _, lease := range []time.Duration{-time.Second, time.Microsecond} {
		require.ErrorIs(t, l.LockLease(context.Background(), lease), rlock.ErrInvalidArgument)
		require.ErrorIs(t, l.TryLockLease(context.Background(), lease), rlock.ErrInvalidArgument)
		require.ErrorIs(t, l.SetLease(context.Background(), lease), rlock.ErrInvalidArgument)
	}

	// A bad owner in the context is refused before any I/O.
	for _, id := range []string{"", "#1", "a\nb", strings.Repeat("o", base.MaxOwnerLen+1)} {
		ctx := rlock.WithOwner(context.Background(), id)
		require.ErrorIs(t, l.Lock(ctx), rlock.ErrInvalidArgument, "%q", id)
		require.ErrorIs(t, l.TryLock(ctx), rlock.ErrInvalidArgument)
		require.ErrorIs(t, l.Unlock(ctx), rlock.ErrInvalidArgument)
		_, err := l.HoldCount(ctx)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	}
}

func TestRedisErrorIsNeverAcquired(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		rdb := b.NewClient(t)
		name := redistest.Name(t)
		require.NoError(t, rdb.Set(ctx, name, "not a hash", 0).Err())
		l := newLock(t, clientOn(t, rdb), name)
		err := l.TryLock(ctx)
		require.Error(t, err)
		require.NotErrorIs(t, err, rlock.ErrNotObtained)
		require.Error(t, l.Unlock(ctx))
		v, err := rdb.Get(ctx, name).Result()
		require.NoError(t, err)
		require.Equal(t, "not a hash", v, "nothing was overwritten")

		// An unreachable server is an error too, never a grant.
		down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		t.Cleanup(func() { _ = down.Close() })
		require.Error(t, newLock(t, clientOn(t, down), name).TryLock(ctx))
	})
}

func TestClosedClient(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c, err := rlock.NewClient(b.NewClient(t))
		require.NoError(t, err)
		name := redistest.Name(t)
		holder := newLock(t, c, name)
		require.NoError(t, holder.Lock(ctx))
		waiter := newLock(t, c, name)
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(ctx) }()
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 }, 5*time.Second, time.Millisecond)

		require.NoError(t, c.Close())
		require.NoError(t, c.Close(), "Close is idempotent")
		require.ErrorIs(t, <-got, rlock.ErrClosed)
		<-holder.Done()
		require.ErrorIs(t, holder.Err(), rlock.ErrLockLost)
		require.ErrorIs(t, holder.Err(), rlock.ErrClosed)
		require.ErrorIs(t, holder.Lock(ctx), rlock.ErrClosed)
		require.NoError(t, holder.Unlock(ctx), "Unlock still releases after Close")
	})
}

func TestOnePubSubConnectionPerClient(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b)
		holders := newClient(t, b)
		stem := redistest.Name(t)
		const locks, perLock = 10, 5
		got := make(chan error, locks*perLock)
		var held []*reentrant.Lock
		for i := range locks {
			name := stem + ":" + string(rune('a'+i))
			h := newLock(t, holders, name)
			require.NoError(t, h.Lock(ctx))
			held = append(held, h)
			for range perLock {
				w := newLock(t, c, name)
				go func() { got <- lockUnlock(ctx, w) }()
			}
		}
		require.Eventually(t, func() bool { return c.Waiters().Waiters == locks*perLock }, 5*time.Second, time.Millisecond)
		s := c.Waiters()
		require.Equal(t, 1, s.Connections)
		require.Equal(t, locks, s.Channels)
		if b.IsReal() {
			// The hub's SUBSCRIBE is queued: wait for it to reach the server.
			rdb := b.NewClient(t)
			require.Eventually(t, func() bool {
				n, err := rdb.PubSubNumSub(ctx, base.Channel(stem+":a")).Result()
				return err == nil && n[base.Channel(stem+":a")] == 1
			}, 5*time.Second, time.Millisecond, "one subscription per channel per client")
		}
		for _, h := range held {
			require.NoError(t, h.Unlock(ctx))
		}
		for range locks * perLock {
			require.NoError(t, <-got)
		}
		require.Eventually(t, func() bool { return c.Waiters() == rlock.WaiterStats{Connections: 1} }, 5*time.Second, time.Millisecond,
			"no waiters left (their channels linger, then are unsubscribed)")
	})
}
