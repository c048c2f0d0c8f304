package core

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
)

// Unlock releases one hold of the caller's owner. It works after the
// client was closed too, so a deferred Unlock still releases.
//
// For the handle's own owner it also gives one hold back to the handle's
// gate (see Gate), whatever the outcome: the goroutines that share the
// handle get the lock after as many Unlocks as Locks.
func (l *Lock) Unlock(ctx context.Context) error {
	o, err := l.lockOwner(ctx)
	if err != nil {
		return err
	}
	err = l.unlockLocked(ctx, o)
	l.unlockOwner(o)
	if !l.explicitOwner(ctx) {
		l.gate.Released(l.exclusive)
	}
	return err
}

func (l *Lock) unlockLocked(ctx context.Context, o *ownerState) error {
	if err := l.settleLocked(ctx, o); err != nil {
		return err
	}
	return l.releaseLocked(ctx, o)
}

// lockOwner returns the caller's owner's state with its semaphore held,
// or ctx's error if ctx ends first; the caller ends with unlockOwner.
func (l *Lock) lockOwner(ctx context.Context) (*ownerState, error) {
	field, err := l.field(ctx)
	if err != nil {
		return nil, err
	}
	o := l.c.owner(l.home(field), l.name, field)
	if err := o.acquire(ctx); err != nil {
		l.c.putOwner(o)
		return nil, l.ctxErr(ctx)
	}
	return o, nil
}

// unlockOwner ends a lockOwner.
func (l *Lock) unlockOwner(o *ownerState) {
	o.release()
	l.c.putOwner(o)
}

// releaseKind names a release script's answer.
type releaseKind uint8

const (
	releasedLast releaseKind = iota // the owner's last hold: the lock is free (or the next in line's)
	releasedOne                     // one hold released, holds remain
	notHeld                         // the owner held nothing
)

// parseReleaseReply recognises the three replies every release script
// gives: {1, 0} for the last hold, {0, holds left} for one of several and
// {-1, 0} for an owner that held nothing; it returns the holds left.
func parseReleaseReply(res []int64) (releaseKind, int64, bool) {
	if len(res) != 2 {
		return 0, 0, false
	}
	switch res[0] {
	case 1:
		return releasedLast, 0, true
	case 0:
		return releasedOne, res[1], true
	case -1:
		return notHeld, 0, true
	}
	return 0, 0, false
}

// releaseLocked releases one hold; o's semaphore must be held.
func (l *Lock) releaseLocked(ctx context.Context, o *ownerState) error {
	lease := o.lease
	if lease <= 0 {
		lease = l.c.wd.LeaseDuration()
	}
	// Only the last release can make a renewal find the lock gone; a loss
	// reported meanwhile waits for its outcome (it may be the release's
	// own doing). Any other loss is reported at once.
	hp := o.holding.Load()
	if hp != nil && o.count <= 1 {
		hp.releaseStarted()
		defer hp.releaseDone()
	}
	sent := time.Now()
	call := l.kind.release(o.key.field, o.count, lease, l.latchOf(o), l.c.publishArg(ctx))
	res, err := lua.ReleaseReply(l.c.runCall(detached(ctx), call))
	kind, left, ok := parseReleaseReply(res)
	if err == nil && !ok {
		err = fmt.Errorf("%w: release script replied %v", base.ErrUnexpectedReply, res)
	}
	if err != nil {
		return l.releaseFailed(ctx, o, fmt.Errorf("rlock: releasing %q: %w", l.name, err))
	}
	return l.released(o, hp, kind, left, sent.Add(lease))
}

// releaseFailed handles a release that failed with err. When no reply
// came (or one no release script gives), the owner meant to drop a hold: it is dropped, whatever happened,
// in the background or by the owner's next call. After a last release
// whose outcome is unknown, renewal stops and the lease decides.
func (l *Lock) releaseFailed(ctx context.Context, o *ownerState, err error) error {
	if unknownOutcome(err) {
		o.setCount(o.count - 1)
		l.markUnsure(o, 0)
		l.settleNow(ctx, o)
	}
	if o.count <= 0 {
		o.stopRenewal(base.Lost(base.LossReleaseFailed, fmt.Errorf("%w: the last release failed, renewal stopped: %w", base.ErrLockLost, err)))
	}
	return err
}

// released records a release's answer; until is when the lease restored
// on the holds left runs out.
func (l *Lock) released(o *ownerState, hp *holding, kind releaseKind, left int64, until time.Time) error {
	switch kind {
	case notHeld:
		believed := o.count > 0
		o.setCount(0)
		if believed {
			o.stopRenewal(base.Lost(base.LossNotHeldAtUnlock, fmt.Errorf("%w: %q was no longer held at unlock", base.ErrLockLost, l.name)))
		}
		return fmt.Errorf("%w: %q", base.ErrNotHeld, l.name)
	case releasedOne:
		o.setCount(left)
		if hp != nil && o.watch == nil {
			l.expireAt(o, hp, until)
		}
		return nil
	}
	o.setCount(0)
	if o.watch != nil {
		// A renewal on its way would renew the owner's next hold of the
		// lock with the watchdog's lease, over an explicit one: let it
		// land before the owner can send anything else.
		o.watch.StopAndWait()
	}
	o.stopRenewal(nil)
	return nil
}

// settleLocked finds out what an earlier call of o's owner whose outcome
// is unknown did (its reply was lost), and completes what it meant: a
// lost acquire's hold is given back (its caller got an error, so it must
// hold no more than before), a lost release's hold is dropped. Afterwards
// the owner's hold count is the server's again. o's semaphore must be held.
func (l *Lock) settleLocked(ctx context.Context, o *ownerState) error {
	if !o.unsure {
		return nil
	}
	n, err := l.serverHolds(detached(ctx), o.key.field)
	if err != nil {
		return fmt.Errorf("rlock: %q: settling an earlier call whose outcome is unknown: %w", l.name, err)
	}
	entitled := o.count
	o.unsure, o.resend = false, false
	o.setCount(n)
	if n == 0 && entitled > 0 {
		o.stopRenewal(base.Lost(base.LossNotHeldAfterLostReply, fmt.Errorf("%w: %q was no longer held", base.ErrLockLost, l.name)))
	}
	for o.count > entitled {
		if err := l.releaseLocked(ctx, o); err != nil {
			return fmt.Errorf("rlock: %q: giving back a hold whose grant was not reported: %w", l.name, err)
		}
	}
	return nil
}

// settleNow settles o at once, after a call whose outcome is unknown,
// and leaves it to the background when that fails too (Redis is
// unreachable): the call that failed then returns having completed what it
// meant whenever Redis answers. o's semaphore must be held.
func (l *Lock) settleNow(ctx context.Context, o *ownerState) {
	if o.settling {
		return // a release settling does is settled by the settle itself
	}
	o.settling = true
	err := l.settleLocked(ctx, o)
	o.settling = false
	if err != nil {
		l.settleSoon(o)
	}
}

// Pauses between the background settle's tries (see settleSoon).
const (
	settlePause    = 50 * time.Millisecond
	settlePauseMax = time.Second
)

// markUnsure records that a call of o's owner, which may have set a lease
// of lease, has an unknown outcome. Its effect on the server can matter
// until unsureUntil: a copy of the call may still arrive for the replay
// window, and what it set lasts the longest lease involved. o's semaphore
// must be held.
func (l *Lock) markUnsure(o *ownerState, lease time.Duration) {
	o.unsure = true
	longest := max(lease, o.lease, l.c.wd.LeaseDuration())
	if until := time.Now().Add(l.c.replay + longest); until.After(o.unsureUntil) {
		o.unsureUntil = until
	}
}

// settleSoon settles o in the background, so that a hold granted to a call
// whose reply was lost is given back at once rather than at the owner's
// next call. While Redis does not answer it tries again, with backoff,
// until it learns the truth, or until the unknown call can no longer
// matter (see settleOnce), or the client closes. One runs per owner.
func (l *Lock) settleSoon(o *ownerState) {
	if !o.settler.CompareAndSwap(false, true) {
		return // one is running, and settles what this call left too
	}
	l.c.retain(o)
	if !l.c.goBackground(func() {
		defer l.c.putOwner(o)
		l.settleUntilKnown(o)
	}) {
		o.settler.Store(false)
		l.c.putOwner(o) // closing: the next call settles
	}
}

// settleUntilKnown is settleSoon's loop.
func (l *Lock) settleUntilKnown(o *ownerState) {
	pause := settlePause
	for {
		if o.acquire(l.c.life) != nil {
			return // closing
		}
		done, wait := l.settleOnce(o, pause)
		if done {
			o.settler.Store(false) // under the semaphore: a later settleSoon starts anew
		}
		o.release()
		if done {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-l.c.closing:
			t.Stop()
			return
		}
		pause = min(2*pause, settlePauseMax)
	}
}

// settleOnce tries to settle o once, and reports whether nothing is left
// to settle, or else how long to wait before trying again (at most pause).
// An owner that holds nothing (or whose holding ended) needs no settle
// once the unknown call can no longer matter: whatever it set on the
// server has run out. o's semaphore must be held.
func (l *Lock) settleOnce(o *ownerState, pause time.Duration) (bool, time.Duration) {
	if !o.unsure {
		return true, 0
	}
	idle := o.count == 0 || o.ended()
	if idle && !time.Now().Before(o.unsureUntil) {
		o.unsure, o.resend = false, false
		return true, 0
	}
	if l.settleLocked(l.c.life, o) == nil {
		return true, 0
	}
	if idle {
		pause = min(pause, max(time.Until(o.unsureUntil), time.Millisecond))
	}
	return false, pause
}

// latchOf returns the latch of a fresh release request of o's owner: the
// lock's latch key, in the lock's hash slot, shared by every owner, and a
// new request ID, unique across clients (see ran_by in scripts/holds.lua).
func (l *Lock) latchOf(*ownerState) latch {
	return latch{key: l.latch, request: l.c.requestID(), ttl: l.c.replay}
}

// latchKey returns a fresh request's latch key of its own, in the lock's
// hash slot (a force unlock's: it belongs to no owner).
func (l *Lock) latchKey() string {
	return base.DerivedKey(base.LatchPrefix, l.name) + ":" + l.c.requestID()
}

// ForceUnlock deletes the lock whoever holds it and wakes a waiter. A
// re-sent ForceUnlock answers from the record its first run left and
// changes nothing more. It works after the client was closed too.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	n, err := l.forceUnlock(ctx)
	return n == 1, err
}

// ForceUnlockHeldBy is ForceUnlock that deletes the lock only if exactly
// the owner fields holders hold it, checked and deleted in one step (for
// an operator who confirmed whom they dispossess). It reports 1 when it
// deleted the lock, 0 when the lock was free, -1 when others hold it.
func (l *Lock) ForceUnlockHeldBy(ctx context.Context, holders []string) (int64, error) {
	sorted := slices.Clone(holders)
	slices.Sort(sorted)
	return l.forceUnlock(ctx, strings.Join(sorted, "\n"))
}

func (l *Lock) forceUnlock(ctx context.Context, expect ...any) (int64, error) {
	if err := base.CheckContext(ctx); err != nil {
		return 0, err
	}
	call := l.kind.forceUnlock(l.latchKey(), l.c.replay, l.c.publishArg(ctx))
	n, err := l.c.runCall(detached(ctx), call, expect...).Int64()
	if err != nil {
		return 0, fmt.Errorf("rlock: force-unlocking %q: %w", l.name, err)
	}
	return n, nil
}
