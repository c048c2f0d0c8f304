package latch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/latch"
)

// On Redis Cluster (3 masters with a replica each, so every write also
// waits for its replica), waiters on two clients are released by the last
// CountDown of a third, through the "0" message alone (their poll is an
// hour), in every pub/sub mode; and a name with a hash tag of its own is
// refused with CROSSSLOT, as the package doc says.
func TestClusterAwaitWokenByCountDown(t *testing.T) {
	cl := redistest.SharedCluster(t)
	for _, m := range []struct {
		name string
		mode rlock.PubSubMode
	}{{"auto", rlock.PubSubAuto}, {"sharded", rlock.PubSubSharded}, {"classic", rlock.PubSubClassic}} {
		t.Run(m.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			name := redistest.Name(t)
			setter := newLatch(t, clientOn(t, cl.NewClient(t), rlock.WithPubSubMode(m.mode)), name)
			cs := []*rlock.Client{
				clientOn(t, cl.NewClient(t), rlock.WithPubSubMode(m.mode)),
				clientOn(t, cl.NewClient(t), rlock.WithPubSubMode(m.mode)),
			}
			_, on := cs[0].ReplicaSync()
			require.True(t, on, "replica sync is on for a cluster client")

			ok, err := setter.TrySetCount(ctx, 2)
			require.NoError(t, err)
			require.True(t, ok)
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for _, c := range cs {
				l := newLatch(t, c, name, latch.WithPoll(time.Hour))
				for range 2 {
					wg.Go(func() { errs <- l.Await(ctx) })
				}
			}
			waiting(t, cs, 4)
			require.NoError(t, setter.CountDown(ctx))
			n, err := setter.Count(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, n)
			require.NoError(t, setter.CountDown(ctx))
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
		})
	}

	t.Run("hash tag", func(t *testing.T) {
		l := newLatch(t, clientOn(t, cl.NewClient(t)), "{"+redistest.Name(t)+"}")
		_, err := l.TrySetCount(context.Background(), 1)
		require.ErrorContains(t, err, "CROSSSLOT")
	})
}
