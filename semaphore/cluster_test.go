package semaphore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/semaphore"
)

// clusterModes are the pub/sub modes the cluster tests run in.
var clusterModes = []struct {
	name string
	mode rlock.PubSubMode
}{{"auto", rlock.PubSubAuto}, {"sharded", rlock.PubSubSharded}, {"classic", rlock.PubSubClassic}}

// On Redis Cluster (3 masters with a replica each, so every acquire also
// waits for its replica), permits taken on one client are released on
// another, and the waiters of a third client are woken by the releases
// alone (their poll is an hour): the counting semaphore's main behaviour
// in every pub/sub mode.
func TestClusterAcquireReleaseAcrossClients(t *testing.T) {
	cl := redistest.SharedCluster(t)
	for _, m := range clusterModes {
		t.Run(m.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			name := redistest.Name(t)
			holderC := clientOn(t, cl.NewClient(t), rlock.WithPubSubMode(m.mode))
			waiterC := clientOn(t, cl.NewClient(t), rlock.WithPubSubMode(m.mode))
			_, on := waiterC.ReplicaSync()
			require.True(t, on, "replica sync is on for a cluster client")
			holder := newSem(t, holderC, name)
			waiter := newSem(t, waiterC, name, semaphore.WithPoll(time.Hour))
			other := newSem(t, clientOn(t, cl.NewClient(t), rlock.WithPubSubMode(m.mode)), name)

			ok, err := holder.TrySetPermits(ctx, 3)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, holder.Acquire(ctx, 3))

			const waiters = 3
			var wg sync.WaitGroup
			errs := make(chan error, waiters)
			for range waiters {
				wg.Go(func() { errs <- waiter.Acquire(ctx, 1) })
			}
			require.Eventually(t, func() bool { return waiterC.Waiters().Waiters == waiters }, 10*time.Second, time.Millisecond)
			require.NoError(t, other.Release(ctx, 1), "released by a client that never took them")
			require.NoError(t, holder.Release(ctx, 2))
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.Zero(t, available(t, other))
			require.NoError(t, other.Release(ctx, 3))
			require.EqualValues(t, 3, available(t, holder))
		})
	}
}

// The expirable semaphore on Redis Cluster: a permit released on one
// client wakes the waiter of another (poll an hour), and a permit's
// handle is renewed by the watchdog there.
func TestClusterExpirableAcrossClients(t *testing.T) {
	cl := redistest.SharedCluster(t)
	for _, m := range clusterModes {
		t.Run(m.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			name := redistest.Name(t)
			holder := newExp(t, clientOn(t, cl.NewClient(t), rlock.WithPubSubMode(m.mode)), name)
			waiterC := clientOn(t, cl.NewClient(t), rlock.WithPubSubMode(m.mode))
			waiter := newExp(t, waiterC, name, semaphore.WithPoll(time.Hour))

			ok, err := holder.TrySetPermits(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok)
			p, err := holder.Acquire(ctx)
			require.NoError(t, err)

			done := make(chan *semaphore.Permit, 1)
			fail := make(chan error, 1)
			go func() {
				q, err := waiter.Acquire(ctx)
				if err != nil {
					fail <- err
					return
				}
				done <- q
			}()
			require.Eventually(t, func() bool { return waiterC.Waiters().Waiters == 1 }, 10*time.Second, time.Millisecond)
			require.NoError(t, holder.Release(ctx, p.ID()), "released by ID, through the semaphore")
			var q *semaphore.Permit
			select {
			case q = <-done:
			case err := <-fail:
				t.Fatal(err)
			}
			avail, held := counts(t, holder)
			require.Zero(t, avail)
			require.EqualValues(t, 1, held)
			require.NoError(t, q.Release(ctx))
			avail, held = counts(t, holder)
			require.EqualValues(t, 1, avail)
			require.Zero(t, held, fmt.Sprintf("permit %s released", q.ID()))
		})
	}
}
