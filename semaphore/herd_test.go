package semaphore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/semaphore"
)

// attemptCounter counts the acquire scripts a Redis client sends.
type attemptCounter struct{ n atomic.Int64 }

func (h *attemptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *attemptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *attemptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && (a[1] == lua.SemAcquire.Hash() || a[1] == lua.Source(lua.SemAcquire)) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// herdRun runs clients × waiters goroutines (each client its own
// connection and hub) that each take the one permit of a semaphore and
// give it back, and returns the acquire attempts beyond each goroutine's
// first, per release: the wake-ups that one release causes.
func herdRun(t *testing.T, b *redistest.Backend, clients, waiters int) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := redistest.Name(t)
	counters := make([]*attemptCounter, clients)
	sems := make([]*semaphore.Semaphore, clients)
	for i := range clients {
		rdb := b.NewClient(t)
		counters[i] = &attemptCounter{}
		rdb.AddHook(counters[i])
		// No poll within the run: every wake-up is a message's.
		sems[i] = newSem(t, clientOn(t, rdb), name, semaphore.WithPoll(time.Hour))
	}
	_, err := sems[0].TrySetPermits(ctx, 1)
	require.NoError(t, err)
	var (
		wg     sync.WaitGroup
		inside atomic.Int64
		errs   = make(chan error, clients*waiters)
	)
	for i := range clients {
		for range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := sems[i].Acquire(ctx, 1); err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					errs <- fmt.Errorf("two holders of one permit")
				}
				inside.Add(-1)
				errs <- sems[i].Release(ctx, 1)
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	total := int64(0)
	for _, c := range counters {
		total += c.n.Load()
	}
	n := int64(clients * waiters)
	return float64(total-n) / float64(n)
}

// TestReleaseWakeUpsAcrossClients measures the wake-ups one release of
// one permit causes with several clients waiting: each client's hub wakes
// as many of its waiters as the message counts permits (here 1), so one
// release costs up to one attempt per client with waiters, never one per
// waiter (Redisson's bound too: min(local waiters, count) per process).
// It is not yet "about one in all": that needs the release script to
// designate clients, as the reentrant lock's does, on a channel of rlock's
// own (a designation on redisson_sc would reach Redisson's listener as a
// count; see docs/semaphores.md). The figure is logged; the test holds
// the per-client bound.
func TestReleaseWakeUpsAcrossClients(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const clients, waiters = 4, 6
		perRelease := herdRun(t, b, clients, waiters)
		t.Logf("%d clients x %d waiters: %.2f extra acquire attempts per release", clients, waiters, perRelease)
		require.LessOrEqual(t, perRelease, float64(clients), "a release of one permit woke more than one waiter per client")
	})
}
