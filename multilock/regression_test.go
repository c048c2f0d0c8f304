package multilock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/reentrant"
)

// Regression (issue 12, defect 11): a lease under 1 ms per call was
// accepted; the members were acquired before one rejected it, and a busy
// member made the call fail with ErrNotObtained instead.
func TestSubMillisecondLeaseIsRejectedBeforeIO(t *testing.T) {
	ctx := context.Background()
	f := newFake("a")
	m := newMulti(t, []rlock.Locker{f})
	for _, lease := range []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond - 1, -time.Millisecond} {
		require.ErrorIs(t, m.LockLease(ctx, lease), rlock.ErrInvalidArgument, "%v", lease)
		require.ErrorIs(t, m.TryLockLease(ctx, lease), rlock.ErrInvalidArgument, "%v", lease)
		require.ErrorIs(t, m.SetLease(ctx, lease), rlock.ErrInvalidArgument, "%v", lease)
	}
	require.Empty(t, f.acquired, "a member was acquired")
	require.Empty(t, f.set, "a member's lease was set")
	require.Zero(t, f.holds)

	// A bad owner ID is rejected before any member is asked, too.
	require.ErrorIs(t, m.TryLock(rlock.WithOwner(ctx, "#bad")), rlock.ErrInvalidArgument)
	require.Empty(t, f.acquired)

	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := newClient(t, b)
		name := redistest.Name(t)
		ls := handles(t, []*reentrant.Client{c, c}, name)
		other := handles(t, []*reentrant.Client{c, c}, name)
		require.NoError(t, other[1].TryLock(ctx)) // a busy member
		m := newMulti(t, ls)
		err := m.TryLockLease(ctx, 500*time.Microsecond)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
		require.NotErrorIs(t, err, rlock.ErrNotObtained)
		require.Zero(t, held(t, ls[0]))
		require.NoError(t, other[1].Unlock(ctx))
	})
}

// Regression (issue 12): a nil context made every entry point panic.
func TestNilContextIsAnError(t *testing.T) {
	f := newFake("a")
	m := newMulti(t, []rlock.Locker{f})
	var nilCtx context.Context
	require.ErrorIs(t, m.Lock(nilCtx), rlock.ErrInvalidArgument)
	require.ErrorIs(t, m.TryLock(nilCtx), rlock.ErrInvalidArgument)
	require.ErrorIs(t, m.LockLease(nilCtx, time.Second), rlock.ErrInvalidArgument)
	require.ErrorIs(t, m.TryLockLease(nilCtx, time.Second), rlock.ErrInvalidArgument)
	require.ErrorIs(t, m.SetLease(nilCtx, time.Second), rlock.ErrInvalidArgument)
	require.ErrorIs(t, m.Unlock(nilCtx), rlock.ErrInvalidArgument)
	require.Empty(t, f.acquired)
	_ = multilock.WithLease // keep the import when cases move
}
