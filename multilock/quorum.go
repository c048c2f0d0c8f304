package multilock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/fence"
)

// acquireQuorum is Lock and TryLock in quorum mode.
func (m *MultiLock) acquireQuorum(ctx context.Context, lease time.Duration, wait bool) error {
	owner := ownerKey(ctx)
	if h := m.reenter(ctx, owner); h != nil {
		report(ctx, h, true)
		return nil
	}
	var timer *time.Timer
	for {
		err := m.attempt(ctx, owner, lease)
		if err == nil || !wait || !errors.Is(err, rlock.ErrNotObtained) || m.hopeless(err) {
			return err
		}
		d := m.retryMin + rand.N(m.retryMax-m.retryMin+1)
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("%w (last attempt: %v)", m.ctxErr(ctx), err)
		}
	}
}

// hopeless reports whether so many members failed for good (closed
// client) that no later attempt can reach the quorum.
func (m *MultiLock) hopeless(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	dead := 0
	for _, f := range e.Failures {
		if errors.Is(f.Err, rlock.ErrClosed) {
			dead++
		}
	}
	return len(m.members)-dead < m.quorum
}

// reenter counts one more hold if owner holds the MultiLock through this
// handle and it is still valid, and returns the holding (nil if not). A
// holding that was lost or ran out of validity is dropped and whatever is
// left of it on the members released, so that the fresh acquisition that
// follows starts from nothing.
func (m *MultiLock) reenter(ctx context.Context, owner string) *holding {
	m.mu.Lock()
	h := m.holds[owner]
	if h == nil {
		m.mu.Unlock()
		return nil
	}
	until := h.knownUntil()
	if !h.ended() && (until.IsZero() || time.Now().Before(until)) {
		h.count++
		m.mu.Unlock()
		return h
	}
	delete(m.holds, owner)
	m.mu.Unlock()
	h.end(m.expired(until))
	for i, ok := range h.granted { // whatever is left; never holds up this call
		if ok {
			m.releaseLater(ctx, owner, i)
		}
	}
	return nil
}

// report tells a combinator acquiring m (see core.Grant) whether the
// acquisition was a re-entry, whose lease it must leave alone, which
// holding period it is part of and, for a new one, how to set the lease
// of the holds it created on the members, and of nothing else.
func report(ctx context.Context, h *holding, reentry bool) {
	if g := core.GrantFrom(ctx); g != nil {
		g.Reentry = reentry
		g.Ctx, g.Until = h.ctx, h.knownUntil
		if !reentry {
			g.SetLease = func(ctx context.Context, lease time.Duration) error {
				return h.m.setLeaseHolding(ctx, h, lease)
			}
		}
	}
}

// replyWaitFor returns the reply wait of an attempt under ctx.
func (m *MultiLock) replyWaitFor(ctx context.Context) time.Duration {
	if m.replyWait > 0 {
		return m.replyWait
	}
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl)/time.Duration(len(m.members)), time.Millisecond)
	}
	return DefaultReplyWait
}

// attempt is one round over every member, in parallel.
func (m *MultiLock) attempt(ctx context.Context, owner string, lease time.Duration) error {
	wait := m.replyWaitFor(ctx)
	res := m.askAll(ctx, owner, lease, wait)
	granted := make([]bool, len(res))
	grants := make([]grant, len(res))
	var fails []Failure
	var start time.Time // the earliest send among the members that granted
	for i, r := range res {
		if r.err == nil {
			granted[i], grants[i] = true, r.grant
			if start.IsZero() || r.grant.sent.Before(start) {
				start = r.grant.sent
			}
			continue
		}
		err := r.err
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, errNotSent) {
			err = fmt.Errorf("%w (%v)", ErrMemberTimeout, wait)
		}
		fails = append(fails, m.failure(i, err))
	}
	if ctx.Err() != nil {
		m.rollback(ctx, owner, granted, wait)
		return m.ctxErr(ctx)
	}
	held := len(res) - len(fails)
	h := m.newHolding(owner, granted, grants)
	h.retime(lease, start)
	until := h.knownUntil() // zero: the members do not tell
	validity := time.Until(until)
	if held < m.quorum || (validity <= 0 && !until.IsZero()) {
		h.end(nil)
		m.rollback(ctx, owner, granted, wait)
		e := m.newError("lock", held, fails, rlock.ErrNotObtained)
		if held >= m.quorum {
			e.late, e.Validity = true, validity
		}
		return e
	}
	return m.adopt(ctx, owner, h, wait)
}

// adopt makes h owner's holding through this handle, unless another call
// of the owner won a race with this one: then that holding counts both.
func (m *MultiLock) adopt(ctx context.Context, owner string, h *holding, wait time.Duration) error {
	m.mu.Lock()
	if old := m.holds[owner]; old != nil {
		old.count++
		m.mu.Unlock()
		h.end(nil)
		m.rollback(ctx, owner, h.granted, wait)
		report(ctx, old, true)
		return nil
	}
	h.count = 1
	m.holds[owner] = h
	m.last = h
	m.mu.Unlock()
	h.watch()
	report(ctx, h, false)
	return nil
}

// result is one member's answer to an attempt.
type result struct {
	err   error // nil: granted
	grant grant
}

// askAll asks every member in parallel, each in the background (see
// spawn) and for at most wait: when wait passes or ctx ends first, it stops
// waiting and counts the members that have not answered as failed. Such a
// member's attempt runs on to its end (an rlock lock gives back a grant
// that comes after its ctx ended); a grant it reported just too late is
// released, and until then the owner's next attempt on that member waits
// (the fence), as after a rollback.
func (m *MultiLock) askAll(ctx context.Context, owner string, lease, wait time.Duration) []result {
	mctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	n := len(m.members)
	asks := make([]ask, n)
	answered := make(chan int, n)
	for i := range asks {
		asks[i].done = make(chan struct{})
		m.spawn(i, func() {
			asks[i].res = m.tryMember(mctx, owner, i, lease)
			close(asks[i].done)
			answered <- i
		})
	}
	res := make([]result, n)
	got := make([]bool, n)
	for left := n; left > 0; left-- {
		select {
		case i := <-answered:
			res[i], got[i] = asks[i].res, true
		case <-mctx.Done():
			for i := range asks {
				if !got[i] {
					res[i] = result{err: mctx.Err()}
					m.releaseUnanswered(ctx, owner, i, &asks[i])
				}
			}
			return res
		}
	}
	return res
}

// ask is one member's attempt in flight: its result, once done is closed.
type ask struct {
	done chan struct{}
	res  result
}

// releaseUnanswered releases, in the background, the grant of a member
// attempt the caller stopped waiting for, if it reports one; the fence
// keeps the owner's next attempt on that member waiting until then.
func (m *MultiLock) releaseUnanswered(ctx context.Context, owner string, i int, a *ask) {
	l := m.members[i]
	uctx := context.WithoutCancel(ctx)
	m.fence.Release(fence.Key{Owner: owner, Member: i}, func() {
		<-a.done
		if a.res.err == nil {
			_ = l.Unlock(uctx) // if it fails, the lease ends the lock
		}
	})
}

// errNotSent is a member's failure when its attempt was not even sent.
var errNotSent = errors.New("multilock: an earlier release on the member is still pending")

// tryMember makes one attempt on member i, after any release of an earlier
// attempt of this owner on that member has finished. The member reports
// its grant to this MultiLock, never to the MultiLock's own caller.
func (m *MultiLock) tryMember(ctx context.Context, owner string, i int, lease time.Duration) result {
	if m.fence.Wait(ctx, fence.Key{Owner: owner, Member: i}) != nil {
		return result{err: errNotSent}
	}
	l := m.members[i]
	sent := time.Now()
	g := &core.Grant{Inline: true} // this goroutine may be left behind: see askAll
	gctx := core.WithGrant(ctx, g)
	var err error
	if ll, ok := l.(rlock.LeaseLocker); ok {
		err = ll.TryLockLease(gctx, lease)
	} else {
		err = l.TryLock(gctx)
	}
	if err != nil {
		return result{err: err}
	}
	gr := reported(l, g)
	gr.sent, gr.setLease = sent, leaseSetter(l, g)
	return result{grant: gr}
}

// rollback releases the members that granted, and waits for these
// releases at most wait. Members whose outcome is unknown (no answer in
// time, a lost reply) are not released here: an rlock.Locker that returns
// an error holds nothing (rlock's locks give back a grant they could not
// report: a late grant is released, an unknown outcome settled at once),
// and a release here would take a hold the attempt never got, such as one
// the owner had before.
func (m *MultiLock) rollback(ctx context.Context, owner string, granted []bool, wait time.Duration) {
	var waitFor []<-chan struct{}
	for i, ok := range granted {
		if ok {
			waitFor = append(waitFor, m.releaseLater(ctx, owner, i))
		}
	}
	if len(waitFor) == 0 {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for _, ch := range waitFor {
		select {
		case <-ch:
		case <-timer.C:
			return
		}
	}
}

// releaseLater releases one hold of owner on member i in the background
// and returns a channel closed when done. Until then the owner's next
// attempt on that member waits for it (the fence), so a release can never
// undo a later grant; releases on one member run one after the other.
func (m *MultiLock) releaseLater(ctx context.Context, owner string, i int) <-chan struct{} {
	l := m.members[i]
	uctx := context.WithoutCancel(ctx)
	return m.fence.Release(fence.Key{Owner: owner, Member: i}, func() {
		_ = l.Unlock(uctx) // if it fails, the lease ends the lock
	})
}

// setLeaseQuorum is SetLease in quorum mode.
func (m *MultiLock) setLeaseQuorum(ctx context.Context, lease time.Duration) error {
	m.mu.Lock()
	h := m.holds[ownerKey(ctx)]
	m.mu.Unlock()
	if h == nil {
		return fmt.Errorf("%w: %q", rlock.ErrNotHeld, m.Name())
	}
	return m.setLeaseHolding(ctx, h, lease)
}

// setLeaseHolding sets lease on the holds holding h created, in parallel;
// a member the owner held before keeps its own lease and counts as held.
func (m *MultiLock) setLeaseHolding(ctx context.Context, h *holding, lease time.Duration) error {
	which := make([]bool, len(h.granted))
	for i, ok := range h.granted {
		which[i] = ok && h.grants[i].setLease != nil
	}
	start := time.Now()
	errs := m.each(which, func(i int, _ rlock.Locker) error { return h.grants[i].setLease(ctx, lease) })
	var fails []Failure
	ok := 0
	for i, granted := range h.granted {
		switch {
		case !granted:
		case errs[i] == nil:
			ok++
		default:
			fails = append(fails, m.failure(i, errs[i]))
		}
	}
	if ok < m.quorum {
		return m.newError("set lease", ok, fails, rlock.ErrNotHeld)
	}
	h.retime(lease, start)
	if len(fails) > 0 {
		return m.newError("set lease", ok, fails, nil)
	}
	return nil
}

// unlockQuorum is Unlock in quorum mode.
func (m *MultiLock) unlockQuorum(ctx context.Context) error {
	owner := ownerKey(ctx)
	m.mu.Lock()
	h := m.holds[owner]
	if h == nil {
		m.mu.Unlock()
		return fmt.Errorf("%w: %q", rlock.ErrNotHeld, m.Name())
	}
	var lost error
	if h.ended() {
		lost = h.result()
	} else if u := h.validUntil(); !u.IsZero() && !time.Now().Before(u) {
		lost = m.expired(u)
	}
	h.count--
	if h.count > 0 && lost == nil {
		m.mu.Unlock()
		return nil
	}
	// The last hold, or a lost holding: it ends here, whatever holds
	// remain (they are answered ErrNotHeld).
	delete(m.holds, owner)
	m.mu.Unlock()
	h.stop() // the members' ends no longer count: the release's findings end h
	err := m.releaseAll(ctx, h)
	var e *Error
	if lost == nil && errors.As(err, &e) && e.sentinel == rlock.ErrNotHeld {
		found := *e
		found.Op, found.sentinel = "hold", rlock.ErrLockLost // the holding ended by loss, found here
		found.Failures = slices.Clone(e.Failures)
		h.end(&found)
		return err
	}
	h.end(lost)
	if lost != nil {
		return errors.Join(lost, err)
	}
	return err
}

// releaseAll releases h on every member that granted it, in parallel. It
// returns an *Error wrapping rlock.ErrNotHeld when fewer than k still held
// it, an *Error listing the members that failed otherwise, or nil.
func (m *MultiLock) releaseAll(ctx context.Context, h *holding) error {
	errs := m.each(h.granted, func(_ int, l rlock.Locker) error { return l.Unlock(ctx) })
	var fails []Failure
	still := 0
	for i, ok := range h.granted {
		if !ok {
			continue
		}
		if errs[i] == nil {
			still++
			continue
		}
		fails = append(fails, m.failure(i, errs[i]))
		if !errors.Is(errs[i], rlock.ErrNotHeld) {
			still++ // unknown: maybe still held until its lease ends
		}
	}
	switch {
	case still < m.quorum:
		return m.newError("unlock", still, fails, rlock.ErrNotHeld)
	case len(fails) > 0:
		return m.newError("unlock", still, fails, nil)
	}
	return nil
}
