package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/semaphore"
)

// TestReplicaSyncUndoesUnreplicatedSemaphoreAcquire: the semaphores ran
// their acquire scripts without replica sync, so a grant no replica had
// could be lost on failover and handed out again. On a master whose
// replica acknowledges, acquisitions pass; with the replica frozen
// (SIGSTOP, so WAIT times out), TryAcquire and DrainPermits report
// rlock.ErrNotReplicated and give the permits back exactly once, and a
// waiting Acquire keeps trying until the replica runs again.
func TestReplicaSyncUndoesUnreplicatedSemaphoreAcquire(t *testing.T) {
	r := redistest.StartReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := r.Master.NewClient(t)
	c := clientOn(t, rdb, rlock.WithReplicaSync(150*time.Millisecond))
	name := redistest.Name(t)
	s := newSem(t, c, name, semaphore.WithPoll(time.Hour))
	e := newExp(t, c, name+":exp", semaphore.WithPoll(time.Hour))

	ok, err := s.TrySetPermits(ctx, 3)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = e.TrySetPermits(ctx, 3)
	require.NoError(t, err)
	require.True(t, ok)
	// The first acquire may meet a replica still slow to acknowledge:
	// a waiting Acquire rides through that.
	require.NoError(t, s.Acquire(ctx, 1), "the replica acknowledges")
	require.NoError(t, s.Release(ctx, 1))
	p, err := e.Acquire(ctx)
	require.NoError(t, err, "the replica acknowledges")
	require.NoError(t, p.Release(ctx))

	r.Replica.Freeze()
	ok, err = s.TryAcquire(ctx, 2)
	require.ErrorIs(t, err, rlock.ErrNotReplicated)
	require.False(t, ok)
	require.EqualValues(t, 3, available(t, s), "the permits were given back, once")
	drained, err := s.DrainPermits(ctx)
	require.ErrorIs(t, err, rlock.ErrNotReplicated)
	require.Zero(t, drained)
	require.EqualValues(t, 3, available(t, s), "the drained permits were given back, once")

	got, err := e.TryAcquireN(ctx, 2)
	require.ErrorIs(t, err, rlock.ErrNotReplicated)
	require.Nil(t, got)
	avail, held := counts(t, e)
	require.EqualValues(t, 3, avail, "the permits were given back, once")
	require.Zero(t, held)
	drained, err = e.DrainPermits(ctx)
	require.ErrorIs(t, err, rlock.ErrNotReplicated)
	require.Zero(t, drained)
	avail, _ = counts(t, e)
	require.EqualValues(t, 3, avail)

	// Releases are not waited for, as a lock's unlock is not.
	require.NoError(t, s.Release(ctx, 1))
	require.EqualValues(t, 4, available(t, s))

	sDone := make(chan error, 1)
	go func() { sDone <- s.Acquire(ctx, 4) }()
	eDone := make(chan error, 1)
	go func() {
		ps, err := e.AcquireN(ctx, 3)
		if err == nil {
			for _, p := range ps {
				err = p.Release(ctx)
			}
		}
		eDone <- err
	}()
	select {
	case err := <-sDone:
		t.Fatalf("Acquire returned while no replica could acknowledge: %v", err)
	case err := <-eDone:
		t.Fatalf("Expirable.AcquireN returned while no replica could acknowledge: %v", err)
	case <-time.After(500 * time.Millisecond): // a few undone attempts
	}
	r.Replica.Thaw()
	require.NoError(t, <-sDone)
	require.NoError(t, <-eDone)
	require.Zero(t, available(t, s), "the four permits are held, none left over from undone attempts")
	avail, held = counts(t, e)
	require.EqualValues(t, 3, avail)
	require.Zero(t, held)

	// Without replica sync nothing is waited for.
	off := newSem(t, clientOn(t, rdb, rlock.WithoutReplicaSync()), name)
	require.NoError(t, s.Release(ctx, 1))
	r.Replica.Freeze()
	defer r.Replica.Thaw()
	ok, err = off.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
}
