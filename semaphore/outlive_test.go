package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/semaphore"
)

// TestWaitingAcquireReturnedABrokenConnection: every reply to a waiting
// Acquire's first attempt is lost, each with its connection (go-redis
// re-sends it three times). It returned the connection's error (EOF) at
// once, where a waiting Lock rides through such failures until the
// client's unreachable timeout. Now it pauses, tries again, waits (poll an
// hour) and gets the permit another client releases; on both kinds.
func TestWaitingAcquireReturnedABrokenConnection(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		for _, kind := range []string{"counting", "expirable"} {
			t.Run(kind, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				name := redistest.Name(t)
				proxy, rdb := b.NewProxiedClient(t, func(o *redis.Options) { o.ReadTimeout = 100 * time.Millisecond })
				redistest.LoadScripts(t, rdb)
				wc := clientOn(t, rdb)
				other := clientOn(t, b.NewClient(t))
				var acquire func() error
				var release func() error
				if kind == "counting" {
					waiter := newSem(t, wc, name, semaphore.WithPoll(time.Hour))
					holder := newSem(t, other, name)
					_, err := holder.TrySetPermits(ctx, 1)
					require.NoError(t, err)
					require.NoError(t, holder.Acquire(ctx, 1))
					acquire = func() error { return waiter.Acquire(ctx, 1) }
					release = func() error { return holder.Release(ctx, 1) }
				} else {
					waiter := newExp(t, wc, name, semaphore.WithPoll(time.Hour))
					holder := newExp(t, other, name)
					_, err := holder.TrySetPermits(ctx, 1)
					require.NoError(t, err)
					p, err := holder.Acquire(ctx, semaphore.WithLease(time.Hour))
					require.NoError(t, err)
					acquire = func() error { _, err := waiter.Acquire(ctx, semaphore.WithLease(time.Hour)); return err }
					release = func() error { return p.Release(ctx) }
				}
				proxy.DropReplies("evalsha", 4)
				done := make(chan error, 1)
				go func() { done <- acquire() }()
				require.Eventually(t, func() bool { return wc.Waiters().Waiters == 1 && proxy.Dropped() == 4 },
					5*time.Second, time.Millisecond, "its first attempt failed, then it waits")
				require.NoError(t, release())
				require.NoError(t, <-done, "the waiter got the permit after its failed attempt")
			})
		}
	})
}
