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
	stopped := lease != base.WatchdogMode && o.watch != nil
	if stopped {
		// A renewal already on its way would run after this script and
		// set the watchdog's lease again: stop renewal, let it land first.
		o.watch.StopAndWait()
		o.watch = nil
	}
	sent := time.Now()
	held, err := l.renew(ctx, o, ttl)
	switch {
	case err != nil:
		if stopped { // the lease may be unchanged: keep renewing
			o.watch = l.watch(o, o.holding.Load(), sent)
		}
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
	hp.until.Store(0)
	l.expireAt(o, hp, sent.Add(ttl))
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
	hp.expireAt(t, func() {
		if time.Now().UnixNano() < hp.until.Load() {
			return // moved on meanwhile; the timer was reset
		}
		l.c.lost(o, hp, base.Lost(base.LossLeaseExpired, fmt.Errorf("%w: the lease of %q ran out", base.ErrLockLost, l.name)))
	})
}

// watch has the watchdog renew o's holds, counting the lease from sent,
// and end hp as lost when renewal finds them gone.
func (l *Lock) watch(o *ownerState, hp *holding, sent time.Time) *renewal.Lease {
	w := l.c.wd.Add(l.name, o.key.field, sent, func(err error) { l.c.lost(o, hp, err) })
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
