package multilock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
)

// acquireAll is Lock and TryLock in all mode.
func (m *MultiLock) acquireAll(ctx context.Context, lease time.Duration, wait bool) error {
	grants, err := m.takeAll(ctx, wait)
	if err != nil {
		return err
	}
	if lease != rlock.WatchdogMode {
		if err := m.setLeases(ctx, grants, lease); err != nil {
			return errors.Join(err, m.release(ctx, len(m.members)))
		}
	}
	h := m.adoptAll(ownerKey(ctx), grants, lease)
	if g := core.GrantFrom(ctx); g != nil {
		// A MultiLock that is itself a member: its parent may set the
		// lease of what this acquisition created, and of nothing else.
		g.SetLease = func(ctx context.Context, lease time.Duration) error {
			err := m.setLeases(ctx, grants, lease)
			h.retime(lease, time.Now())
			return err
		}
		g.Ctx, g.Until = h.ctx, h.knownUntil
	}
	return nil
}

// setLeases sets lease on every member hold that takes it, in parallel.
func (m *MultiLock) setLeases(ctx context.Context, grants []grant, lease time.Duration) error {
	which := make([]bool, len(m.members))
	for i, g := range grants {
		which[i] = g.setLease != nil
	}
	errs := m.each(which, func(i int, _ rlock.Locker) error { return grants[i].setLease(ctx, lease) })
	return m.failures("set lease", errs, nil)
}

// errStep marks a member wait that ran out while ctx is still alive.
var errStep = errors.New("member wait ran out")

// takeAll takes every member, round after round, until it holds them all,
// a member fails or ctx ends.
func (m *MultiLock) takeAll(ctx context.Context, wait bool) ([]grant, error) {
	step := m.stepMin
	for {
		grants, failed, err := m.round(ctx, wait, step)
		if err == nil {
			return grants, nil
		}
		if errors.Is(err, errStep) && ctx.Err() == nil {
			// Holding nothing now, wait for the member that was busy,
			// through its own Lock, as long as ctx allows; then let it go
			// and start over.
			err = m.await(ctx, failed)
		}
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				return nil, fmt.Errorf("%w (last attempt: %v)", m.ctxErr(ctx), err)
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
		return m.newError("lock", 0, []Failure{m.failure(i, err)}, nil)
	}
	if err := l.Unlock(ctx); err != nil {
		return m.newError("unlock", 0, []Failure{m.failure(i, err)}, nil)
	}
	return nil
}

// round makes one pass over the members and returns what each acquisition
// created; on failure it has released the members it took and returns the
// index of the member that failed.
func (m *MultiLock) round(ctx context.Context, wait bool, step time.Duration) ([]grant, int, error) {
	grants := make([]grant, len(m.members))
	taken := make([]context.Context, 0, len(m.members))
	outer := ctx
	for i, l := range m.members {
		// A later member behind the same gate as one taken in this call
		// (the write and read side of one read-write lock) re-enters it.
		ctx := core.WithMarksOf(outer, taken...)
		var err error
		switch {
		case !wait:
			grants[i], err = take(ctx, l, false)
		case i == 0: // holding nothing: wait as long as ctx allows
			grants[i], err = take(ctx, l, true)
		default:
			d := step/2 + rand.N(step/2+1)
			sctx, cancel := context.WithTimeout(ctx, d)
			grants[i], err = take(sctx, l, true)
			cancel()
			if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w after %v: %w", errStep, d, err)
			}
		}
		if err != nil {
			ctx := outer
			err = m.newError("lock", i, []Failure{m.failure(i, err)}, nil)
			if rerr := m.release(ctx, i); rerr != nil {
				err = errors.Join(err, fmt.Errorf("multilock: releasing the members taken: %w", rerr))
			}
			return nil, i, err
		}
		taken = append(taken, grants[i].ctx)
	}
	return grants, 0, nil
}

// take acquires l, in watchdog mode if it takes a lease, and returns what
// the acquisition created, as the member reports it through a core.Grant
// (rlock's own locks do) or, for other members, as far as their handle
// tells.
func take(ctx context.Context, l rlock.Locker, wait bool) (grant, error) {
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
		return grant{}, err
	}
	gr := reported(l, g)
	gr.setLease = leaseSetter(l, g)
	return gr, nil
}

// leaseSetter returns what sets the lease of the hold an acquisition of l
// reported in g created: nil for a member that takes no lease and for a
// re-entry (the owner's hold keeps its own lease), the combinator's own
// setter for a member that is a combinator, l's SetLease otherwise.
func leaseSetter(l rlock.Locker, g *core.Grant) func(context.Context, time.Duration) error {
	ll, leased := l.(rlock.LeaseLocker)
	switch {
	case !leased || g.Reentry:
		return nil
	case g.SetLease != nil:
		return g.SetLease
	}
	return ll.SetLease
}

// reported returns the holding period a member's acquisition reported in
// g or, for a member that reports none, its handle's own, if it tells.
func reported(l rlock.Locker, g *core.Grant) grant {
	gr := grant{ctx: g.Ctx, until: g.Until}
	if c, ok := l.(interface{ Ctx() context.Context }); ok && gr.ctx == nil {
		gr.ctx = c.Ctx()
	}
	if u, ok := l.(interface{ Until() time.Time }); ok && gr.until == nil {
		gr.until = u.Until
	}
	return gr
}

// release releases one hold on each of the first n members.
func (m *MultiLock) release(ctx context.Context, n int) error {
	which := make([]bool, len(m.members))
	for i := range n {
		which[i] = true
	}
	errs := m.each(which, func(_ int, l rlock.Locker) error { return l.Unlock(ctx) })
	return m.failures("unlock", errs, nil)
}

// adoptAll makes grants owner's holding period and the last one, and
// starts watching its members, unless owner's current period already
// covers them (a re-entry). It returns owner's period.
func (m *MultiLock) adoptAll(owner string, grants []grant, lease time.Duration) *holding {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.holds[owner]; h != nil && !h.ended() && sameCtxs(h.grants, grants) {
		m.last = h
		return h
	}
	h := m.newHolding(owner, m.every(), grants)
	h.retime(lease, time.Now())
	m.holds[owner], m.last = h, h
	h.watch()
	return h
}

// holdingOf returns owner's holding period through this handle, nil when
// there is none or it ended.
func (m *MultiLock) holdingOf(owner string) *holding {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.holds[owner]; h != nil && !h.ended() {
		return h
	}
	return nil
}

// setLeaseAll is SetLease in all mode: on the holds owner's holding
// period through this handle created, never on those the owner had
// before.
func (m *MultiLock) setLeaseAll(ctx context.Context, lease time.Duration) error {
	h := m.holdingOf(ownerKey(ctx))
	if h == nil {
		return fmt.Errorf("%w: %q", rlock.ErrNotHeld, m.Name())
	}
	if err := m.setLeases(ctx, h.grants, lease); err != nil {
		return err
	}
	h.retime(lease, time.Now())
	return nil
}

// sameCtxs reports whether a and b are part of the same holding periods.
func sameCtxs(a, b []grant) bool {
	for i := range a {
		if a[i].ctx != b[i].ctx {
			return false
		}
	}
	return true
}

// settle ends owner's holding period after an all-mode Unlock if a
// member's ended: with the first member's loss, or nil when they were
// released; an ended period is forgotten.
func (m *MultiLock) settle(owner string) {
	m.mu.Lock()
	h := m.holds[owner]
	m.mu.Unlock()
	if h == nil {
		return
	}
	m.settleHolding(h)
	if h.ended() {
		m.mu.Lock()
		if m.holds[owner] == h {
			delete(m.holds, owner)
		}
		m.mu.Unlock()
	}
}

func (m *MultiLock) settleHolding(h *holding) {
	if h.ended() {
		return
	}
	ended := false
	for i, g := range h.grants {
		if g.ctx == nil || g.ctx.Err() == nil {
			continue
		}
		cause := context.Cause(g.ctx)
		if errors.Is(cause, rlock.ErrLockLost) || !errors.Is(cause, context.Canceled) {
			h.end(m.newError("hold", len(m.members)-1, []Failure{m.failure(i, cause)}, rlock.ErrLockLost))
			return
		}
		ended = true
	}
	if ended {
		h.end(nil)
	}
}
