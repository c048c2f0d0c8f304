package reentrant_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// TestAutoPipelineExclusion: with WithAutoPipeline, many goroutines of four
// clients lock one shared key and their own keys at once; their scripts
// share pipelines, and exclusion and every grant still hold.
func TestAutoPipelineExclusion(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		name := redistest.Name(t)
		clients := make([]*reentrant.Client, 4)
		for i := range clients {
			clients[i] = newClient(t, b, reentrant.WithAutoPipeline())
		}
		var inside, shared, own atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 64*6)
		for g := range 64 {
			wg.Go(func() {
				c := clients[g%4]
				sl, err := reentrant.New(c, name)
				if err != nil {
					errs <- err
					return
				}
				ol, err := reentrant.New(c, fmt.Sprintf("%s:own:%d", name, g))
				if err != nil {
					errs <- err
					return
				}
				for range 3 {
					if err := ol.Lock(ctx); err != nil {
						errs <- err
						return
					}
					own.Add(1)
					if err := ol.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
				if err := sl.Lock(ctx); err != nil {
					errs <- err
					return
				}
				if n := inside.Add(1); n != 1 {
					errs <- fmt.Errorf("two holders at once: %d", n)
				}
				shared.Add(1)
				inside.Add(-1)
				errs <- sl.Unlock(ctx)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.EqualValues(t, 64, shared.Load())
		require.EqualValues(t, 64*3, own.Load())
	})
}

// TestAutoPipelineLostReply: a script reply lost after the server ran it,
// with the script sent through the auto-pipeliner, still moves the hold
// count by exactly one per call.
func TestAutoPipelineLostReply(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		direct := b.NewClient(t)
		proxy, viaProxy := b.NewProxiedClient(t)
		c := clientOn(t, viaProxy, reentrant.WithAutoPipeline())
		l := newLock(t, c, name)
		field, err := l.Owner(ctx)
		require.NoError(t, err)
		warm := newLock(t, c, name+":warm") // loads the scripts
		require.NoError(t, warm.Lock(ctx))
		require.NoError(t, warm.Unlock(ctx))

		step := func(what string, op func() error, wantCount int) {
			t.Helper()
			dropped := proxy.Dropped()
			proxy.DropNextReply("evalsha")
			require.NoError(t, op(), what)
			require.Equal(t, dropped+1, proxy.Dropped(), "%s: the reply was dropped", what)
			require.Equal(t, wantCount, holdCount(t, direct, name, field), what)
		}
		step("acquire", func() error { return l.Lock(ctx) }, 1)
		step("re-entry", func() error { return l.TryLock(ctx) }, 2)
		step("release", func() error { return l.Unlock(ctx) }, 1)
		step("last release", func() error { return l.Unlock(ctx) }, 0)
		require.NoError(t, l.Err())
	})
}

// TestAutoPipelineNeedsGoRedis: a Redis that is not a go-redis client has no
// auto-pipeliner; NewClient says so instead of ignoring the option.
func TestAutoPipelineNeedsGoRedis(t *testing.T) {
	b := redistest.Mini(t)
	wrapped := struct{ rlock.Redis }{b.NewClient(t)}
	_, err := reentrant.NewClient(wrapped, reentrant.WithAutoPipeline())
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	require.ErrorContains(t, err, "auto-pipelining")
}
