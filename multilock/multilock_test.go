package multilock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/reentrant"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.StopSharedAfter(m))
}

// eachServers runs fn on n miniredis servers and on n real redis-servers,
// each with its own rlock client.
func eachServers(t *testing.T, n int, fn func(t *testing.T, bs []*redistest.Backend, cs []*rlock.Client), opts ...rlock.ClientOption) {
	t.Helper()
	run := func(t *testing.T, start func(testing.TB) *redistest.Backend) {
		bs := make([]*redistest.Backend, n)
		cs := make([]*rlock.Client, n)
		for i := range n {
			bs[i] = start(t)
			cs[i] = newClient(t, bs[i], opts...)
		}
		fn(t, bs, cs)
	}
	t.Run(redistest.MiniName, func(t *testing.T) { run(t, redistest.Mini) })
	t.Run(redistest.RealName, func(t *testing.T) { run(t, redistest.Real) })
}

func newClient(t *testing.T, b *redistest.Backend, opts ...rlock.ClientOption) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(b.NewClient(t), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// handles returns one handle on name per client.
func handles(t *testing.T, cs []*rlock.Client, name string, opts ...reentrant.Option) []rlock.Locker {
	t.Helper()
	ls := make([]rlock.Locker, len(cs))
	for i, c := range cs {
		l, err := reentrant.New(c, fmt.Sprintf("%s:%d", name, i), opts...)
		require.NoError(t, err)
		ls[i] = l
	}
	return ls
}

func newMulti(t *testing.T, ls []rlock.Locker, opts ...multilock.Option) *multilock.MultiLock {
	t.Helper()
	m, err := multilock.New(ls, opts...)
	require.NoError(t, err)
	return m
}

func held(t *testing.T, l rlock.Locker) int {
	t.Helper()
	n, err := l.(*reentrant.Lock).HoldCount(context.Background())
	require.NoError(t, err)
	return n
}

func TestBadInput(t *testing.T) {
	_, err := multilock.New(nil)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = multilock.New([]rlock.Locker{})
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	f := newFake("a")
	_, err = multilock.New([]rlock.Locker{f, nil})
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	var typedNil *reentrant.Lock
	_, err = multilock.New([]rlock.Locker{f, typedNil})
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	for _, o := range []multilock.Option{
		multilock.WithLease(-time.Second), multilock.WithLease(time.Microsecond),
		multilock.WithMemberWait(0, time.Second), multilock.WithMemberWait(time.Second, time.Millisecond),
	} {
		_, err = multilock.New([]rlock.Locker{f}, o)
		require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	}
	_, err = multilock.New([]rlock.Locker{f}, multilock.WithLease(rlock.WatchdogMode))
	require.NoError(t, err, "the zero lease is watchdog mode, as for every lock kind")
	m, err := multilock.New([]rlock.Locker{f}, nil) // nil options are ignored
	require.NoError(t, err)
	require.ErrorIs(t, m.LockLease(context.Background(), -time.Second), rlock.ErrInvalidArgument)
	require.ErrorIs(t, m.SetLease(context.Background(), -time.Second), rlock.ErrInvalidArgument)
	require.Zero(t, f.holds)
}

func TestExactlyOneOfTenWins(t *testing.T) {
	eachServers(t, 3, func(t *testing.T, _ []*redistest.Backend, cs []*rlock.Client) {
		ctx := context.Background()
		name := redistest.Name(t)
		var wins, lost atomic.Int32
		var wg sync.WaitGroup
		ms := make([]*multilock.MultiLock, 10)
		for g := range ms {
			ms[g] = newMulti(t, handles(t, cs, name))
		}
		start := make(chan struct{})
		for _, m := range ms {
			wg.Go(func() {
				<-start
				switch err := m.TryLock(ctx); {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, rlock.ErrNotObtained):
					lost.Add(1)
				default:
					t.Errorf("TryLock: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		require.EqualValues(t, 1, wins.Load())
		require.EqualValues(t, 9, lost.Load())
		// The winner holds all three; no loser holds anything.
		for _, m := range ms {
			if err := m.Unlock(ctx); err == nil {
				continue
			} else {
				require.ErrorIs(t, err, rlock.ErrNotHeld)
			}
		}
		for _, l := range handles(t, cs, name) {
			locked, err := l.(*reentrant.Lock).IsLocked(ctx)
			require.NoError(t, err)
			require.False(t, locked)
		}
	})
}

func TestFailureOnThirdReleasesFirstTwo(t *testing.T) {
	eachServers(t, 3, func(t *testing.T, _ []*redistest.Backend, cs []*rlock.Client) {
		ctx := context.Background()
		name := redistest.Name(t)
		ls := handles(t, cs, name)
		other := handles(t, cs, name)
		require.NoError(t, other[2].TryLock(ctx))

		m := newMulti(t, ls)
		err := m.TryLock(ctx)
		require.ErrorIs(t, err, rlock.ErrNotObtained)
		require.ErrorContains(t, err, "member 2")
		for _, l := range ls[:2] {
			locked, err := l.(*reentrant.Lock).IsLocked(ctx)
			require.NoError(t, err)
			require.False(t, locked, "%s still locked", l.Name())
		}
		// Lock with a deadline gives up at the deadline, holding nothing.
		dctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		err = m.Lock(dctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, rlock.ErrNotObtained)
		for _, l := range ls {
			require.Zero(t, held(t, l))
		}
		require.NoError(t, other[2].Unlock(ctx))
	})
}

func TestLockWaitsForEveryMember(t *testing.T) {
	eachServers(t, 3, func(t *testing.T, _ []*redistest.Backend, cs []*rlock.Client) {
		ctx := context.Background()
		name := redistest.Name(t)
		ls := handles(t, cs, name)
		other := handles(t, cs, name)
		require.NoError(t, other[0].TryLock(ctx))
		require.NoError(t, other[2].TryLock(ctx))

		m := newMulti(t, ls, multilock.WithMemberWait(5*time.Millisecond, 20*time.Millisecond))
		done := make(chan error, 1)
		go func() { done <- m.Lock(ctx) }()
		require.NoError(t, other[0].Unlock(ctx))
		// While member 2 is held, the MultiLock keeps trying but holds
		// member 0 only intermittently and never member 2.
		select {
		case err := <-done:
			t.Fatalf("Lock returned while member 2 was held: %v", err)
		default:
		}
		require.NoError(t, other[2].Unlock(ctx))
		require.NoError(t, <-done)
		for _, l := range ls {
			require.Equal(t, 1, held(t, l))
		}
		require.NoError(t, m.Unlock(ctx))
	})
}

func TestOppositeOrdersDoNotDeadlock(t *testing.T) {
	eachServers(t, 2, func(t *testing.T, _ []*redistest.Backend, cs []*rlock.Client) {
		ctx := context.Background()
		name := redistest.Name(t)
		wait := multilock.WithMemberWait(2*time.Millisecond, 20*time.Millisecond)
		var wg sync.WaitGroup
		var inside atomic.Int32
		for g := range 4 {
			ls := handles(t, cs, name)
			if g%2 == 1 {
				ls[0], ls[1] = ls[1], ls[0]
			}
			m := newMulti(t, ls, wait)
			wg.Go(func() {
				for range 3 {
					if err := m.Lock(ctx); err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					if inside.Add(1) != 1 {
						t.Errorf("two holders")
					}
					inside.Add(-1)
					if err := m.Unlock(ctx); err != nil {
						t.Errorf("Unlock: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
}

func TestReentryBalances(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b)
		name := redistest.Name(t)
		ls := handles(t, []*rlock.Client{c, c}, name)
		m := newMulti(t, ls)
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.TryLock(m.Ctx())) // re-entry through the holding's ctx
		for _, l := range ls {
			require.Equal(t, 2, held(t, l))
		}
		require.NoError(t, m.Unlock(ctx))
		for _, l := range ls {
			require.Equal(t, 1, held(t, l))
		}
		require.NoError(t, m.Unlock(ctx))
		for _, l := range ls {
			require.Equal(t, 0, held(t, l))
		}
		err := m.Unlock(ctx)
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		// Every member is reported, not only the first.
		require.ErrorContains(t, err, "member 0")
		require.ErrorContains(t, err, "member 1")

		// Nested in another MultiLock, with an explicit owner shared
		// across handles.
		octx := rlock.WithOwner(ctx, "job-7")
		outer := newMulti(t, []rlock.Locker{m, handles(t, []*rlock.Client{c}, name+"x")[0]})
		require.NoError(t, outer.Lock(octx))
		require.NoError(t, m.TryLock(octx)) // the same owner re-enters
		require.NoError(t, m.Unlock(octx))
		require.NoError(t, outer.Unlock(octx))
		require.ErrorIs(t, m.Unlock(octx), rlock.ErrNotHeld)
	})
}

func TestUnlockReportsEveryFailure(t *testing.T) {
	a, b, c := newFake("a"), newFake("b"), newFake("c")
	m := newMulti(t, []rlock.Locker{a, b, c})
	ctx := context.Background()
	require.NoError(t, m.Lock(ctx))
	boom := errors.New("boom")
	a.failUnlock, c.failUnlock = boom, boom
	err := m.Unlock(ctx)
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, `member 0 ("a")`)
	require.ErrorContains(t, err, `member 2 ("c")`)
	require.NotContains(t, err.Error(), `"b"`)
	require.Zero(t, b.holds)
}

func TestLeaseLockerMembers(t *testing.T) {
	ctx := context.Background()
	a, b := newFake("a"), newFake("b")
	plain := &plainLocker{newFake("p")}

	// No lease given: members are taken in watchdog mode and stay in it.
	m := newMulti(t, []rlock.Locker{a, plain, b})
	require.NoError(t, m.Lock(ctx))
	require.Equal(t, []time.Duration{rlock.WatchdogMode}, a.acquired)
	require.Empty(t, a.set)
	require.Empty(t, plain.f.acquired) // plain lockers keep their own lease
	require.Equal(t, 1, plain.f.holds)
	require.NoError(t, m.Unlock(ctx))

	// With a lease: provisional watchdog mode, then the lease.
	m = newMulti(t, []rlock.Locker{a, plain, b}, multilock.WithLease(time.Minute))
	require.NoError(t, m.TryLock(ctx))
	require.Equal(t, []time.Duration{rlock.WatchdogMode, rlock.WatchdogMode}, a.acquired)
	require.Equal(t, []time.Duration{time.Minute}, a.set)
	require.Equal(t, []time.Duration{time.Minute}, b.set)
	require.NoError(t, m.SetLease(ctx, rlock.WatchdogMode))
	require.Equal(t, []time.Duration{time.Minute, rlock.WatchdogMode}, b.set)
	require.NoError(t, m.Unlock(ctx))

	// A failing SetLease undoes the acquisition.
	boom := errors.New("boom")
	b.failSet = boom
	require.ErrorIs(t, m.LockLease(ctx, time.Second), boom)
	require.Zero(t, a.holds)
	require.Zero(t, b.holds)
	require.Zero(t, plain.f.holds)

	// A member that fails with an error other than "not obtained": the
	// error names the member, earlier members are released.
	b.failSet = nil
	b.failLock = boom
	err := m.Lock(ctx)
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, `member 2 ("b")`)
	require.Zero(t, a.holds)
	require.Zero(t, plain.f.holds)
}

func TestLossOfAMemberEndsTheHolding(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b, rlock.WithWatchdogLease(300*time.Millisecond))
		name := redistest.Name(t)
		ls := handles(t, []*rlock.Client{c, c}, name)
		m := newMulti(t, ls)
		select {
		case <-m.Done():
		default:
			t.Fatal("Done is open before the first acquisition")
		}
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Err())
		select {
		case <-m.Done():
			t.Fatal("Done closed while held")
		default:
		}
		_, err := ls[1].(*reentrant.Lock).ForceUnlock(ctx)
		require.NoError(t, err)
		<-m.Done()
		require.ErrorIs(t, m.Err(), rlock.ErrLockLost)
		require.ErrorContains(t, m.Err(), "member 1")
		err = m.Unlock(ctx)
		require.ErrorIs(t, err, rlock.ErrNotHeld)
		require.NotContains(t, err.Error(), "member 0")

		// A normal release ends the next holding period without error.
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Unlock(ctx))
		<-m.Done()
		require.NoError(t, m.Err())
	})
}

func TestCancelledContext(t *testing.T) {
	f := newFake("a")
	m := newMulti(t, []rlock.Locker{f})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, m.Lock(ctx), context.Canceled)
	require.ErrorIs(t, m.TryLock(ctx), context.Canceled)
	require.Zero(t, f.holds)
}

// fake is an in-memory rlock.LeaseLocker that records what it was asked.
type fake struct {
	name string

	mu         sync.Mutex
	holds      int
	acquired   []time.Duration
	set        []time.Duration
	failLock   error
	failUnlock error
	failSet    error
}

func newFake(name string) *fake { return &fake{name: name} }

func (f *fake) Name() string                      { return f.name }
func (f *fake) Lock(ctx context.Context) error    { return f.LockLease(ctx, rlock.WatchdogMode) }
func (f *fake) TryLock(ctx context.Context) error { return f.TryLockLease(ctx, rlock.WatchdogMode) }

func (f *fake) LockLease(ctx context.Context, lease time.Duration) error {
	return f.TryLockLease(ctx, lease)
}

func (f *fake) TryLockLease(ctx context.Context, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failLock != nil {
		return f.failLock
	}
	f.holds++
	f.acquired = append(f.acquired, lease)
	return nil
}

func (f *fake) SetLease(_ context.Context, lease time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failSet != nil {
		return f.failSet
	}
	if f.holds == 0 {
		return rlock.ErrNotHeld
	}
	f.set = append(f.set, lease)
	return nil
}

func (f *fake) Unlock(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failUnlock != nil {
		return f.failUnlock
	}
	if f.holds == 0 {
		return rlock.ErrNotHeld
	}
	f.holds--
	return nil
}

func (f *fake) IsHeld(context.Context) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holds > 0, nil
}

// plainLocker is an rlock.Locker only.
type plainLocker struct{ f *fake }

func (p *plainLocker) Name() string { return p.f.name }
func (p *plainLocker) Lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.f.holds++
	return nil
}
func (p *plainLocker) TryLock(ctx context.Context) error { return p.Lock(ctx) }
func (p *plainLocker) Unlock(ctx context.Context) error  { return p.f.Unlock(ctx) }
func (p *plainLocker) IsHeld(ctx context.Context) (bool, error) {
	return p.f.IsHeld(ctx)
}

// Real members: reentrant and fair locks on three servers, with a lease.
func TestRealMembersGetTheLease(t *testing.T) {
	eachServers(t, 3, func(t *testing.T, _ []*redistest.Backend, cs []*rlock.Client) {
		ctx := context.Background()
		name := redistest.Name(t)
		ls := handles(t, cs[:2], name)
		fl, err := fair.New(cs[2], name+":fair")
		require.NoError(t, err)
		ls = append(ls, fl)
		const lease = 20 * time.Second
		m := newMulti(t, ls, multilock.WithLease(lease))
		require.NoError(t, m.Lock(ctx))
		for _, l := range ls {
			ttl, err := l.(interface {
				TTL(context.Context) (time.Duration, error)
			}).TTL(ctx)
			require.NoError(t, err)
			// The watchdog lease (30 s) while acquiring, then the lease.
			require.LessOrEqual(t, ttl, lease, l.Name())
			require.Greater(t, ttl, lease/2, l.Name())
		}
		// Back to watchdog mode: the TTL is the watchdog lease again.
		require.NoError(t, m.SetLease(ctx, rlock.WatchdogMode))
		ttl, err := fl.TTL(ctx)
		require.NoError(t, err)
		require.Greater(t, ttl, lease)
		require.NoError(t, m.Unlock(ctx))
		for _, l := range ls {
			locked, err := l.(interface {
				IsLocked(context.Context) (bool, error)
			}).IsLocked(ctx)
			require.NoError(t, err)
			require.False(t, locked)
		}
	})
}
