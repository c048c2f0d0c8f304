package multilock_test

import (
	"context"
	"fmt"
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
		ls := handles(t, []*rlock.Client{c, c}, name)
		other := handles(t, []*rlock.Client{c, c}, name)
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
}

// ttl returns a reentrant or fair member's remaining TTL.
func ttl(t *testing.T, l rlock.Locker) time.Duration {
	t.Helper()
	d, err := l.(interface {
		TTL(context.Context) (time.Duration, error)
	}).TTL(context.Background())
	require.NoError(t, err)
	return d
}

// stillRenewed checks that the owner's watchdog hold on l outlives many
// times lease, and that nothing reports it lost.
func stillRenewed(t *testing.T, l *reentrant.Lock, lease time.Duration) {
	t.Helper()
	require.Never(t, func() bool {
		locked, err := l.IsLocked(context.Background())
		return err != nil || !locked
	}, 5*lease, lease/10, "the hold expired unrenewed")
	require.NoError(t, l.Err())
	select {
	case <-l.Done():
		t.Fatal("the hold's holding period ended")
	default:
	}
}

// Regression (issue 12, defect 3, MultiLock form): an owner holds a in
// watchdog mode and takes a MultiLock with an explicit lease over it. The
// MultiLock set the lease on every member, a's re-entry included, which
// stopped a's renewal; after the MultiLock's Unlock the outer hold expired
// and nothing reported it.
func TestMultiLockLeaseDoesNotShortenAHoldItDidNotCreate(t *testing.T) {
	const lease = 200 * time.Millisecond
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b, rlock.WithWatchdogLease(2*time.Second))
		ls := handles(t, []*rlock.Client{c, c}, redistest.Name(t))
		a := ls[0].(*reentrant.Lock)
		require.NoError(t, a.Lock(ctx)) // the outer hold, in watchdog mode

		m := newMulti(t, ls, multilock.WithLease(lease))
		require.NoError(t, m.Lock(a.Ctx())) // re-enters a
		require.Equal(t, 2, held(t, a))
		require.Greater(t, ttl(t, a), time.Second, "the re-entered member lost its watchdog lease")
		require.LessOrEqual(t, ttl(t, ls[1]), lease, "the member the MultiLock took has its lease")

		require.NoError(t, m.Unlock(ctx))
		require.Equal(t, 1, held(t, a))
		require.Zero(t, held(t, ls[1]))
		stillRenewed(t, a, lease)
		require.NoError(t, a.Unlock(ctx))
	})
}

// The same through a nested MultiLock: the outer lease reaches the
// members the inner one took, never the hold the owner had before.
func TestNestedMultiLockLeaseDoesNotShortenAHoldItDidNotCreate(t *testing.T) {
	const lease = 200 * time.Millisecond
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b, rlock.WithWatchdogLease(2*time.Second))
		ls := handles(t, []*rlock.Client{c, c, c}, redistest.Name(t))
		a := ls[0].(*reentrant.Lock)
		require.NoError(t, a.Lock(ctx))

		inner := newMulti(t, ls[:2])
		outer := newMulti(t, []rlock.Locker{inner, ls[2]}, multilock.WithLease(lease))
		require.NoError(t, outer.Lock(a.Ctx())) // re-enters a
		require.Greater(t, ttl(t, a), time.Second, "the re-entered member lost its watchdog lease")
		require.LessOrEqual(t, ttl(t, ls[1]), lease)
		require.LessOrEqual(t, ttl(t, ls[2]), lease)

		// Re-entering the whole MultiLock changes no lease either.
		require.NoError(t, outer.Lock(outer.Ctx()))
		require.NoError(t, outer.Unlock(ctx))
		require.NoError(t, outer.Unlock(ctx))
		require.Equal(t, 1, held(t, a))
		stillRenewed(t, a, lease)
		require.NoError(t, a.Unlock(ctx))
	})
}

// Regression (issue 12, suspicion on the combinators' loss watchers): the
// MultiLock read a member's Err from the handle, whose last holding period
// may already be another owner's. Owner x's hold on a member is lost,
// owner y takes that member through the same handle, and x's Unlock finds
// its hold gone: the MultiLock reported a clean end.
func TestMemberLossIsReadFromItsOwnHoldingPeriod(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		xctx, yctx := rlock.WithOwner(ctx, "x"), rlock.WithOwner(ctx, "y")
		c := newClient(t, b)
		name := redistest.Name(t)
		ls := handles(t, []*rlock.Client{c, c}, name)
		a := ls[0].(*reentrant.Lock)
		m := newMulti(t, ls)
		require.NoError(t, m.Lock(xctx))

		_, err := handles(t, []*rlock.Client{c}, name)[0].(*reentrant.Lock).ForceUnlock(ctx)
		require.NoError(t, err)
		require.NoError(t, a.Lock(yctx)) // the handle's last holding period is now y's

		err = m.Unlock(xctx)
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		require.ErrorContains(t, err, "member 0")
		<-m.Done()
		require.ErrorIs(t, m.Err(), rlock.ErrLockLost, "x's loss of member 0 went unreported")
		require.ErrorContains(t, m.Err(), "member 0")
		require.NoError(t, a.Unlock(yctx))
	})
}

// Regression (issue 12, defect 10, MultiLock form): a renewal that ran on
// the server after a member's last release, and whose reply was read
// before the release's, ended the member's holding period as lost, and
// the MultiLock reported a loss after a clean Unlock. Renewing every
// millisecond makes that window likely on every few cycles.
func TestCleanUnlockIsNotReportedAsLoss(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b, rlock.WithWatchdogLease(200*time.Millisecond), rlock.WithWatchdogInterval(time.Millisecond))
		m := newMulti(t, handles(t, []*rlock.Client{c, c}, redistest.Name(t)))
		for i := range 200 {
			require.NoError(t, m.Lock(ctx))
			require.NoError(t, m.Unlock(ctx))
			<-m.Done()
			require.NoError(t, m.Err(), "cycle %d", i)
		}
	})
}

// Regression (quorum form of issue 12, defect 3): an owner holds a in
// watchdog mode and takes a quorum MultiLock over a, b and c. SetLease
// set the lease on every member that granted, a's re-entry included,
// which stopped a's renewal: a's TTL became the MultiLock's 300 ms and,
// after the MultiLock's Unlock, the outer hold expired unrenewed.
func TestQuorumSetLeaseDoesNotShortenAHoldItDidNotCreate(t *testing.T) {
	const lease = 300 * time.Millisecond
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b, rlock.WithWatchdogLease(2*time.Second))
		ls := handles(t, []*rlock.Client{c, c, c}, redistest.Name(t))
		a := ls[0].(*reentrant.Lock)
		require.NoError(t, a.Lock(ctx)) // the outer hold, in watchdog mode

		m := newMulti(t, ls, multilock.WithQuorum(2))
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.SetLease(ctx, lease))
		require.Greater(t, ttl(t, a), time.Second, "the re-entered member lost its watchdog lease")
		require.LessOrEqual(t, ttl(t, ls[1]), lease, "the members the MultiLock took have its lease")
		require.LessOrEqual(t, ttl(t, ls[2]), lease)

		require.NoError(t, m.Unlock(ctx))
		require.Equal(t, 1, held(t, a))
		stillRenewed(t, a, lease)
		require.NoError(t, a.Unlock(ctx))
	})
}

// All mode's own SetLease leaves a hold the owner had before alone too.
func TestAllModeSetLeaseDoesNotShortenAHoldItDidNotCreate(t *testing.T) {
	const lease = 300 * time.Millisecond
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b, rlock.WithWatchdogLease(2*time.Second))
		ls := handles(t, []*rlock.Client{c, c}, redistest.Name(t))
		a := ls[0].(*reentrant.Lock)
		require.NoError(t, a.Lock(ctx))

		m := newMulti(t, ls)
		require.NoError(t, m.Lock(a.Ctx())) // re-enters a
		require.NoError(t, m.SetLease(ctx, lease))
		require.Greater(t, ttl(t, a), time.Second, "the re-entered member lost its watchdog lease")
		require.LessOrEqual(t, ttl(t, ls[1]), lease)
		require.False(t, m.Until().After(a.Until()), "Until is within the re-entered member's protection")

		require.NoError(t, m.Unlock(ctx))
		require.Equal(t, 1, held(t, a))
		stillRenewed(t, a, lease)
		require.NoError(t, a.Unlock(ctx))
	})
}

// A quorum MultiLock nested in an all-mode one, and the reverse: the
// outer MultiLock's lease, given at acquisition or by SetLease, reaches
// only the holds the inner one created.
func TestNestedQuorumLeaseDoesNotShortenAHoldItDidNotCreate(t *testing.T) {
	const lease = 300 * time.Millisecond
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b, rlock.WithWatchdogLease(2*time.Second))
		for _, quorumInside := range []bool{true, false} {
			ls := handles(t, []*rlock.Client{c, c, c, c}, fmt.Sprintf("%s:%v", redistest.Name(t), quorumInside))
			a := ls[0].(*reentrant.Lock)
			require.NoError(t, a.Lock(ctx))

			var inner, outer *multilock.MultiLock
			if quorumInside {
				inner = newMulti(t, ls[:3], multilock.WithQuorum(2))
				outer = newMulti(t, []rlock.Locker{inner, ls[3]}, multilock.WithLease(lease))
			} else {
				inner = newMulti(t, ls[:2])
				outer = newMulti(t, []rlock.Locker{inner, ls[2], ls[3]}, multilock.WithQuorum(2), multilock.WithLease(lease))
			}
			require.NoError(t, outer.Lock(ctx))
			require.Greater(t, ttl(t, a), time.Second, "quorum inside %v: the acquisition shortened the re-entered member", quorumInside)
			require.NoError(t, outer.SetLease(ctx, lease))
			require.Greater(t, ttl(t, a), time.Second, "quorum inside %v: SetLease shortened the re-entered member", quorumInside)
			require.LessOrEqual(t, ttl(t, ls[1]), lease, "quorum inside %v", quorumInside)
			require.LessOrEqual(t, ttl(t, ls[3]), lease, "quorum inside %v", quorumInside)

			require.NoError(t, outer.Unlock(ctx))
			require.Equal(t, 1, held(t, a))
			stillRenewed(t, a, lease)
			require.NoError(t, a.Unlock(ctx))
		}
	})
}

// A quorum MultiLock with an explicit lease reported Until from its lease
// alone, beyond what a re-entered member protects: the owner's watchdog
// hold on a, extended by the re-entry, is renewed to the watchdog lease
// again, well before the MultiLock's lease runs out.
func TestQuorumUntilIsBoundByAReenteredMember(t *testing.T) {
	const watchdog = time.Second
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b, rlock.WithWatchdogLease(watchdog))
		ls := handles(t, []*rlock.Client{c, c, c}, redistest.Name(t))
		a := ls[0].(*reentrant.Lock)
		require.NoError(t, a.Lock(ctx))

		m := newMulti(t, ls, multilock.WithQuorum(3))
		require.NoError(t, m.TryLockLease(a.Ctx(), 10*time.Second)) // re-enters a
		require.False(t, m.Until().After(a.Until()), "Until %v is beyond the re-entered member's %v",
			m.Until().Format(time.StampMilli), a.Until().Format(time.StampMilli))
		require.NoError(t, m.SetLease(ctx, 10*time.Second))
		require.False(t, m.Until().After(a.Until()), "after SetLease")
		require.NoError(t, m.Unlock(ctx))
		require.NoError(t, a.Unlock(ctx))

		// With a quorum of 2, the other two members protect the lease.
		require.NoError(t, a.Lock(ctx))
		m = newMulti(t, ls, multilock.WithQuorum(2))
		require.NoError(t, m.TryLockLease(ctx, 10*time.Second))
		require.True(t, m.Until().After(time.Now().Add(5*time.Second)), "quorum 2: Until %v", m.Until())
		require.NoError(t, m.Unlock(ctx))
		require.NoError(t, a.Unlock(ctx))
	})
}
