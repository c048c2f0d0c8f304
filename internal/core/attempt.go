package core

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/renewal"
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
func (l *Lock) attemptLocked(ctx context.Context, o *ownerState, lease time.Duration, join, retrying bool, state *atomic.Int32) (time.Duration, error) {
	if err := o.acquire(ctx); err != nil {
		return 0, l.ctxErr(ctx)
	}
	defer o.release()
	if ctx.Err() != nil {
		// Ended before anything was sent: send nothing. (A fair waiter's
		// departure may already have run; a join now would undo it.)
		return 0, l.ctxErr(ctx)
	}
	if o.unsure && o.resend && retrying {
		// The previous attempt of this Lock call went unanswered and no
		// other call of the owner came between: this one is its re-send.
		o.unsure, o.resend = false, false
	}
	if o.count > 0 && o.ended() {
		// The owner was told its holds were lost: start afresh, giving
		// back any the server still has (a loss reported when the lease
		// had certainly run out, by a reply that came later still).
		o.setCount(0)
		o.unsure = true
	}
	if err := l.settleLocked(ctx, o); err != nil {
		return 0, err
	}
	watchdogMode := lease == base.WatchdogMode
	if watchdogMode {
		lease = l.c.wd.LeaseDuration()
	}
	sent := time.Now()
	res, sync, syncErr, err := l.runAcquire(ctx, o, lease, join)
	if err != nil {
		if unknownOutcome(err) {
			o.unsure = true // the owner is entitled to o.count, as before
			o.resend = retrying && (state == nil || state.Load() == attemptPending)
			if !o.resend {
				l.settleNow(ctx, o)
			}
		}
		return 0, fmt.Errorf("rlock: acquiring %q: %w", l.name, err)
	}
	switch res[0] {
	case -1: // the owner re-entered a lock it no longer held
		return 0, l.lostAtReentry(o, "was no longer held at re-entry")
	case 0:
		if o.count > 0 { // the owner believed it held the lock: it was lost
			_ = l.lostAtReentry(o, "was no longer held at re-entry")
		}
		return time.Duration(res[1]) * time.Millisecond, nil
	}
	if syncErr != nil || sync.Unsynced() {
		return 0, l.undoUnreplicated(ctx, o, res[1], sync, syncErr)
	}
	if watchdogMode && time.Since(sent) >= lease {
		// The reply came after the lease counted from the send: the
		// script may have run late (a server frozen meanwhile), so the
		// hold may still stand. Ask once rather than report it lost.
		held, rsent, err := l.stillHeld(ctx, o, lease)
		if err != nil {
			o.unsure = true // the grant may stand: give it back
			l.settleNow(ctx, o)
			return 0, fmt.Errorf("rlock: acquiring %q: checking a grant whose reply came late: %w", l.name, err)
		}
		if !held {
			return l.grantExpired(o)
		}
		sent = rsent
	}
	l.adopt(o, res[1], res[2], lease, watchdogMode, sent)
	ttl, err := l.keepOrRelease(ctx, o, state)
	if g := GrantFrom(ctx); g != nil && err == nil {
		g.Reentry = res[1] > 1 // the server's count: it held before this grant
		hp := o.holding.Load()
		g.Done, g.Err = hp.done(), hp.err
		g.Ctx, g.Until = hp.ctx, hp.knownUntil
	}
	return ttl, err
}

// stillHeld renews the lease of o's owner once and reports whether the
// owner still holds the lock, and when the renewal was sent.
func (l *Lock) stillHeld(ctx context.Context, o *ownerState, lease time.Duration) (bool, time.Time, error) {
	sent := time.Now()
	res, err := l.c.run(context.WithoutCancel(ctx), lua.Renew, []string{l.name},
		lease.Milliseconds(), o.key.field).Int64Slice()
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%w: renew script replied %v", base.ErrUnexpectedReply, res)
	}
	return err == nil && res[0] == 1, sent, err
}

// grantExpired handles a grant whose lease ran out before its reply came:
// a first hold is simply not obtained (a waiting Lock tries again); a
// re-entry means the owner's holds are lost.
func (l *Lock) grantExpired(o *ownerState) (time.Duration, error) {
	if o.count == 0 {
		return 0, nil
	}
	return 0, l.lostAtReentry(o, "ran out of lease before the re-entry's reply came")
}

// lostAtReentry records that the owner's holds were found gone at a
// re-entry: it ends the holding and returns the loss.
func (l *Lock) lostAtReentry(o *ownerState, why string) error {
	o.setCount(0)
	lost := fmt.Errorf("%w: %q %s", base.ErrLockLost, l.name, why)
	o.stopRenewal(lost)
	return lost
}

// runAcquire sends the acquire script of the lock's kind and checks the
// shape of its reply: {1, holds, token}, {0, wait} or {-1, 0}.
func (l *Lock) runAcquire(ctx context.Context, o *ownerState, lease time.Duration, join bool) ([]int64, replsync.Result, error, error) {
	script, args := lua.Lock, []any{lease.Milliseconds(), o.key.field, o.count, boolArg(l.cfg.Fencing)}
	if l.cfg.Kind == Fair {
		script = lua.FairLock
		args = append(args, l.cfg.QueueTimeout.Milliseconds(), boolArg(join), l.channel, base.UnlockMessage)
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
func (l *Lock) undoUnreplicated(ctx context.Context, o *ownerState, holds int64, sync replsync.Result, syncErr error) error {
	why := fmt.Errorf("%w: none of %d replicas acknowledged %q within %v", base.ErrNotReplicated, sync.Replicas, l.name, l.c.sync.Timeout())
	if syncErr != nil {
		why = fmt.Errorf("%w: %q: %w", base.ErrNotReplicated, l.name, syncErr)
	}
	o.setCount(holds)
	if err := l.releaseLocked(ctx, o); err != nil {
		return fmt.Errorf("%w (and undoing the acquisition: %w)", why, err)
	}
	return why
}

// adopt records a grant or re-entry: the owner's hold count, the holding
// period (a new one after a release or loss), and what protects it. A
// re-entry never takes protection away: an explicit lease on a hold the
// watchdog renews leaves the watchdog on, and the script never shortens
// the TTL.
func (l *Lock) adopt(o *ownerState, holds, token int64, lease time.Duration, watchdogMode bool, sent time.Time) {
	o.setCount(holds)
	hp := o.holding.Load()
	if hp == nil || hp.ended() { // a new holding
		if o.watch != nil {
			o.watch.Stop()
			o.watch = nil
		}
		o.lease = 0
		hp = newHolding(token)
		o.holding.Store(hp)
	}
	switch {
	case watchdogMode:
		o.lease = lease
		if o.watch == nil {
			hp.keepAlive()
			o.watch = l.watch(o, hp, sent)
		}
	case o.watch == nil:
		o.lease = max(o.lease, lease)
		l.expireAt(o, hp, sent.Add(lease))
	}
	l.last.Store(hp)
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
		l.c.lost(o, hp, fmt.Errorf("%w: the lease of %q ran out", base.ErrLockLost, l.name))
	})
}

// keepOrRelease keeps a grant only if ctx is still alive and the caller
// still waits; checking ctx first keeps a synchronous caller's contract ("a
// Lock whose ctx ended holds no more than before") too. Otherwise it
// releases the hold again and returns ctx's error.
func (l *Lock) keepOrRelease(ctx context.Context, o *ownerState, state *atomic.Int32) (time.Duration, error) {
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
	if err := l.releaseLocked(ctx, o); err != nil {
		return 0, fmt.Errorf("%w (and releasing the hold obtained after it: %w)", l.ctxErr(ctx), err)
	}
	return 0, l.ctxErr(ctx)
}

func (l *Lock) watch(o *ownerState, hp *holding, sent time.Time) *renewal.Lease {
	w := l.c.wd.Add(l.name, o.key.field, sent, func(err error) { l.c.lost(o, hp, err) })
	if hp != nil {
		hp.watch.Store(w)
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
