package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/rwlock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.StopSharedAfter(m))
}

func clientOn(t *testing.T, rdb rlock.Redis, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newClient(t *testing.T, b *redistest.Backend, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	return clientOn(t, b.Universal(t), opts...)
}

func newRW(t *testing.T, c *rlock.Client, name string, opts ...rwlock.Option) *rwlock.RWLock {
	t.Helper()
	l, err := rwlock.New(c, name, opts...)
	require.NoError(t, err)
	return l
}

// state reads the lock's state.
func state(t require.TestingT, l *rwlock.RWLock) rwlock.State {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	s, err := l.State(context.Background())
	require.NoError(t, err)
	return s
}

func held(t *testing.T, h interface {
	IsHeld(context.Context) (bool, error)
}) bool {
	t.Helper()
	ok, err := h.IsHeld(context.Background())
	require.NoError(t, err)
	return ok
}

func TestReadersShareWriterExcludes(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c1, c2 := newClient(t, b), newClient(t, b)
		a, z := newRW(t, c1, name), newRW(t, c2, name)

		require.NoError(t, a.ReadLock().Lock(ctx))
		require.NoError(t, z.ReadLock().TryLock(ctx), "readers share")
		require.ErrorIs(t, z.WriteLock().TryLock(z.ReadLock().Ctx()), rlock.ErrUpgrade, "z reads")
		w := newRW(t, c2, name)
		require.ErrorIs(t, w.WriteLock().TryLock(ctx), rlock.ErrNotObtained, "a writer waits for readers")
		require.True(t, held(t, a.ReadLock()))
		require.False(t, held(t, a.WriteLock()))
		s := state(t, a)
		require.Equal(t, "read", s.Mode)
		require.Len(t, s.Readers, 2)
		require.False(t, s.Writing)
		require.Empty(t, s.Waiting, "TryLock never registers")
		locked, err := a.WriteLock().IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked, "the write side is free")
		locked, err = a.ReadLock().IsLocked(ctx)
		require.NoError(t, err)
		require.True(t, locked)

		require.NoError(t, a.ReadLock().Unlock(ctx))
		require.NoError(t, z.ReadLock().Unlock(ctx))
		require.NoError(t, w.WriteLock().TryLock(ctx))
		require.ErrorIs(t, a.ReadLock().TryLock(ctx), rlock.ErrNotObtained, "a writer excludes readers")
		require.ErrorIs(t, a.WriteLock().TryLock(ctx), rlock.ErrNotObtained, "and writers")
		require.NoError(t, w.WriteLock().TryLock(w.WriteLock().Ctx()), "re-entry")
		n, err := w.WriteLock().HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		wr, ok, err := a.Writer(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		owner, err := w.WriteLock().Owner(ctx)
		require.NoError(t, err)
		require.Equal(t, rwlock.Holder{Owner: owner, Holds: 2, Lease: wr.Lease}, wr)
		require.Greater(t, wr.Lease, time.Duration(0))

		require.NoError(t, w.WriteLock().Unlock(ctx))
		require.NoError(t, w.WriteLock().Unlock(ctx))
		require.ErrorIs(t, w.WriteLock().Unlock(ctx), rlock.ErrNotHeld)
		locked, err = a.IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked)
	})
}

// TestDowngrade: the writer takes the read lock, releases the write lock
// and keeps reading; others may read then, not write.
func TestDowngrade(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := newClient(t, b)
		l, other := newRW(t, c, name), newRW(t, c, name)
		require.NoError(t, l.WriteLock().Lock(ctx))
		require.NoError(t, l.ReadLock().Lock(l.WriteLock().Ctx()), "the writer may read")
		require.Equal(t, "write", state(t, l).Mode)
		require.ErrorIs(t, other.ReadLock().TryLock(ctx), rlock.ErrNotObtained)

		require.NoError(t, l.WriteLock().Unlock(ctx))
		require.Equal(t, "read", state(t, l).Mode)
		require.True(t, held(t, l.ReadLock()))
		require.NoError(t, l.ReadLock().Err(), "the read holding goes on")
		require.ErrorIs(t, l.WriteLock().Ctx().Err(), context.Canceled, "the write holding ended by release")
		require.NoError(t, other.ReadLock().TryLock(ctx), "others read now")
		require.ErrorIs(t, other.WriteLock().TryLock(other.ReadLock().Ctx()), rlock.ErrUpgrade)
		require.NoError(t, other.ReadLock().Unlock(ctx))
		require.ErrorIs(t, other.WriteLock().TryLock(ctx), rlock.ErrNotObtained, "nobody writes while l reads")
		require.NoError(t, l.ReadLock().Unlock(ctx))
		require.NoError(t, other.WriteLock().TryLock(ctx))
		require.NoError(t, other.WriteLock().Unlock(ctx))
	})
}

// TestUpgradeRefused: a reader asking for the write lock gets ErrUpgrade at
// once, from Lock too (never waits, never registers), whether or not other
// readers hold; its read holds are untouched.
func TestUpgradeRefused(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		c := newClient(t, b)
		l := newRW(t, c, name)
		require.NoError(t, l.ReadLock().Lock(ctx))
		// The upgrade is asked with a ctx from the read holding (bounded by
		// ctx too); with another ctx it would wait for the reads to end.
		rctx, rcancel := core.Join(ctx, l.ReadLock().Ctx())
		defer rcancel()
		require.ErrorIs(t, l.WriteLock().Lock(rctx), rlock.ErrUpgrade, "alone")
		require.ErrorIs(t, l.WriteLock().LockLease(rctx, time.Minute), rlock.ErrUpgrade)
		other := newRW(t, c, name)
		require.NoError(t, other.ReadLock().Lock(ctx))
		require.ErrorIs(t, l.WriteLock().Lock(rctx), rlock.ErrUpgrade, "beside another reader")
		require.Empty(t, state(t, l).Waiting, "nothing registered")
		n, err := l.ReadLock().HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.NoError(t, l.ReadLock().Unlock(ctx))
		require.NoError(t, other.ReadLock().Unlock(ctx))
		require.NoError(t, l.WriteLock().Lock(ctx), "after releasing its reads")
		require.NoError(t, l.WriteLock().Unlock(ctx))
	})
}

// TestWaitingWriterKeepsNewReadersOut: a writer blocked by a reader shows
// as waiting; new readers are refused, the reader re-enters; when the
// reader leaves the writer is woken (only pub/sub can wake it in time: the
// writer wait and leases are long) and the refused reader gets in after
// the writer's release.
func TestWaitingWriterKeepsNewReadersOut(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		opts := []rwlock.Option{rwlock.WithWriterWait(time.Hour), rwlock.WithLease(time.Hour)}
		c := newClient(t, b, rlock.WithMaxPoll(time.Hour))
		r, w, late := newRW(t, c, name, opts...), newRW(t, c, name, opts...), newRW(t, newClient(t, b), name, opts...)
		require.NoError(t, r.ReadLock().Lock(ctx))
		wrote := make(chan error, 1)
		go func() { wrote <- w.WriteLock().Lock(ctx) }()
		require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, state(c, r).Waiting, 1) }, 10*time.Second, time.Millisecond)
		wowner, err := w.WriteLock().Owner(ctx)
		require.NoError(t, err)
		require.Equal(t, wowner, state(t, r).Waiting[0].Owner)
		require.Greater(t, state(t, r).Waiting[0].Remaining, 59*time.Minute)

		require.ErrorIs(t, late.ReadLock().TryLock(ctx), rlock.ErrNotObtained, "a new reader is kept out")
		require.NoError(t, r.ReadLock().TryLock(ctx), "a reader re-enters")
		read := make(chan error, 1)
		go func() { read <- late.ReadLock().Lock(ctx) }()

		require.NoError(t, r.ReadLock().Unlock(ctx))
		require.NoError(t, r.ReadLock().Unlock(ctx))
		require.NoError(t, <-wrote)
		require.Empty(t, state(t, r).Waiting, "the grant took the writer out")
		select {
		case err := <-read:
			t.Fatalf("a reader got in while the writer writes: %v", err)
		default:
		}
		require.NoError(t, w.WriteLock().Unlock(ctx))
		require.NoError(t, <-read)
		require.NoError(t, late.ReadLock().Unlock(ctx))
	})
}

// TestCancelledLockLeavesNothing: a blocked Lock whose ctx ends returns
// ctx's error promptly and holds nothing; a writer also leaves the
// writer-wait set, so readers it kept out get in at once.
func TestCancelledLockLeavesNothing(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		opts := []rwlock.Option{rwlock.WithWriterWait(time.Hour)}
		c := newClient(t, b, rlock.WithMaxPoll(time.Hour))
		r, w := newRW(t, c, name, opts...), newRW(t, c, name, opts...)
		require.NoError(t, r.ReadLock().Lock(ctx))

		wctx, cancel := context.WithCancel(ctx)
		wrote := make(chan error, 1)
		go func() { wrote <- w.WriteLock().Lock(wctx) }()
		require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, state(c, r).Waiting, 1) }, 10*time.Second, time.Millisecond)
		late := newRW(t, c, name, opts...)
		read := make(chan error, 1)
		go func() { read <- late.ReadLock().Lock(ctx) }() // kept out until the writer leaves
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 2 }, 10*time.Second, time.Millisecond)
		cancel()
		require.ErrorIs(t, <-wrote, context.Canceled)
		require.NoError(t, <-read, "the writer's leaving woke the reader")
		require.Empty(t, state(t, r).Waiting)
		require.False(t, held(t, w.WriteLock()))
		require.NoError(t, late.ReadLock().Unlock(ctx))

		// A reader cancelled while a writer writes holds nothing either.
		require.NoError(t, r.ReadLock().Unlock(ctx))
		require.NoError(t, w.WriteLock().Lock(ctx))
		rctx, rcancel := context.WithCancel(ctx)
		go func() { read <- late.ReadLock().Lock(rctx) }()
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 }, 10*time.Second, time.Millisecond)
		rcancel()
		require.ErrorIs(t, <-read, context.Canceled)
		require.NoError(t, w.WriteLock().Unlock(ctx))
		require.False(t, held(t, late.ReadLock()))
		locked, err := r.IsLocked(ctx)
		require.NoError(t, err)
		require.False(t, locked)
	})
}

// TestForceUnlock: each side deletes only in its own mode; the RWLock's in
// either; holders learn of it from their watchdog.
func TestForceUnlock(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c := newClient(t, b, rlock.WithWatchdogLease(300*time.Millisecond))
		l, op := newRW(t, c, name), newRW(t, newClient(t, b), name)
		require.NoError(t, l.ReadLock().Lock(ctx))
		ok, err := op.WriteLock().ForceUnlock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "the write side leaves a read lock alone")
		ok, err = op.ReadLock().ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		select {
		case <-l.ReadLock().Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the reader was not told")
		}
		require.ErrorIs(t, l.ReadLock().Err(), rlock.ErrLockLost)
		require.ErrorIs(t, l.ReadLock().Unlock(ctx), rlock.ErrNotHeld)

		require.NoError(t, l.WriteLock().Lock(ctx))
		ok, err = op.ReadLock().ForceUnlock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "the read side leaves a write lock alone")
		ok, err = op.ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = op.ForceUnlock(ctx)
		require.NoError(t, err)
		require.False(t, ok, "nothing left")
		select {
		case <-l.WriteLock().Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the writer was not told")
		}
		require.ErrorIs(t, l.WriteLock().Err(), rlock.ErrLockLost)
	})
}

// TestReadHoldsRenewedAndExpireAlone: the watchdog renews read holds
// (their timeout keys) past their lease; a reader with an explicit short
// lease runs out alone, reported lost, while the other keeps reading.
func TestReadHoldsRenewedAndExpireAlone(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		const lease = 300 * time.Millisecond
		c := newClient(t, b, rlock.WithWatchdogLease(lease))
		long, short := newRW(t, c, name), newRW(t, c, name, rwlock.WithLease(lease))
		require.NoError(t, long.ReadLock().Lock(ctx))
		require.NoError(t, short.ReadLock().Lock(ctx))
		select {
		case <-short.ReadLock().Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the short lease never ran out")
		}
		require.ErrorIs(t, short.ReadLock().Err(), rlock.ErrLockLost)
		require.EventuallyWithT(t, func(c *assert.CollectT) { require.Len(c, state(c, long).Readers, 1) }, 10*time.Second, 5*time.Millisecond)
		renewed := c.WatchdogStats().Renewed
		require.Eventually(t, func() bool { return c.WatchdogStats().Renewed > renewed+3 }, 10*time.Second, 5*time.Millisecond)
		require.True(t, held(t, long.ReadLock()), "renewed past several leases")
		require.NoError(t, long.ReadLock().Err())
		require.NoError(t, long.ReadLock().TryLock(ctx), "re-entry")
		rd := state(t, long).Readers[0]
		require.Equal(t, 2, rd.Holds)
		require.Greater(t, rd.Lease, time.Duration(0))
		require.LessOrEqual(t, rd.Lease, lease)
		require.NoError(t, long.ReadLock().SetLease(ctx, time.Hour), "an explicit lease for both holds")
		require.Greater(t, state(t, long).Readers[0].Lease, 59*time.Minute)
		require.NoError(t, long.ReadLock().Unlock(ctx))
		require.NoError(t, long.ReadLock().Unlock(ctx))
		require.NoError(t, long.ReadLock().Err())
	})
}

// TestBadInput: every bad argument is ErrInvalidArgument, never a panic.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	b := redistest.Mini(t)
	c := newClient(t, b)
	_, err := rwlock.New(nil, "x")
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = rwlock.New(c, "")
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = rwlock.New(c, "x", rwlock.WithLease(-time.Second))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = rwlock.New(c, "x", rwlock.WithLease(time.Microsecond))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = rwlock.New(c, "x", rwlock.WithWriterWait(time.Millisecond))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = rwlock.New(c, "x", nil)
	require.NoError(t, err, "a nil option is ignored")
	l := newRW(t, c, "x")
	require.ErrorIs(t, l.ReadLock().LockLease(ctx, -1), rlock.ErrInvalidArgument)
	require.ErrorIs(t, l.WriteLock().TryLockLease(ctx, -1), rlock.ErrInvalidArgument)
	require.ErrorIs(t, l.ReadLock().SetLease(ctx, -1), rlock.ErrInvalidArgument)
	var nilCtx context.Context
	require.ErrorIs(t, l.ReadLock().Lock(nilCtx), rlock.ErrInvalidArgument)
	_, err = l.State(nilCtx)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	require.ErrorIs(t, l.WriteLock().Lock(rlock.WithOwner(ctx, "")), rlock.ErrInvalidArgument)
	require.NoError(t, b.Universal(t).Set(ctx, "str", "v", 0).Err())
	require.Error(t, newRW(t, c, "str").WriteLock().TryLock(ctx), "a key of another type")
	require.Error(t, newRW(t, c, "str").ReadLock().Lock(ctx), "a key of another type")
}
