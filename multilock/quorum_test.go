package multilock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/fence"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/reentrant"
)

func TestQuorumBadInput(t *testing.T) {
	f := []rlock.Locker{newFake("a"), newFake("b")}
	for _, opts := range [][]multilock.Option{
		{multilock.WithQuorum(0)},
		{multilock.WithQuorum(3)},
		{multilock.WithQuorum(1), multilock.WithMemberWait(time.Millisecond, time.Second)},
		{multilock.WithReplyWait(time.Second)},
		{multilock.WithRetryDelay(time.Millisecond, time.Second)},
		{multilock.WithQuorum(1), multilock.WithReplyWait(0)},
		{multilock.WithQuorum(1), multilock.WithRetryDelay(time.Second, time.Millisecond)},
		{multilock.WithMemberNames("a")},
	} {
		_, err := multilock.New(f, opts...)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument, "%d options", len(opts))
	}
	m := newMulti(t, f, multilock.WithQuorum(2), multilock.WithReplyWait(time.Second), multilock.WithRetryDelay(time.Millisecond, time.Second))
	require.Equal(t, 2, m.Quorum())
	require.Equal(t, 2, newMulti(t, f).Quorum(), "all mode: every member")
}

// A quorum of fair locks on three servers: held with one member taken by
// another owner, not with two; a failed attempt leaves nothing behind.
func TestQuorumOfFairLocks(t *testing.T) {
	eachServers(t, 3, func(t *testing.T, _ []*redistest.Backend, cs []*rlock.Client) {
		ctx := context.Background()
		name := redistest.Name(t)
		fairs := func() []rlock.Locker {
			ls := make([]rlock.Locker, len(cs))
			for i, c := range cs {
				l, err := fair.New(c, name)
				require.NoError(t, err)
				ls[i] = l
			}
			return ls
		}
		mine, theirs := fairs(), fairs()
		m := newMulti(t, mine, multilock.WithQuorum(2))
		require.NoError(t, theirs[0].TryLock(ctx))
		require.NoError(t, m.TryLock(ctx))
		isHeld(t, m, true)
		require.True(t, time.Now().Before(m.Until()))
		require.NoError(t, m.Unlock(ctx))
		isHeld(t, m, false)

		require.NoError(t, theirs[2].TryLock(ctx))
		err := m.TryLock(ctx)
		require.ErrorIs(t, err, rlock.ErrNotObtained)
		var e *multilock.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, 1, e.Held)
		require.Len(t, e.Failures, 2)
		require.Equal(t, []int{0, 2}, []int{e.Failures[0].Index, e.Failures[1].Index})
		require.Eventually(t, func() bool { // the rollback of member 1
			locked, err := mine[1].(*fair.Lock).IsLocked(ctx)
			return err == nil && !locked
		}, 10*time.Second, 5*time.Millisecond)
		for _, i := range []int{0, 2} {
			require.NoError(t, theirs[i].Unlock(ctx))
		}
	})
}

// A quorum over three lock names on one Redis (also one Redis Cluster):
// members need not be on independent servers.
func TestQuorumOverMembersOnOneServerOrCluster(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c, err := rlock.NewClient(b.Universal(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		name := redistest.Name(t)
		ls := handles(t, []*rlock.Client{c, c, c}, name)
		other := handles(t, []*rlock.Client{c, c, c}, name)
		require.NoError(t, other[1].TryLock(ctx))
		m := newMulti(t, ls, multilock.WithQuorum(2), multilock.WithLease(time.Minute))
		require.NoError(t, m.Lock(ctx))
		isHeld(t, m, true)
		require.NoError(t, m.TryLock(m.Ctx())) // a re-entry: no I/O
		require.Equal(t, 1, held(t, ls[0]))
		require.Zero(t, held(t, ls[1]))
		require.NoError(t, m.Unlock(ctx))
		require.NoError(t, m.Unlock(ctx))
		require.ErrorIs(t, m.Unlock(ctx), rlock.ErrNotHeld)
		for _, i := range []int{0, 2} {
			require.Zero(t, held(t, ls[i]))
		}
		require.NoError(t, other[1].Unlock(ctx))
	})
}

func isHeld(t *testing.T, l rlock.Locker, want bool) {
	t.Helper()
	got, err := l.IsHeld(context.Background())
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// IsHeld asks the members: every one in all mode, k in quorum mode, for
// the caller's owner only.
func TestIsHeld(t *testing.T) {
	eachServers(t, 3, func(t *testing.T, _ []*redistest.Backend, cs []*rlock.Client) {
		ctx := context.Background()
		xctx := rlock.WithOwner(ctx, "x")
		name := redistest.Name(t)
		all := newMulti(t, handles(t, cs, name))
		isHeld(t, all, false)
		require.NoError(t, all.Lock(xctx))
		isHeld(t, all, false) // the handle's own owner holds nothing
		held, err := all.IsHeld(xctx)
		require.NoError(t, err)
		require.True(t, held)
		_, err = all.Members()[2].(*reentrant.Lock).ForceUnlock(ctx)
		require.NoError(t, err)
		held, err = all.IsHeld(xctx)
		require.NoError(t, err)
		require.False(t, held, "all mode: one member gone")

		q := newMulti(t, handles(t, cs, name+":q"), multilock.WithQuorum(2))
		require.NoError(t, q.Lock(xctx))
		_, err = q.Members()[0].(*reentrant.Lock).ForceUnlock(ctx)
		require.NoError(t, err)
		held, err = q.IsHeld(xctx)
		require.NoError(t, err)
		require.True(t, held, "quorum mode: two of three are enough")
		_, err = q.Members()[1].(*reentrant.Lock).ForceUnlock(ctx)
		require.NoError(t, err)
		held, err = q.IsHeld(xctx)
		require.NoError(t, err)
		require.False(t, held)
	})
}

// Ctx is the holding period: its cause wraps rlock.ErrLockLost and names
// the member when a member is lost (all mode) or too many are (quorum
// mode), and is context.Canceled after a release.
func TestCtxCauseNamesTheLostMember(t *testing.T) {
	eachServers(t, 3, func(t *testing.T, _ []*redistest.Backend, cs []*rlock.Client) {
		ctx := context.Background()
		name := redistest.Name(t)
		for _, tc := range []struct {
			mode string
			opts []multilock.Option
			kill []int
		}{
			{"all", nil, []int{1}},
			{"quorum", []multilock.Option{multilock.WithQuorum(2)}, []int{0, 2}},
		} {
			ls := handles(t, cs, name+":"+tc.mode)
			m := newMulti(t, ls, tc.opts...)
			require.Error(t, m.Ctx().Err(), "%s: not cancelled before the first acquisition", tc.mode)
			require.NoError(t, m.Lock(ctx))
			hctx := m.Ctx()
			require.NoError(t, hctx.Err())
			for _, i := range tc.kill {
				_, err := ls[i].(*reentrant.Lock).ForceUnlock(ctx)
				require.NoError(t, err)
			}
			<-hctx.Done()
			cause := context.Cause(hctx)
			require.ErrorIs(t, cause, rlock.ErrLockLost, tc.mode)
			require.Equal(t, cause, m.Err())
			var e *multilock.Error
			require.ErrorAs(t, cause, &e)
			for _, i := range tc.kill {
				require.ErrorContains(t, cause, fmt.Sprintf("member %d", i), tc.mode)
			}
			require.ErrorIs(t, m.Unlock(ctx), rlock.ErrNotHeld)

			require.NoError(t, m.Lock(ctx))
			hctx = m.Ctx()
			require.NoError(t, m.Unlock(ctx))
			<-hctx.Done()
			require.Equal(t, context.Canceled, context.Cause(hctx), tc.mode)
			require.NoError(t, m.Err())
			require.True(t, m.Until().IsZero(), "%s: Until after the release", tc.mode)
		}
	}, rlock.WithWatchdogLease(300*time.Millisecond)) // the watchdog finds the loss soon
}

// In watchdog mode Until is the members' watchdog lease from their last
// renewal, less the drift: it moves on as the watchdog renews, in all mode
// (the earliest member) and in quorum mode (the k-th latest).
func TestUntilAdvancesWithWatchdogRenewals(t *testing.T) {
	const lease = 300 * time.Millisecond
	eachServers(t, 3, func(t *testing.T, _ []*redistest.Backend, cs []*rlock.Client) {
		ctx := context.Background()
		name := redistest.Name(t)
		for _, opts := range [][]multilock.Option{nil, {multilock.WithQuorum(2)}} {
			ls := handles(t, cs, fmt.Sprintf("%s:%d", name, len(opts)))
			m := newMulti(t, ls, opts...)
			require.True(t, m.Until().IsZero())
			before := time.Now()
			require.NoError(t, m.Lock(ctx))
			first := m.Until()
			require.True(t, first.After(before), "Until is in the future")
			require.False(t, first.After(time.Now().Add(lease)), "Until is within the watchdog lease")
			if len(opts) == 0 {
				earliest := ls[0].(*reentrant.Lock).Until()
				for _, l := range ls {
					earliest = minTime(earliest, l.(*reentrant.Lock).Until())
				}
				// At most the earliest member's Until less the drift (of
				// the lease left at the acquisition: 1 ms of slack).
				require.False(t, first.After(earliest.Add(-multilock.Drift(lease)+time.Millisecond)), "all mode: the earliest member's, less the drift")
			}
			require.Eventually(t, func() bool { return m.Until().After(first.Add(lease / 2)) },
				10*time.Second, 10*time.Millisecond, "Until does not move on with renewals")
			require.NoError(t, m.Err())
			require.NoError(t, m.Unlock(ctx))
			require.True(t, m.Until().IsZero())
		}
	}, rlock.WithWatchdogLease(lease))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// A release in flight is a fence: the owner's next attempt on that member
// waits for it instead of being undone by it later.
func TestNextAttemptWaitsForAPendingRelease(t *testing.T) {
	ctx := context.Background()
	a := &gated{fake: newFake("a"), gate: make(chan struct{})}
	b, c := newFake("b"), newFake("c")
	m := newMulti(t, []rlock.Locker{a, b, c}, multilock.WithQuorum(2), multilock.WithReplyWait(20*time.Millisecond))
	boom := fmt.Errorf("busy: %w", rlock.ErrNotObtained)
	b.failLock, c.failLock = boom, boom
	require.ErrorIs(t, m.TryLock(ctx), rlock.ErrNotObtained) // a granted; its release hangs
	require.Len(t, a.acquired, 1)

	b.failLock, c.failLock = nil, nil
	require.NoError(t, m.TryLock(ctx)) // b and c: a is fenced off
	a.mu.Lock()
	require.Len(t, a.acquired, 1, "a was asked while its release was in flight")
	a.mu.Unlock()
	close(a.gate)
	require.NoError(t, m.Unlock(ctx))
	require.Eventually(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.holds == 0
	}, 10*time.Second, time.Millisecond)
}

// gated is a fake whose Unlock waits for gate.
type gated struct {
	*fake
	gate chan struct{}
}

func (g *gated) Unlock(ctx context.Context) error {
	<-g.gate
	return g.fake.Unlock(ctx)
}

// A member that answers only after the reply wait (here one that ignores
// its ctx) costs the attempt the reply wait, not its own time; the grant it
// reports late is released, and the owner's next attempt on that member
// waits for that release.
func TestLateMemberAnswerIsReleased(t *testing.T) {
	ctx := context.Background()
	a := &slowGrant{fake: newFake("a"), gate: make(chan struct{})}
	b, c := newFake("b"), newFake("c")
	m := newMulti(t, []rlock.Locker{a, b, c}, multilock.WithQuorum(2), multilock.WithReplyWait(20*time.Millisecond))
	done := make(chan error, 1)
	go func() { done <- m.TryLock(ctx) }()
	select {
	case err := <-done:
		require.NoError(t, err) // b and c
	case <-time.After(10 * time.Second):
		t.Fatal("TryLock waited for a member past the reply wait")
	}
	require.Equal(t, 1, fence.InFlight(), "a's late answer is fenced")
	close(a.gate) // a grants now, after the attempt stopped waiting
	require.Eventually(t, func() bool { return fence.InFlight() == 0 }, 10*time.Second, time.Millisecond)
	a.mu.Lock()
	require.Len(t, a.acquired, 1)
	require.Zero(t, a.holds, "a's late grant was kept")
	a.mu.Unlock()
	require.NoError(t, m.Unlock(ctx))
}

// slowGrant is a fake whose first TryLockLease ignores its ctx: it waits
// for gate, then grants.
type slowGrant struct {
	*fake
	gate chan struct{}
	once sync.Once
}

func (s *slowGrant) TryLockLease(ctx context.Context, lease time.Duration) error {
	s.once.Do(func() { <-s.gate })
	return s.fake.TryLockLease(context.WithoutCancel(ctx), lease)
}

func (s *slowGrant) TryLock(ctx context.Context) error {
	return s.TryLockLease(ctx, rlock.WatchdogMode)
}
