package core

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/replsync"
)

// States of an attempt that runs in the background (see attempt).
const (
	attemptPending   int32 = iota // the caller waits for the result
	attemptClaimed                // the attempt got the lock and the caller takes it
	attemptAbandoned              // the caller left with ctx's error
)

// attemptLocked is attempt, run to the end whatever ctx does. A hold
// granted after ctx ended, or after the caller stopped waiting for it
// (state, when the attempt runs in the background), is released again and
// ctx's error returned.
//
// retrying says the caller (a blocking Lock) tries again after a failure:
// an attempt whose reply was lost is then not settled but simply sent again
// by the next attempt, which the script answers as a re-send (a grant that
// stood is the caller's). Otherwise, or when the caller has left, it is
// settled at once (a grant the caller was not told of is given back).
func (l *Lock) attemptLocked(ctx context.Context, h *hold, lease time.Duration, join, retrying bool, state *atomic.Int32) (time.Duration, error) {
	if err := h.acquire(ctx); err != nil {
		return 0, l.ctxErr(ctx)
	}
	defer h.release()
	if ctx.Err() != nil {
		// Ended before anything was sent: send nothing. (A fair waiter's
		// departure may already have run; a join now would undo it.)
		return 0, l.ctxErr(ctx)
	}
	if h.unsure && h.resend && retrying {
		// The previous attempt of this Lock call went unanswered and no
		// other call of the owner came between: this one is its re-send.
		h.unsure, h.resend = false, false
	}
	if h.count > 0 && h.ended() {
		// The owner was told its holds were lost: start afresh, giving
		// back any the server still has (a loss reported when the lease
		// had certainly run out, by a reply that came later still).
		h.setCount(0)
		h.unsure = true
	}
	if err := l.settleLocked(ctx, h); err != nil {
		return 0, err
	}
	watchdogMode := lease == base.WatchdogMode
	if watchdogMode {
		lease = l.c.wd.LeaseDuration()
	}
	sent := time.Now()
	res, sync, syncErr, err := l.runAcquire(ctx, h, lease, join)
	if err != nil {
		if unknownOutcome(err) {
			h.unsure = true // the owner is entitled to h.count, as before
			h.resend = retrying && (state == nil || state.Load() == attemptPending)
			if !h.resend {
				l.settleNow(ctx, h)
			}
		}
		return 0, fmt.Errorf("rlock: acquiring %q: %w", l.name, err)
	}
	switch res[0] {
	case -1: // the owner re-entered a lock it no longer held
		return 0, l.lostAtReentry(h, "was no longer held at re-entry")
	case 0:
		if h.count > 0 { // the owner believed it held the lock: it was lost
			_ = l.lostAtReentry(h, "was no longer held at re-entry")
		}
		return time.Duration(res[1]) * time.Millisecond, nil
	}
	if syncErr != nil || sync.Unsynced() {
		return 0, l.undoUnreplicated(ctx, h, res[1], sync, syncErr)
	}
	if watchdogMode && time.Since(sent) >= lease {
		// The reply came after the lease counted from the send: the
		// script may have run late (a server frozen meanwhile), so the
		// hold may still stand. Ask once rather than report it lost.
		held, rsent, err := l.stillHeld(ctx, h, lease)
		if err != nil {
			h.unsure = true // the grant may stand: give it back
			l.settleNow(ctx, h)
			return 0, fmt.Errorf("rlock: acquiring %q: checking a grant whose reply came late: %w", l.name, err)
		}
		if !held {
			return l.grantExpired(h)
		}
		sent = rsent
	}
	l.adopt(h, res[1], res[2], lease, watchdogMode, sent)
	ttl, err := l.keepOrRelease(ctx, h, state)
	if g := GrantFrom(ctx); g != nil && err == nil {
		g.Reentry = res[1] > 1 // the server's count: it held before this grant
		ep := h.ep.Load()
		g.Done, g.Err = ep.done, ep.error
		g.Ctx, g.Until = ep.ctx, ep.knownUntil
	}
	return ttl, err
}

// stillHeld renews the lease of h's owner once and reports whether the
// owner still holds the lock, and when the renewal was sent.
func (l *Lock) stillHeld(ctx context.Context, h *hold, lease time.Duration) (bool, time.Time, error) {
	sent := time.Now()
	res, err := l.c.run(context.WithoutCancel(ctx), lua.Renew, []string{l.name},
		lease.Milliseconds(), h.key.field).Int64Slice()
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%w: renew script replied %v", base.ErrUnexpectedReply, res)
	}
	return err == nil && res[0] == 1, sent, err
}

// grantExpired handles a grant whose lease ran out before its reply came:
// a first hold is simply not obtained (a waiting Lock tries again); a
// re-entry means the owner's holds are lost.
func (l *Lock) grantExpired(h *hold) (time.Duration, error) {
	if h.count == 0 {
		return 0, nil
	}
	return 0, l.lostAtReentry(h, "ran out of lease before the re-entry's reply came")
}

// lostAtReentry records that the owner's holds were found gone at a
// re-entry: it ends the holding period and returns the loss.
func (l *Lock) lostAtReentry(h *hold, why string) error {
	h.setCount(0)
	lost := fmt.Errorf("%w: %q %s", base.ErrLockLost, l.name, why)
	h.stopRenewal(lost)
	return lost
}

// runAcquire sends the acquire script of the lock's kind and checks the
// shape of its reply: {1, holds, token}, {0, wait} or {-1, 0}.
func (l *Lock) runAcquire(ctx context.Context, h *hold, lease time.Duration, join bool) ([]int64, replsync.Result, error, error) {
	script, args := lua.Lock, []any{lease.Milliseconds(), h.key.field, h.count, boolArg(l.cfg.Fencing)}
	if l.cfg.Kind == Fair {
		script = lua.FairLock
		args = append(args, l.cfg.QueueTimeout.Milliseconds(), boolArg(join), l.channel, base.UnlockMessage, l.c.publishArg(ctx), l.cfg.ThreadWait.Milliseconds())
	}
	cmd, sync, syncErr := l.c.runAcquire(context.WithoutCancel(ctx), script, l.keys, args...)
	res, err := cmd.Int64Slice()
	if err != nil {
		return nil, sync, nil, err
	}
	switch {
	case len(res) == 3 && res[0] == 1 && res[1] >= 1 && res[2] >= 0:
	case len(res) == 2 && (res[0] == 0 || res[0] == -1):
	default:
		return nil, sync, nil, fmt.Errorf("%w: acquire script replied %v", base.ErrUnexpectedReply, res)
	}
	return res, sync, syncErr, nil
}

// undoUnreplicated releases a grant that no replica is known to have (a
// failover now could hand the lock to someone else) and says why.
func (l *Lock) undoUnreplicated(ctx context.Context, h *hold, holds int64, sync replsync.Result, syncErr error) error {
	why := fmt.Errorf("%w: none of %d replicas acknowledged %q within %v", base.ErrNotReplicated, sync.Replicas, l.name, l.c.sync.Timeout())
	if syncErr != nil {
		why = fmt.Errorf("%w: %q: %w", base.ErrNotReplicated, l.name, syncErr)
	}
	h.setCount(holds)
	if err := l.releaseLocked(ctx, h); err != nil {
		return fmt.Errorf("%w (and undoing the acquisition: %w)", why, err)
	}
	return why
}

// adopt records a grant or re-entry: the owner's hold count, the holding
// period (a new one after a release or loss), and what protects it. A
// re-entry never takes protection away: an explicit lease on a hold the
// watchdog renews leaves the watchdog on, and the script never shortens
// the TTL.
func (l *Lock) adopt(h *hold, holds, token int64, lease time.Duration, watchdogMode bool, sent time.Time) {
	h.setCount(holds)
	ep := h.ep.Load()
	if ep == nil || ep.ended() { // a new holding period
		if h.watch != nil {
			h.watch.Stop()
			h.watch = nil
		}
		h.lease = 0
		ep = newEpoch(token)
		h.ep.Store(ep)
	}
	switch {
	case watchdogMode:
		h.lease = lease
		if h.watch == nil {
			ep.keepAlive()
			h.watch = l.watch(h, ep, sent)
		}
	case h.watch == nil:
		h.lease = max(h.lease, lease)
		l.expireAt(h, ep, sent.Add(lease))
	}
	l.last.Store(ep)
}

// expireAt moves the end of ep's explicit lease to t if that is later,
// and arranges for ep to end as lost then.
func (l *Lock) expireAt(h *hold, ep *epoch, t time.Time) {
	if t.UnixNano() <= ep.until.Load() {
		return
	}
	ep.expireAt(t, func() {
		if time.Now().UnixNano() < ep.until.Load() {
			return // moved on meanwhile; the timer was reset
		}
		l.c.lost(h, ep, fmt.Errorf("%w: the lease of %q ran out", base.ErrLockLost, l.name))
	})
}

// keepOrRelease keeps a grant only if ctx is still alive and the caller
// still waits; checking ctx first keeps a synchronous caller's contract ("a
// Lock whose ctx ended holds no more than before") too. Otherwise it
// releases the hold again and returns ctx's error.
func (l *Lock) keepOrRelease(ctx context.Context, h *hold, state *atomic.Int32) (time.Duration, error) {
	keep := ctx.Err() == nil
	if keep && state != nil {
		if hook := testHookGranted.Load(); hook != nil {
			(*hook)(ctx)
		}
		keep = state.CompareAndSwap(attemptPending, attemptClaimed)
	}
	if keep {
		return acquired, nil
	}
	if err := l.releaseLocked(ctx, h); err != nil {
		return 0, fmt.Errorf("%w (and releasing the hold obtained after it: %w)", l.ctxErr(ctx), err)
	}
	return 0, l.ctxErr(ctx)
}

func (l *Lock) watch(h *hold, ep *epoch, sent time.Time) *watchdogLease {
	w := l.c.wd.Add(l.name, h.key.field, sent, func(err error) { l.c.lost(h, ep, err) })
	if ep != nil {
		ep.watch.Store(w)
	}
	return w
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (l *Lock) ready(ctx context.Context) error {
	if l.c.closed.Load() {
		return base.ErrClosed
	}
	if ctx.Err() != nil {
		return l.ctxErr(ctx)
	}
	return nil
}

func (l *Lock) ctxErr(ctx context.Context) error {
	return fmt.Errorf("rlock: waiting for %q: %w", l.name, ctx.Err())
}
