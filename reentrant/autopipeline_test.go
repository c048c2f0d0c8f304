package reentrant_test

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// WithAutoPipeline's behaviour is tested by the tests that run under
// clientVariants (exclusion, lost replies) and by fair's FIFO test.

// TestAutoPipelineNeedsGoRedis: a Redis that is not a go-redis client has no
// auto-pipeliner; NewClient says so instead of ignoring the option.
func TestAutoPipelineNeedsGoRedis(t *testing.T) {
	b := redistest.Mini(t)
	wrapped := struct{ rlock.Redis }{b.NewClient(t)}
	_, err := rlock.NewClient(wrapped, rlock.WithAutoPipeline())
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	require.ErrorContains(t, err, "auto-pipelining")
}

// Regression: NewClient accepted WithAutoPipeline on a go-redis Ring,
// which has no auto-pipeliner (its AutoPipeline and AsyncAutoPipeline
// report ErrRingAutoPipelineUnsupported). Every script call made while
// another was in flight then failed: Lock and Unlock calls of concurrent
// goroutines returned "starting the auto-pipeliner" errors, and a failed
// Unlock left its lock held. NewClient now refuses the option on a Ring.
func TestAutoPipelineOnRingFailedOverlappingCalls(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"only": b.Addr}})
		t.Cleanup(func() { _ = ring.Close() })
		_, err := rlock.NewClient(ring, rlock.WithAutoPipeline())
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		require.ErrorContains(t, err, "Ring")

		// Without the option, overlapping calls on a Ring work.
		c := clientOn(t, ring)
		name := redistest.Name(t)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := reentrant.New(c, name)
				if err == nil {
					err = l.Lock(context.Background())
				}
				if err == nil {
					err = l.Unlock(context.Background())
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}
