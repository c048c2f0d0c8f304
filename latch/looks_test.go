package latch_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/latch"
)

// getHook counts the GETs of one key.
type getHook struct {
	key string
	n   atomic.Int64
}

func (h *getHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *getHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "get" && len(args) == 2 && args[1] == h.key {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *getHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAwaitReleasesAClientsWaitersWithOneLook: when the count reaches
// zero, the "0" message wakes one waiter of the client, which looks at
// the count; the client's other waiters, all waiting since before that
// look, return on what it found instead of each looking again (16 GETs
// for 16 waiters before, and in benchmarks scenario 13 6-7x its floor's
// time to wake them all).
func TestAwaitReleasesAClientsWaitersWithOneLook(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		name := redistest.Name(t)
		rdb := b.Universal(t)
		hook := &getHook{key: name}
		rdb.AddHook(hook)
		c := clientOn(t, rdb)
		l := newLatch(t, c, name, latch.WithPoll(time.Hour))
		counter := newLatch(t, clientOn(t, b.Universal(t)), name)
		const n = 16
		for round := range 3 { // the first subscribes; later ones reuse it
			if round == 0 {
				ok, err := counter.TrySetCount(ctx, 1)
				require.NoError(t, err)
				require.True(t, ok)
			} else {
				// A count set without TrySetCount's "1", which wakes every
				// waiter to look when it comes after they joined.
				require.NoError(t, rdb.Set(ctx, name, 1, 0).Err())
			}
			done := awaitAll(ctx, []*latch.Latch{l}, n)
			waiting(t, []*rlock.Client{c}, n) // every first look done
			before := hook.n.Load()
			require.NoError(t, counter.CountDown(ctx))
			for range n {
				require.NoError(t, <-done)
			}
			if round > 0 {
				require.LessOrEqual(t, hook.n.Load()-before, int64(2), "round %d: GETs of the count after the last CountDown, for %d waiters of one client", round, n)
			}
		}
	})
}

// A waiter that joins after the look that found the count at zero, while
// a new count is set, is not released by that look: it waits for the new
// count to reach zero.
func TestAwaitLaterWaiterWaitsForTheNewCount(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		name := redistest.Name(t)
		rdb := b.Universal(t)
		hook := &getHook{key: name}
		rdb.AddHook(hook)
		c := clientOn(t, rdb)
		l := newLatch(t, c, name, latch.WithPoll(time.Hour))
		counter := newLatch(t, clientOn(t, b.Universal(t)), name)
		for range 3 {
			ok, err := counter.TrySetCount(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			done := awaitAll(ctx, []*latch.Latch{l}, 4)
			waiting(t, []*rlock.Client{c}, 4)
			require.NoError(t, counter.CountDown(ctx))
			for range 4 {
				require.NoError(t, <-done)
			}
		}
		ok, err := counter.TrySetCount(ctx, 1)
		require.NoError(t, err)
		require.True(t, ok)
		late := awaitAll(ctx, []*latch.Latch{l}, 2)
		waiting(t, []*rlock.Client{c}, 2)
		// A message that changes nothing wakes one of them: it must look
		// (a GET) and wait on, not return on the earlier rounds' look.
		before := hook.n.Load()
		require.NoError(t, rdb.Publish(ctx, base.LatchChannel(name), "1").Err())
		require.Eventually(t, func() bool { return hook.n.Load() > before }, 10*time.Second, time.Millisecond)
		waiting(t, []*rlock.Client{c}, 2)
		select {
		case err := <-late:
			t.Fatalf("a waiter returned (%v) while the count is 1", err)
		default:
		}
		require.NoError(t, counter.CountDown(ctx))
		for range 2 {
			require.NoError(t, <-late)
		}
	})
}
