package latch_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
)

// TestReplicaSyncReportsUnreplicatedLatchWrites: the latch's writes ran
// without replica sync, so a count set or counted down on a master whose
// replica never had it could vanish on failover unnoticed (a lost
// TrySetCount opens the gate early, a lost CountDown keeps it shut). On a
// master whose replica acknowledges they pass; with the replica frozen
// (SIGSTOP, so WAIT times out), each write that changed the latch stands
// on the master and reports rlock.ErrMayBeLost; one that changed nothing
// reports no error.
func TestReplicaSyncReportsUnreplicatedLatchWrites(t *testing.T) {
	r := redistest.StartReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := r.Master.NewClient(t)
	c := clientOn(t, rdb, rlock.WithReplicaSync(150*time.Millisecond))
	name := redistest.Name(t)
	l := newLatch(t, c, name)

	acked(t, c, name)
	ok, err := l.TrySetCount(ctx, 3)
	require.NoError(t, err, "the replica acknowledges")
	require.True(t, ok)
	require.NoError(t, l.CountDown(ctx))

	r.Replica.Freeze()
	err = l.CountDown(ctx)
	require.ErrorIs(t, err, rlock.ErrMayBeLost)
	n, err := l.Count(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the count-down stands on the master, once")
	ok, err = l.TrySetCount(ctx, 5)
	require.NoError(t, err, "nothing set, nothing to lose")
	require.False(t, ok)

	other := newLatch(t, c, name+":other")
	ok, err = other.TrySetCount(ctx, 2)
	require.ErrorIs(t, err, rlock.ErrMayBeLost)
	require.True(t, ok, "set on the master")
	ok, err = other.Delete(ctx)
	require.ErrorIs(t, err, rlock.ErrMayBeLost)
	require.True(t, ok)
	require.NoError(t, other.CountDown(ctx), "no count: nothing written")

	r.Replica.Thaw()
	r.WaitSynced(t)
	acked(t, c, name)
	require.NoError(t, l.CountDown(ctx), "acknowledged again")
	require.NoError(t, l.Await(ctx))
}

// acked waits until the replica acknowledges the writes of c (a replica
// just started, or just thawed, may take longer than the WAIT timeout the
// first time): it sets the count of throwaway latches until one set
// passes.
func acked(t *testing.T, c *rlock.Client, name string) {
	t.Helper()
	i := 0
	var last error // a failure other than the one waited out
	require.Eventually(t, func() bool {
		i++
		_, err := newLatch(t, c, fmt.Sprintf("%s:warm-up-%d", name, i)).TrySetCount(context.Background(), 1)
		if err != nil && !errors.Is(err, rlock.ErrMayBeLost) {
			last = err
		}
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the replica acknowledges")
	require.NoError(t, last)
}
