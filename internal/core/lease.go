package core

import (
	"context"
	"fmt"
	"time"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/renewal"
)

// SetLease changes the lease of the caller's owner's current holding (see
// base.LeaseLocker).
func (l *Lock) SetLease(ctx context.Context, lease time.Duration) error {
	if err := base.CheckLease(lease); err != nil {
		return err
	}
	if err := base.CheckContext(ctx); err != nil {
		return err
	}
	if l.c.closed.Load() {
		return base.ErrClosed
	}
	o, err := l.lockOwner(ctx)
	if err != nil {
		return err
	}
	defer l.unlockOwner(o)
	if err := l.settleLocked(ctx, o); err != nil {
		return err
	}
	return l.setLeaseLocked(ctx, o, lease)
}

// setLeaseLocked is SetLease for o; o's semaphore must be held.
func (l *Lock) setLeaseLocked(ctx context.Context, o *ownerState, lease time.Duration) error {
	if o.count == 0 {
		return fmt.Errorf("%w: %q", base.ErrNotHeld, l.name)
	}
	ttl := l.c.leaseOf(lease)
	hp := o.holding.Load()
	stopped := lease != base.WatchdogMode && o.watch != nil
	if stopped {
		// A renewal already on its way would run after this script and
		// set the watchdog's lease again: stop renewal, let it land first.
		o.watch.StopAndWait()
	}
	before := hp.knownUntil() // what protected the holds until now
	if stopped {
		o.watch = nil
	}
	sent := time.Now()
	held, err := l.renew(ctx, o, ttl)
	switch {
	case err != nil:
		l.leaseFailed(o, hp, lease == base.WatchdogMode || stopped, before, sent, ttl, unknownOutcome(err))
		return fmt.Errorf("rlock: setting the lease of %q: %w", l.name, err)
	case !held:
		o.setCount(0)
		o.stopRenewal(base.Lost(base.LossNotHeldAtSetLease, fmt.Errorf("%w: %q was no longer held when its lease was set", base.ErrLockLost, l.name)))
		return fmt.Errorf("%w: %q", base.ErrNotHeld, l.name)
	}
	o.lease = ttl
	l.protect(o, lease == base.WatchdogMode, sent, ttl)
	return nil
}

// protect makes the watchdog, or an explicit lease of ttl from sent, what
// protects o's holding: the lease set here is the one the owner asked
// for, shorter or not than before.
func (l *Lock) protect(o *ownerState, watchdogMode bool, sent time.Time, ttl time.Duration) {
	hp := o.holding.Load()
	if watchdogMode {
		hp.keepAlive()
		if o.watch == nil {
			o.watch = l.watch(o, hp, sent)
		}
		return
	}
	if o.watch != nil {
		o.watch.Stop()
		o.watch = nil
	}
	l.setExpiry(o, hp, sent.Add(ttl))
}

// leaseFailed handles a call that failed to set o's lease to ttl, sent at
// sent, while before was the end of what protected the holds. Its script
// may have run when unknown: the TTL is then either the old one or ttl
// counted from some moment after sent, so the holds are known to last
// only until the earlier of the two; otherwise they last until before.
// With the watchdog asked for or renewing before, the watchdog renews
// them, its lease counted to end then: a renewal that succeeds establishes
// the truth, and without one the holding ends as lost then. Otherwise the
// explicit lease ends then.
func (l *Lock) leaseFailed(o *ownerState, hp *holding, watchdog bool, before, sent time.Time, ttl time.Duration, unknown bool) {
	end := before
	if unknown && sent.Add(ttl).Before(end) {
		end = sent.Add(ttl)
	}
	if hp == nil || hp.ended() {
		return
	}
	if watchdog {
		if o.watch == nil {
			hp.keepAlive()
			o.watch = l.watch(o, hp, end.Add(-l.c.wd.LeaseDuration()))
		}
		return
	}
	l.setExpiry(o, hp, end)
}

// renew sets the TTL of o's holds to ttl and reports whether the owner
// still holds the lock.
func (l *Lock) renew(ctx context.Context, o *ownerState, ttl time.Duration) (bool, error) {
	res, err := l.c.runCall(detached(ctx), l.kind.renew(o.key.field, ttl)).Int64Slice()
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%w: renew script replied %v", base.ErrUnexpectedReply, res)
	}
	return err == nil && res[0] == 1, err
}

// expireAt moves the end of hp's explicit lease to t if that is later,
// and arranges for hp to end as lost then.
func (l *Lock) expireAt(o *ownerState, hp *holding, t time.Time) {
	if t.UnixNano() <= hp.until.Load() {
		return
	}
	l.setExpiry(o, hp, t)
}

// setExpiry makes t the end of hp's explicit lease, earlier or later than
// before, and arranges for hp to end as lost then.
func (l *Lock) setExpiry(o *ownerState, hp *holding, t time.Time) {
	hp.expireAt(t, func() {
		if time.Now().UnixNano() < hp.until.Load() {
			return // moved on meanwhile; the timer was reset
		}
		l.c.lost(o, hp, leaseRanOut(l.name))
	})
}

// leaseRanOut is the loss of a holding whose explicit lease ran out.
func leaseRanOut(name string) error {
	return base.Lost(base.LossLeaseExpired, fmt.Errorf("%w: the lease of %q ran out", base.ErrLockLost, name))
}

// watch has the watchdog renew o's holds, counting the lease from sent,
// and end hp as lost when renewal finds them gone.
func (l *Lock) watch(o *ownerState, hp *holding, sent time.Time) *renewal.Lease {
	var fieldArg any
	if o.key.field == l.ownKind {
		fieldArg = l.ownKindArg // boxed once
	} else {
		fieldArg = o.key.field
	}
	w := l.c.wd.AddBoxed(l.name, o.key.field, l.nameArg, fieldArg, sent, func(err error) { l.c.lost(o, hp, err) })
	if hp != nil {
		hp.watch.Store(w)
	}
	return w
}

// leaseOf returns the TTL a lease sets: the watchdog lease in watchdog
// mode, the lease itself otherwise.
func (c *Client) leaseOf(lease time.Duration) time.Duration {
	if lease == base.WatchdogMode {
		return c.wd.LeaseDuration()
	}
	return lease
}
