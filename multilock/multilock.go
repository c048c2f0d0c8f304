package multilock

import (
	"context"
	"errors"
	"fmt"
	"github.com/rlock-go/rlock/internal/base"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
)

// MultiLock holds several locks as one: it is held when every member is
// held by the caller's owner, and it satisfies rlock.LeaseLocker, so it can
// itself be a member of another MultiLock. Create it with New; it is safe
// for concurrent use and does no I/O until a method is called.
type MultiLock struct {
	members []rlock.Locker
	lease   time.Duration
	stepMin time.Duration
	stepMax time.Duration
	mu      sync.Mutex
	last    *period // the holding period of the last acquisition
}

var (
	_ rlock.Locker      = (*MultiLock)(nil)
	_ rlock.LeaseLocker = (*MultiLock)(nil)
)

// Option configures a MultiLock. A nil Option is ignored.
type Option func(*MultiLock) error

// WithLease sets the lease that Lock and TryLock give every member that
// implements rlock.LeaseLocker once all members are held, unless the owner
// held it already (see Lock): each then expires d after the acquisition
// and nothing renews it. d must be at least 1 ms.
// Default: rlock.WatchdogMode, every such member is renewed by its client's
// watchdog for as long as it is held. Members that only implement
// rlock.Locker keep the lease setting of their own handle.
func WithLease(d time.Duration) Option {
	return func(m *MultiLock) error {
		if err := base.CheckLease(d); err != nil {
			return err
		}
		m.lease = d
		return nil
	}
}

// WithMemberWait bounds how long Lock waits for a member while it holds
// the members before it. The first wait of each acquisition lasts a random
// time between lo/2 and lo; every failed round doubles it, up to hi. When
// the wait runs out, Lock releases what it holds and starts over from the
// first member. Default: 50 ms up to 1 s. Both must be positive and lo <= hi.
func WithMemberWait(lo, hi time.Duration) Option {
	return func(m *MultiLock) error {
		if lo <= 0 || hi < lo {
			return fmt.Errorf("%w: member wait %v..%v (want 0 < lo <= hi)", rlock.ErrInvalidArgument, lo, hi)
		}
		m.stepMin, m.stepMax = lo, hi
		return nil
	}
}

// New returns a MultiLock over locks, acquired in the given order. The
// locks may be of any kind and on any clients and servers. It does no I/O.
// It reports ErrInvalidArgument for an empty list, a nil member or a bad
// option. The slice is copied.
func New(locks []rlock.Locker, opts ...Option) (*MultiLock, error) {
	if len(locks) == 0 {
		return nil, fmt.Errorf("%w: a MultiLock needs at least one lock", rlock.ErrInvalidArgument)
	}
	for i, l := range locks {
		if core.IsNil(l) {
			return nil, fmt.Errorf("%w: lock %d is nil", rlock.ErrInvalidArgument, i)
		}
	}
	m := &MultiLock{
		members: append([]rlock.Locker(nil), locks...),
		lease:   rlock.WatchdogMode,
		stepMin: 50 * time.Millisecond,
		stepMax: time.Second,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Name returns the members' names joined by ",".
func (m *MultiLock) Name() string {
	names := make([]string, len(m.members))
	for i, l := range m.members {
		names[i] = l.Name()
	}
	return strings.Join(names, ",")
}

// Members returns the members, in acquisition order.
func (m *MultiLock) Members() []rlock.Locker {
	return append([]rlock.Locker(nil), m.members...)
}

// Lock blocks until the caller's owner holds every member, or ctx ends.
// It takes the members in order. It waits for the first one for as long as
// ctx allows; for each later one, while holding the earlier ones, it waits
// at most the member wait (see WithMemberWait), so two MultiLocks that take
// shared locks in different orders cannot deadlock: when the wait runs out,
// Lock releases every member it took, waits until the busy member can be
// taken (holding nothing), lets it go, and starts over with a longer wait.
//
// Members that implement rlock.LeaseLocker are taken in watchdog mode
// while the others are acquired (so none expires however long that takes)
// and then given the lease (see WithLease), except members the owner held
// already: a re-entered member keeps its hold's lease. Re-locking a
// MultiLock the owner holds re-enters every member; each Lock needs one
// Unlock.
//
// When ctx ends, Lock returns an error wrapping ctx's error and holds no
// more than before. When a member fails otherwise (a Redis error, a closed
// client), Lock releases the members it took and returns an error naming
// the member. Errors from that release are joined to it. A nil ctx, a bad
// owner ID in ctx or a lease neither rlock.WatchdogMode nor at least 1 ms
// is rejected with rlock.ErrInvalidArgument before any member is asked.
func (m *MultiLock) Lock(ctx context.Context) error { return m.acquire(ctx, m.lease, true) }

// TryLock makes one attempt on each member in order. When a member is held
// by another owner it releases the members it took and returns an error
// wrapping rlock.ErrNotObtained that names the member. Otherwise it behaves
// as Lock.
func (m *MultiLock) TryLock(ctx context.Context) error { return m.acquire(ctx, m.lease, false) }

// LockLease is Lock with lease instead of the WithLease setting:
// rlock.WatchdogMode or a positive duration.
func (m *MultiLock) LockLease(ctx context.Context, lease time.Duration) error {
	return m.acquire(ctx, lease, true)
}

// TryLockLease is TryLock with lease instead of the WithLease setting.
func (m *MultiLock) TryLockLease(ctx context.Context, lease time.Duration) error {
	return m.acquire(ctx, lease, false)
}

// SetLease changes the lease of the caller's owner's holding on every
// member that implements rlock.LeaseLocker (see rlock.LeaseLocker.SetLease),
// in parallel, including holds the owner had before it took the
// MultiLock. It returns every member's failure, joined, or
// rlock.ErrInvalidArgument, asking no member, for bad input (see Lock).
func (m *MultiLock) SetLease(ctx context.Context, lease time.Duration) error {
	if err := checkInput(ctx, lease); err != nil {
		return err
	}
	return m.setLease(ctx, lease, len(m.members))
}

// checkInput rejects, before any member is asked, what a member would
// reject only once the members before it were taken: a nil ctx, a bad
// owner ID in ctx, a lease neither rlock.WatchdogMode nor at least 1 ms.
func checkInput(ctx context.Context, lease time.Duration) error {
	if err := base.CheckContext(ctx); err != nil {
		return err
	}
	if _, _, err := base.OwnerFrom(ctx); err != nil {
		return err
	}
	return base.CheckLease(lease)
}

// setLease sets lease on the first n members that take one.
func (m *MultiLock) setLease(ctx context.Context, lease time.Duration, n int) error {
	return m.each(n, func(i int, l rlock.Locker) error {
		if ll, ok := l.(rlock.LeaseLocker); ok {
			return ll.SetLease(ctx, lease)
		}
		return nil
	})
}

// Unlock releases one hold on every member, in parallel, and waits for all
// of them. It returns every member's failure joined (errors.Join), each
// naming its member; when no member was held by the owner, every one of
// them wraps rlock.ErrNotHeld. Like the members' Unlock, it runs to
// completion even when ctx is cancelled. A nil ctx or a bad owner ID is
// rejected with rlock.ErrInvalidArgument, asking no member.
func (m *MultiLock) Unlock(ctx context.Context) error {
	if err := checkInput(ctx, rlock.WatchdogMode); err != nil {
		return err
	}
	err := m.each(len(m.members), func(_ int, l rlock.Locker) error { return l.Unlock(ctx) })
	m.settle()
	return err
}

// each runs fn on the first n members in parallel and joins their errors,
// each wrapped with the member's index and name.
func (m *MultiLock) each(n int, fn func(int, rlock.Locker) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		l := m.members[i]
		if i == n-1 {
			errs[i] = fn(i, l)
			break
		}
		wg.Go(func() { errs[i] = fn(i, l) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			errs[i] = m.memberErr(i, err)
		}
	}
	return errors.Join(errs...)
}

func (m *MultiLock) memberErr(i int, err error) error {
	return fmt.Errorf("multilock: member %d (%q): %w", i, m.members[i].Name(), err)
}

// errStep marks a member wait that ran out while ctx is still alive.
var errStep = errors.New("member wait ran out")

func (m *MultiLock) acquire(ctx context.Context, lease time.Duration, wait bool) error {
	if err := checkInput(ctx, lease); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("multilock: %w", err)
	}
	holds, err := m.takeAll(ctx, wait)
	if err != nil {
		return err
	}
	if lease != rlock.WatchdogMode {
		if err := m.setLeases(ctx, holds, lease); err != nil {
			return errors.Join(err, m.release(ctx, len(m.members)))
		}
	}
	p := m.watch(holds)
	if g := core.GrantFrom(ctx); g != nil {
		// A MultiLock that is itself a member: its parent may set the
		// lease of what this acquisition created, and of nothing else.
		g.SetLease = func(ctx context.Context, lease time.Duration) error {
			return m.setLeases(ctx, holds, lease)
		}
		g.Done, g.Err = p.done, p.result
	}
	return nil
}

// memberHold is what one member's acquisition created, as far as the
// MultiLock needs to know.
type memberHold struct {
	// setLease sets the lease of the hold the acquisition created; nil
	// for a member that takes no lease and for a re-entry, since a
	// combinator must never change the lease of a hold the owner had
	// before (it would stop the renewal of a hold in watchdog mode,
	// which then expires unnoticed).
	setLease func(context.Context, time.Duration) error
	// done and err are the member's holding period that the acquisition
	// is part of (see core.Grant); done is nil for a member that reports
	// no loss.
	done <-chan struct{}
	err  func() error
}

// setLeases sets lease on every member hold that takes it, in parallel.
func (m *MultiLock) setLeases(ctx context.Context, holds []memberHold, lease time.Duration) error {
	return m.each(len(m.members), func(i int, _ rlock.Locker) error {
		if holds[i].setLease == nil {
			return nil
		}
		return holds[i].setLease(ctx, lease)
	})
}

// takeAll takes every member, round after round, until it holds them all,
// a member fails or ctx ends.
func (m *MultiLock) takeAll(ctx context.Context, wait bool) ([]memberHold, error) {
	step := m.stepMin
	for {
		holds, failed, err := m.round(ctx, wait, step)
		if err == nil {
			return holds, nil
		}
		if errors.Is(err, errStep) && ctx.Err() == nil {
			// Holding nothing now, wait for the member that was busy,
			// through its own Lock, as long as ctx allows; then let it go
			// and start over.
			err = m.await(ctx, failed)
		}
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				return nil, fmt.Errorf("multilock: %w (last attempt: %v)", ctx.Err(), err)
			}
			return nil, err
		}
		step = min(2*step, m.stepMax)
	}
}

// await waits until member i is free by taking and releasing it.
func (m *MultiLock) await(ctx context.Context, i int) error {
	l := m.members[i]
	if _, err := take(ctx, l, true); err != nil {
		return m.memberErr(i, err)
	}
	if err := l.Unlock(ctx); err != nil {
		return m.memberErr(i, err)
	}
	return nil
}

// round makes one pass over the members and returns what each acquisition
// created; on failure it has released the members it took and returns the
// index of the member that failed.
func (m *MultiLock) round(ctx context.Context, wait bool, step time.Duration) ([]memberHold, int, error) {
	holds := make([]memberHold, len(m.members))
	for i, l := range m.members {
		var err error
		switch {
		case !wait:
			holds[i], err = take(ctx, l, false)
		case i == 0: // holding nothing: wait as long as ctx allows
			holds[i], err = take(ctx, l, true)
		default:
			d := step/2 + rand.N(step/2+1)
			sctx, cancel := context.WithTimeout(ctx, d)
			holds[i], err = take(sctx, l, true)
			cancel()
			if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w after %v: %w", errStep, d, err)
			}
		}
		if err != nil {
			err = m.memberErr(i, err)
			if rerr := m.release(ctx, i); rerr != nil {
				err = errors.Join(err, fmt.Errorf("multilock: releasing the members taken: %w", rerr))
			}
			return nil, i, err
		}
	}
	return holds, 0, nil
}

// take acquires l, in watchdog mode if it takes a lease, and returns what
// the acquisition created, as the member reports it through a core.Grant
// (rlock's own locks do) or, for other members, as far as their handle
// tells.
func take(ctx context.Context, l rlock.Locker, wait bool) (memberHold, error) {
	g := &core.Grant{}
	gctx := core.WithGrant(ctx, g)
	ll, leased := l.(rlock.LeaseLocker)
	var err error
	switch {
	case leased && wait:
		err = ll.LockLease(gctx, rlock.WatchdogMode)
	case leased:
		err = ll.TryLockLease(gctx, rlock.WatchdogMode)
	case wait:
		err = l.Lock(gctx)
	default:
		err = l.TryLock(gctx)
	}
	if err != nil {
		return memberHold{}, err
	}
	h := memberHold{done: g.Done, err: g.Err}
	if lo, ok := l.(loser); ok && h.done == nil {
		h.done, h.err = lo.Done(), lo.Err
	}
	switch {
	case !leased || g.Reentry:
	case g.SetLease != nil:
		h.setLease = g.SetLease
	default:
		h.setLease = ll.SetLease
	}
	return h, nil
}

// release releases one hold on each of the first n members.
func (m *MultiLock) release(ctx context.Context, n int) error {
	if n == 0 {
		return nil
	}
	return m.each(n, func(_ int, l rlock.Locker) error { return l.Unlock(ctx) })
}

// loser is what a member implements to report the loss of its lock, as
// the reentrant and fair locks do.
type loser interface {
	Done() <-chan struct{}
	Err() error
}

// period is one holding period of the MultiLock. It ends when a member
// loses its lock (the watcher), when an Unlock ends a member's holding
// period (settle), or when every member's holding period has ended.
type period struct {
	holds []memberHold // as acquired
	done  chan struct{}
	once  sync.Once
	err   error // written before done is closed
}

func (p *period) end(err error) {
	p.once.Do(func() {
		p.err = err
		close(p.done)
	})
}

// result returns why p ended; nil for an Unlock or while it lasts.
func (p *period) result() error {
	if closed(p.done) {
		return p.err
	}
	return nil
}

// watch makes holds the current holding period and starts watching its
// members, unless the current period already covers them (a re-entry).
// It returns the current period.
func (m *MultiLock) watch(holds []memberHold) *period {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.last; p != nil && !closed(p.done) && sameDones(p.holds, holds) {
		return p
	}
	p := &period{holds: holds, done: make(chan struct{})}
	m.last = p
	go m.watchLoss(p) // returns at once when no member reports loss
	return p
}

// watchLoss ends p at the first member that loses its lock, or with nil
// once every watched member's holding period has ended by release. A
// member released while others are held does not end p: the Unlock that
// released it does (settle), and a loss found meanwhile wins.
func (m *MultiLock) watchLoss(p *period) {
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.done)}}
	var idx []int
	for i, h := range p.holds {
		if h.done != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(h.done)})
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return // nothing reports loss: p never ends
	}
	for len(idx) > 0 {
		chosen, _, _ := reflect.Select(cases)
		if chosen == 0 {
			return
		}
		i := idx[chosen-1]
		if err := p.holds[i].err(); err != nil {
			p.end(m.lossErr(i, err))
			return
		}
		cases = slices.Delete(cases, chosen, chosen+1)
		idx = slices.Delete(idx, chosen-1, chosen)
	}
	p.end(nil)
}

// settle ends the current holding period after an Unlock if a member's
// ended: with the first member's loss, or nil when they were released.
func (m *MultiLock) settle() {
	m.mu.Lock()
	p := m.last
	m.mu.Unlock()
	if p == nil || closed(p.done) {
		return
	}
	ended := false
	for i, h := range p.holds {
		if h.done == nil || !closed(h.done) {
			continue
		}
		if err := h.err(); err != nil {
			p.end(m.lossErr(i, err))
			return
		}
		ended = true
	}
	if ended {
		p.end(nil)
	}
}

func (m *MultiLock) lossErr(i int, err error) error {
	return fmt.Errorf("%w: member %d (%q): %w", rlock.ErrLockLost, i, m.members[i].Name(), err)
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// sameDones reports whether a and b watch the same holding periods.
func sameDones(a, b []memberHold) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].done != b[i].done {
			return false
		}
	}
	return true
}

// Done returns a channel that is closed when the holding period of the last
// successful acquisition ends: by an Unlock that ends a member's own
// holding period, or by the loss of a member that reports loss (one with
// Done and Err methods, as the reentrant lock has; see Err). Before the
// first acquisition it returns a closed channel. When no member reports
// loss, the channel never closes: such members cannot tell.
func (m *MultiLock) Done() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		return closedChan
	}
	return m.last.done
}

// Err returns nil while the holding period of the last acquisition goes on
// or when it ended by Unlock; after the loss of any member (also one that
// Unlock found lost) it returns an error wrapping rlock.ErrLockLost that
// names the member and wraps its error.
func (m *MultiLock) Err() error {
	m.mu.Lock()
	p := m.last
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.result()
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
