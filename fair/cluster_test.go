package fair_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestClusterFairLock runs the fair lock through a ClusterClient on names
// in every master's slot ranges (and user hash tags): queue, deadlines,
// token and latches share the name's slot, grants follow queue order, and
// a release on any master wakes the head waiter over one pub/sub
// connection to some node. Only a wake-up can grant in time here: leases,
// queue timeouts and max-poll are an hour.
func TestClusterFairLock(t *testing.T) {
	cl := redistest.SharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	holderC := clientOn(t, cl.NewClient(t), rlock.WithMaxPoll(time.Hour))
	waitC := clientOn(t, cl.NewClient(t), rlock.WithMaxPoll(time.Hour))
	base := redistest.Name(t)
	var names []string
	for _, m := range cl.Masters(t) {
		for _, r := range cl.SlotRanges(t, m) {
			for _, slot := range []int{r[0], r[1]} {
				n := redistest.KeyInSlot(base, slot)
				names = append(names, n, "{"+n+"}:fair")
			}
		}
	}
	for _, name := range names {
		opts := []fair.Option{fair.WithLease(time.Hour), fair.WithQueueTimeout(time.Hour), fair.WithFencing()}
		holder := newLock(t, holderC, name, opts...)
		require.NoError(t, holder.Lock(ctx), name)
		tok := holder.Token()
		a, z := newLock(t, waitC, name, opts...), newLock(t, waitC, name, opts...)
		aDone := lockAsync(ctx, a)
		waitQueued(t, holder, 1)
		zDone := lockAsync(ctx, z)
		waitQueued(t, holder, 2)
		require.ErrorIs(t, newLock(t, holderC, name).TryLock(ctx), rlock.ErrNotObtained, "no overtaking")

		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-aDone, name)
		require.Greater(t, a.Token(), tok)
		select {
		case err := <-zDone:
			t.Fatalf("%s: the second waiter was granted first: %v", name, err)
		default:
		}
		require.NoError(t, a.Unlock(ctx))
		require.NoError(t, <-zDone, name)
		ok, err := holder.ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.ErrorIs(t, z.Unlock(ctx), rlock.ErrNotHeld)
		q, err := holder.Queue(ctx)
		require.NoError(t, err)
		require.Empty(t, q)
	}
}
