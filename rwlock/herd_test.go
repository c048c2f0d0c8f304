package rwlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/rwlock"
)

// writeAttempts counts a go-redis client's write-lock script calls
// (attempts) once answered.
type writeAttempts struct{ n atomic.Int64 }

func (h *writeAttempts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *writeAttempts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); len(args) > 1 && args[1] == lua.RWWriteLock.Hash() {
			h.n.Add(1)
		}
		return err
	}
}
func (h *writeAttempts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Issue 30, the retry herd of the write side: the last write release
// published "1", which woke every waiter of every client, so each grant
// to one of n waiting writers cost about n attempts (785 attempts for 40
// grants here before the fix, about 20 per grant). With designations a
// grant costs about one attempt (the designated client's writer), however
// many clients and writers wait (about 120 in all here). Every writer
// tries once before waiting and once more when its subscription is
// confirmed: those attempts, at most two per writer, are allowed for on
// top, and two per grant for the granted attempt, such retries that land
// after the release and a second designee whose first did not act in
// time.
func TestWriteReleaseWakesOneWriterNotTheHerd(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const clients, perClient = 10, 4
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		opts := []rwlock.Option{rwlock.WithWriterWait(time.Minute)}
		holder := newRW(t, newClient(t, b), name, opts...)
		require.NoError(t, holder.WriteLock().Lock(ctx))

		hook := &writeAttempts{}
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range clients {
			rdb := b.NewClient(t)
			rdb.AddHook(hook)
			c := clientOn(t, rdb)
			for range perClient {
				l := newRW(t, c, name, opts...)
				wg.Go(func() {
					if err := l.WriteLock().Lock(ctx); err != nil {
						failed.Add(1)
						return
					}
					if err := l.WriteLock().Unlock(context.Background()); err != nil {
						failed.Add(1)
					}
				})
			}
			require.Eventually(t, func() bool { return c.Waiters().Waiters == perClient }, 10*time.Second, time.Millisecond, "client %d", i)
		}
		before := hook.n.Load()
		require.NoError(t, holder.WriteLock().Unlock(ctx))
		wg.Wait()
		require.Zero(t, failed.Load())
		grants := int64(clients * perClient)
		setup := 2 * grants
		attempts := hook.n.Load()
		t.Logf("%d attempts for %d grants (%d clients), %d of them before the release", attempts, grants, clients, before)
		require.LessOrEqual(t, attempts, setup+2*grants, "attempts beyond two per grant and two per writer's setup")
	})
}
