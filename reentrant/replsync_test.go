package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// TestReplicaSyncUndoesUnreplicatedAcquisition: with the replica frozen
// (SIGSTOP), no replica can acknowledge, so an acquisition is undone: TryLock
// reports ErrNotReplicated and leaves no lock; a waiting Lock keeps trying
// and succeeds once the replica runs again.
func TestReplicaSyncUndoesUnreplicatedAcquisition(t *testing.T) {
	r := redistest.StartReplicated(t)
	ctx := context.Background()
	rdb := r.Master.NewClient(t)
	c := clientOn(t, rdb, reentrant.WithReplicaSync(150*time.Millisecond))
	d, on := c.ReplicaSync()
	require.True(t, on)
	require.Equal(t, 150*time.Millisecond, d)
	name := redistest.Name(t)
	l := newLock(t, c, name)
	require.NoError(t, l.Lock(ctx), "the replica acknowledges")
	require.NoError(t, l.Unlock(ctx))

	r.Replica.Freeze()
	require.ErrorIs(t, l.TryLock(ctx), rlock.ErrNotReplicated)
	n, err := rdb.Exists(ctx, name).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the unreplicated acquisition was undone")
	fl := newFair(t, c, name+":fair")
	require.ErrorIs(t, fl.TryLock(ctx), rlock.ErrNotReplicated, "the fair lock too")

	done := make(chan error, 1)
	go func() { done <- l.Lock(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("Lock returned while no replica could acknowledge: %v", err)
	case <-time.After(500 * time.Millisecond): // a few undone attempts
	}
	r.Replica.Thaw()
	require.NoError(t, <-done)
	require.NoError(t, l.Unlock(ctx))

	off := newLock(t, clientOn(t, rdb, reentrant.WithoutReplicaSync()), name)
	r.Replica.Freeze()
	defer r.Replica.Thaw()
	require.NoError(t, off.TryLock(ctx), "without replica sync nothing is waited for")
	require.NoError(t, off.Unlock(ctx))
}

func newFair(t *testing.T, c *reentrant.Client, name string) *fair.Lock {
	t.Helper()
	l, err := fair.New(c, name)
	require.NoError(t, err)
	return l
}

// TestReplicaSyncedLockSurvivesSentinelFailover: the master is killed right
// after an acquisition with replica sync (on by default); once Sentinel has
// promoted the replica, the same owner still holds the lock, others are
// excluded, and the holder unlocks it through the failover client.
func TestReplicaSyncedLockSurvivesSentinelFailover(t *testing.T) {
	st := redistest.StartSentinel(t)
	ctx := context.Background()
	c := clientOn(t, st.NewFailoverClient(t), shortWatchdog(30*time.Second))
	_, on := c.ReplicaSync()
	require.True(t, on, "on by default")
	name := redistest.Name(t)
	l := newLock(t, c, name, reentrant.WithLease(time.Minute))
	require.NoError(t, l.Lock(ctx))
	st.Master.Kill()
	st.WaitFailover(t, st.Master)

	other := newLock(t, clientOn(t, st.NewFailoverClient(t)), name)
	require.Eventually(t, func() bool {
		n, err := l.HoldCount(ctx)
		return err == nil && n == 1
	}, redistest.FailoverTimeout, 10*time.Millisecond, "same owner after the failover")
	require.ErrorIs(t, other.TryLock(ctx), rlock.ErrNotObtained)
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, other.TryLock(ctx))
	require.NoError(t, other.Unlock(ctx))
}
