package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestLocalWaitersGrantedInArrivalOrder: the waiters of one client queue
// behind each other, so grants go round them in arrival order.
func TestLocalWaitersGrantedInArrivalOrder(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx))

		rdb := b.NewClient(t)
		calls := &redistest.ScriptCalls{}
		rdb.AddHook(calls)
		c := clientOn(t, rdb)
		const n = 8
		order := make(chan int, n)
		errs := make(chan error, n)
		for i := range n {
			l := newLock(t, c, name)
			go func() {
				if err := l.Lock(ctx); err != nil {
					errs <- err
					return
				}
				order <- i
				errs <- l.Unlock(ctx)
			}()
			require.Eventually(t, func() bool { return c.Waiters().Waiters == i+1 }, 5*time.Second, time.Millisecond)
			if i == 0 {
				// The first waiter tried, subscribed, and tried again once the
				// subscription was confirmed; the others queue behind it
				// without trying.
				require.Eventually(t, func() bool { return calls.N() == 2 }, 5*time.Second, time.Millisecond)
			}
		}
		require.EqualValues(t, 2, calls.N(), "later waiters queued without trying")
		require.NoError(t, holder.Unlock(ctx))
		for i := range n {
			require.NoError(t, <-errs)
			require.Equal(t, i, <-order)
		}
	})
}

// TestWaitersSurviveLostSubscription: the pub/sub connection is cut while
// goroutines wait on a lock with a 30 s lease; go-redis resubscribes, the
// hub makes every waiter retry, and each still gets the lock long before
// the lease would have bounded its wait.
func TestWaitersSurviveLostSubscription(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		name := redistest.Name(t)
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx))

		proxy, rdb := b.NewProxiedClient(t)
		c := clientOn(t, rdb)
		const n = 5
		errs := make(chan error, n)
		for range n {
			l := newLock(t, c, name)
			go func() { errs <- lockUnlock(ctx, l) }()
		}
		require.Eventually(t, func() bool { return c.Waiters().Waiters == n }, 5*time.Second, time.Millisecond)
		proxy.ResetAll() // every connection of the waiters' client, pub/sub included
		require.NoError(t, holder.Unlock(ctx))
		for range n {
			require.NoError(t, <-errs)
		}
	})
}

// TestManyWaitersManyLocks: waiters on many locks share one subscription
// connection and all get their lock.
func TestManyWaitersManyLocks(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		base := redistest.Name(t)
		clients := []*rlock.Client{newClient(t, b), newClient(t, b)}
		const locks, perLock = 20, 10
		errs := make(chan error, locks*perLock)
		for i := range locks * perLock {
			l := newLock(t, clients[i%2], base+":"+string(rune('A'+i%locks)))
			go func() { errs <- lockUnlock(ctx, l) }()
		}
		for range locks * perLock {
			require.NoError(t, <-errs)
		}
		for _, c := range clients {
			require.LessOrEqual(t, c.Waiters().Connections, 1)
		}
	})
}

// TestRingClient: the lock and its waits work through a *redis.Ring, whose
// pub/sub needs a connection per channel.
func TestRingClient(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"only": b.Addr}})
		t.Cleanup(func() { _ = ring.Close() })
		c := clientOn(t, ring)
		name := redistest.Name(t)
		holder := newLock(t, c, name)
		require.NoError(t, holder.Lock(ctx))
		got := make(chan error, 1)
		waiter := newLock(t, c, name)
		go func() { got <- waiter.Lock(ctx) }()
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-got)
		require.NoError(t, waiter.Unlock(ctx))
	})
}

// TestRESP2Client: replies and pub/sub parse the same over RESP2 as over
// go-redis' default RESP3.
func TestRESP2Client(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp2 := func(o *redis.Options) { o.Protocol = 2 }
		c := clientOn(t, b.NewClient(t, resp2))
		name := redistest.Name(t)
		holder := newLock(t, c, name)
		require.NoError(t, holder.Lock(ctx))
		rctx, rcancel := core.Join(ctx, holder.Ctx()) // re-entry, bounded by ctx too
		defer rcancel()
		require.NoError(t, holder.Lock(rctx))
		n, err := holder.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		wc := clientOn(t, b.NewClient(t, resp2))
		waiter := newLock(t, wc, name)
		got := make(chan error, 1)
		go func() { got <- waiter.Lock(ctx) }() // 30 s lease: woken by pub/sub
		require.Eventually(t, func() bool { return wc.Waiters().Waiters == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-got)
		require.NoError(t, waiter.Unlock(ctx))
	})
}
