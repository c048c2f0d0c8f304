package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
)

// Unlock releases one hold of the caller's owner. It works after the
// client was closed too, so a deferred Unlock still releases.
func (l *Lock) Unlock(ctx context.Context) error {
	h, err := l.lockHold(ctx)
	if err != nil {
		return err
	}
	defer l.unlockHold(h)
	if err := l.settleLocked(ctx, h); err != nil {
		return err
	}
	return l.releaseLocked(ctx, h)
}

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
	h, err := l.lockHold(ctx)
	if err != nil {
		return err
	}
	defer l.unlockHold(h)
	if err := l.settleLocked(ctx, h); err != nil {
		return err
	}
	return l.setLeaseLocked(ctx, h, lease)
}

// lockHold returns the caller's owner's hold with its semaphore held, or
// ctx's error if ctx ends first; the caller ends with unlockHold.
func (l *Lock) lockHold(ctx context.Context) (*hold, error) {
	field, err := l.Owner(ctx)
	if err != nil {
		return nil, err
	}
	h := l.c.holdFor(l.name, field)
	if err := h.acquire(ctx); err != nil {
		l.c.putHold(h)
		return nil, l.ctxErr(ctx)
	}
	return h, nil
}

// unlockHold ends a lockHold.
func (l *Lock) unlockHold(h *hold) {
	h.release()
	l.c.putHold(h)
}

// setLeaseLocked is SetLease for h; h's semaphore must be held.
func (l *Lock) setLeaseLocked(ctx context.Context, h *hold, lease time.Duration) error {
	if h.count == 0 {
		return fmt.Errorf("%w: %q", base.ErrNotHeld, l.name)
	}
	ttl := lease
	if lease == base.WatchdogMode {
		ttl = l.c.wd.LeaseDuration()
	}
	stopped := lease != base.WatchdogMode && h.watch != nil
	if stopped {
		// A renewal already on its way would run after this script and
		// set the watchdog's lease again: stop renewal, let it land first.
		h.watch.StopAndWait()
		h.watch = nil
	}
	sent := time.Now()
	res, err := l.c.run(context.WithoutCancel(ctx), lua.Renew, []string{l.name},
		ttl.Milliseconds(), h.key.field).Int64Slice()
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%w: renew script replied %v", base.ErrUnexpectedReply, res)
	}
	if err != nil {
		if stopped { // the lease may be unchanged: keep renewing
			h.watch = l.watch(h, h.ep.Load(), sent)
		}
		return fmt.Errorf("rlock: setting the lease of %q: %w", l.name, err)
	}
	if res[0] == 0 {
		h.setCount(0)
		h.stopRenewal(fmt.Errorf("%w: %q was no longer held when its lease was set", base.ErrLockLost, l.name))
		return fmt.Errorf("%w: %q", base.ErrNotHeld, l.name)
	}
	h.lease = ttl
	ep := h.ep.Load()
	if lease == base.WatchdogMode {
		ep.keepAlive()
		if h.watch == nil {
			h.watch = l.watch(h, ep, sent)
		}
		return nil
	}
	if h.watch != nil {
		h.watch.Stop()
		h.watch = nil
	}
	// The lease set here is the one the owner asked for, shorter or not.
	ep.until.Store(0)
	l.expireAt(h, ep, sent.Add(ttl))
	return nil
}

// releaseLocked releases one hold; h's semaphore must be held.
func (l *Lock) releaseLocked(ctx context.Context, h *hold) error {
	lease := h.lease
	if lease <= 0 {
		lease = l.c.wd.LeaseDuration()
	}
	// Only the last release can make a renewal find the lock gone; a loss
	// reported meanwhile waits for its outcome (it may be the release's
	// own doing). Any other loss is reported at once.
	ep := h.ep.Load()
	if ep != nil && h.count <= 1 {
		ep.releaseStarted()
		defer ep.releaseDone()
	}
	sent := time.Now()
	res, err := l.runRelease(ctx, h, lease)
	if err != nil {
		err = fmt.Errorf("rlock: releasing %q: %w", l.name, err)
		if unknownOutcome(err) {
			// The owner meant to drop a hold: it is dropped, whatever
			// happened here, in the background or by the owner's next call.
			h.setCount(h.count - 1)
			h.unsure = true
			l.settleNow(ctx, h)
		}
		if h.count <= 0 { // the outcome is unknown: stop renewing, let the lease decide
			h.stopRenewal(fmt.Errorf("%w: the last release failed, renewal stopped: %w", base.ErrLockLost, err))
		}
		return err
	}
	switch res[0] {
	case -1:
		believed := h.count > 0
		h.setCount(0)
		if believed {
			h.stopRenewal(fmt.Errorf("%w: %q was no longer held at unlock", base.ErrLockLost, l.name))
		}
		return fmt.Errorf("%w: %q", base.ErrNotHeld, l.name)
	case 0:
		h.setCount(res[1])
		if ep != nil && h.watch == nil {
			l.expireAt(h, ep, sent.Add(lease))
		}
		return nil
	default:
		h.setCount(0)
		h.stopRenewal(nil)
		return nil
	}
}

// runRelease sends the release script of the lock's kind and checks the
// shape of its reply: {1, 0}, {0, holds} or {-1, 0}.
func (l *Lock) runRelease(ctx context.Context, h *hold, lease time.Duration) ([]int64, error) {
	keys := l.releaseKeys()
	var cmd *redis.Cmd
	if l.cfg.Kind == Fair {
		cmd = l.c.run(context.WithoutCancel(ctx), lua.FairUnlock, keys,
			lease.Milliseconds(), h.key.field, h.count, base.UnlockMessage, l.c.replay.Milliseconds(), l.channel, l.c.publishArg(ctx))
	} else {
		cmd = l.c.run(context.WithoutCancel(ctx), lua.Unlock, keys,
			lease.Milliseconds(), h.key.field, h.count, base.UnlockMessage, l.c.replay.Milliseconds(), l.c.publishArg(ctx))
	}
	res, err := cmd.Int64Slice()
	if err == nil && (len(res) != 2 || res[0] < -1 || res[0] > 1) {
		err = fmt.Errorf("%w: release script replied %v", base.ErrUnexpectedReply, res)
	}
	return res, err
}

// settleLocked finds out what an earlier call of h's owner whose outcome
// is unknown did (its reply was lost), and completes what it meant: a
// lost acquire's hold is given back (its caller got an error, so it must
// hold no more than before), a lost release's hold is dropped. Afterwards
// the owner's hold count is the server's again. h's semaphore must be held.
func (l *Lock) settleLocked(ctx context.Context, h *hold) error {
	if !h.unsure {
		return nil
	}
	n, err := l.c.rdb.HGet(context.WithoutCancel(ctx), l.name, h.key.field).Int64()
	if errors.Is(err, redis.Nil) {
		n, err = 0, nil
	}
	if err != nil {
		return fmt.Errorf("rlock: %q: settling an earlier call whose outcome is unknown: %w", l.name, err)
	}
	entitled := h.count
	h.unsure, h.resend = false, false
	h.setCount(n)
	if n == 0 && entitled > 0 {
		h.stopRenewal(fmt.Errorf("%w: %q was no longer held", base.ErrLockLost, l.name))
	}
	for h.count > entitled {
		if err := l.releaseLocked(ctx, h); err != nil {
			return fmt.Errorf("rlock: %q: giving back a hold whose grant was not reported: %w", l.name, err)
		}
	}
	return nil
}

// settleNow settles h at once, after a call whose outcome is unknown,
// and leaves it to the background when that fails too (Redis is
// unreachable): the call that failed then returns having completed what it
// meant whenever Redis answers. h's semaphore must be held.
func (l *Lock) settleNow(ctx context.Context, h *hold) {
	if h.settling {
		return // a release settling does is settled by the settle itself
	}
	h.settling = true
	err := l.settleLocked(ctx, h)
	h.settling = false
	if err != nil {
		l.settleSoon(h)
	}
}

// settleSoon settles h in the background, so that a hold granted to a call
// whose reply was lost is given back at once rather than at the owner's
// next call. If it fails, the next call tries again.
func (l *Lock) settleSoon(h *hold) {
	l.c.retain(h)
	if !l.c.goBackground(func() {
		defer l.c.putHold(h)
		_ = h.acquire(context.Background())
		defer h.release()
		_ = l.settleLocked(context.Background(), h)
	}) {
		l.c.putHold(h) // closing: the next call settles
	}
}

// releaseKeys returns the KEYS of a release or force unlock, with a fresh
// latch key: the hash, queue, deadlines and latch of a fair lock; the
// hash, channel and latch of a reentrant one.
func (l *Lock) releaseKeys() []string {
	if l.cfg.Kind == Fair {
		return []string{l.keys[0], l.keys[1], l.keys[2], l.latchKey()}
	}
	return []string{l.name, l.channel, l.latchKey()}
}

// latchKey returns a fresh request's latch key, in the lock's hash slot.
func (l *Lock) latchKey() string {
	return base.DerivedKey(base.LatchPrefix, l.name) + ":" + l.c.requestID()
}

// stopRenewal stops the watchdog for h and ends its holding period with
// err (nil for a release). h's semaphore must be held.
func (h *hold) stopRenewal(err error) {
	if h.watch != nil {
		h.watch.Stop()
		h.watch = nil
	}
	if ep := h.ep.Load(); ep != nil {
		ep.end(err)
	}
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
	script, args := lua.ForceUnlock, []any{base.UnlockMessage, l.c.replay.Milliseconds()}
	if l.cfg.Kind == Fair {
		script, args = lua.FairForceUnlock, append(args, l.channel)
	}
	args = append(args, l.c.publishArg(ctx))
	n, err := l.c.run(context.WithoutCancel(ctx), script, l.releaseKeys(), append(args, expect...)...).Int64()
	if err != nil {
		return 0, fmt.Errorf("rlock: force-unlocking %q: %w", l.name, err)
	}
	return n, nil
}
