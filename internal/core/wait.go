package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/waiters"
)

// wait is a blocking Lock: it attempts, waits as the kind's waitPlan says
// and attempts again until the owner holds the lock, an attempt fails for
// good, ctx ends or the client closes. When the owner's last waiting call
// returns without the lock, the owner leaves the line (see leave).
func (l *Lock) wait(ctx context.Context, o *ownerState, lease time.Duration) (err error) {
	o.waiting.Add(1)
	defer func() {
		if o.waiting.Add(-1) == 0 && err != nil {
			l.leave(o)
		}
	}()
	start := l.c.ev.now()
	ws := &waitState{l: l, o: o, req: request{lease: lease, retrying: true}, plan: l.kind.waitPlan(o.key.field)}
	defer func() { l.acquireDone(o, start, ws.waited, ws.woken, err) }()
	ws.req.queue = ws.plan.queue
	if ws.plan.registers {
		ws.req.waiting = &ws.plan
	}
	w, out, err := l.join(ctx, ws)
	if w == nil {
		return ws.done(err)
	}
	defer w.Leave()
	ws.req.joined = true
	if ws.plan.registers && !w.Registers() {
		// The client closed after the refused attempt registered it, and
		// Close may have unregistered it from the channels it knew of
		// without this one: this call does.
		l.c.unregisterNow(ws.plan.channel)
		return ws.done(base.ErrClosed)
	}
	ws.startWaiting()
	defer ws.stopWaiting()
	return ws.done(l.waitAndRetry(ctx, w, ws, out))
}

// join makes the call a waiter on the plan's channel. A call that waits
// behind the client's others joins before trying; any other attempts
// first, and joins only if that leaves it waiting. A nil waiter means the
// call is over: err nil, the owner holds the lock.
func (l *Lock) join(ctx context.Context, ws *waitState) (*waiters.Waiter, outcome, error) {
	if ws.plan.behind && !ws.o.held.Load() {
		if w := l.c.hub.JoinBehind(ws.plan.channel); w != nil {
			return w, outcome{kind: notTried}, nil
		}
	}
	early, after := l.joinEarly(ws.plan)
	first := ws.req
	first.joined, first.first = early != nil, true // an early waiter counts itself
	out, err := ws.retryable(l.attempt(ctx, ws.o, first))
	if err != nil || out.kind == acquired {
		if early != nil {
			early.Leave()
		}
		return nil, out, err
	}
	if hook := testHookAttempted.Load(); hook != nil {
		(*hook)(ctx)
	}
	if early != nil {
		return early, out, nil
	}
	join := l.c.hub.Join
	if after {
		join = l.c.hub.JoinAfter
	}
	w, ok := join(ws.plan.channel)
	if !ok {
		if ws.plan.registers {
			l.c.unregisterNow(ws.plan.channel) // see wait
		}
		return nil, out, base.ErrClosed
	}
	if ws.plan.prefer {
		w.Prefer()
	}
	return w, out, nil
}

// joinEarly joins a plan's channel before the first attempt when the
// plan asks for it: a release published between a refused attempt and a
// later join would wake only the client's other waiters (a read-write
// lock's waiters do not pass on a wake-up they cannot use), and this call
// would sleep until its poll. Joined first, it gets every message
// published after its attempt was sent. A call granted at once leaves
// again (the channel lingers for the next).
//
// Only a channel the client has already needs it, though: a new channel's
// subscription confirmation wakes its waiters, so a call that finds none
// attempts first, without touching the hub (an uncontended Lock), and
// joins after a refusal with JoinAfter (after true), which signals it at
// once if another waiter of the client created the channel meanwhile.
func (l *Lock) joinEarly(plan waitPlan) (early *waiters.Waiter, after bool) {
	if !plan.early || testJoinLate.Load() {
		return nil, false
	}
	w := l.c.hub.JoinIfListening(plan.channel)
	if w == nil {
		return nil, true // no channel yet, or closed (the attempt reports it)
	}
	if plan.prefer {
		w.Prefer()
	}
	return w, false
}

// waitAndRetry waits on w and attempts again until the owner holds the
// lock, an attempt fails for good, ctx ends or the client closes. It
// retries on a wake-up (the subscription confirmed, or a release message)
// or when the wait the last outcome allows has passed, since pub/sub is
// only a hint and expiry publishes nothing; and at least every plan.poll.
func (l *Lock) waitAndRetry(ctx context.Context, w *waiters.Waiter, ws *waitState, out outcome) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		wait := min(out.wait(l.c.maxPoll), ws.plan.poll)
		timer.Reset(wait)
		woken, err := l.sleepUntilTry(ctx, w, timer, time.Now().Add(wait), ws)
		if err != nil {
			return err
		}
		if out, err = l.retry(ctx, w, ws, woken); err != nil || out.kind == acquired {
			return err
		}
	}
}

// sleep waits for a wake-up on w or for timer, and reports which came; or
// returns the error that ends the call: ctx ended, or the client closed.
func (l *Lock) sleep(ctx context.Context, w *waiters.Waiter, timer *time.Timer, ws *waitState) (woken bool, err error) {
	select {
	case <-w.C:
		if hook := testHookWoken.Load(); hook != nil {
			(*hook)(ctx)
		}
		return true, nil
	case <-timer.C:
		return false, nil
	case <-ctx.Done():
		return false, ws.ctxErr(ctx)
	case <-l.c.closing:
		return false, base.ErrClosed
	}
}

// sleepUntilTry is sleep, except after a wake-up that designated the
// client second (see waiters.Waiter.Second): see coverFirst. timer runs
// until due.
func (l *Lock) sleepUntilTry(ctx context.Context, w *waiters.Waiter, timer *time.Timer, due time.Time, ws *waitState) (woken bool, err error) {
	woken, err = l.sleep(ctx, w, timer, ws)
	if err != nil || !woken || !ws.plan.registers || !w.Covering() {
		return woken, err
	}
	return l.coverFirst(ctx, w, timer, due, ws)
}

// coverFirst is the wait of a call whose client the last release
// designated second. The first designee's waiter, woken by the same
// release, is most likely taking the lock; the second is there in case
// the first is gone. So the call waits up to secondGrace for evidence
// that the first acted: a later release heard on the channel (the lock
// was taken and released again). Without it, it looks at the lock: if the
// lock is free, the first did not act, and the call takes that client off
// the lock's registry (a client that is gone is named first by every
// release until its registration lapses; a live one registers again with
// its next refused attempt) and tries. Otherwise it sleeps until due, or
// until the lock's TTL if that comes first, and tries then as the timer
// would have (which keeps its own registration live). A new designation
// as second starts it over; any other wake-up ends it (woken true), as
// the timer does (woken false). If the call ends before it knows whether
// the first acted, it passes the designation on. So a release costs one
// attempt, and a look only when the lock is held longer than secondGrace
// or the first designee is gone (issue 15's herd).
//
// A waiter woken because a release designated other clients and none of
// them acted within a delay (waiters.Waiter.Covering, not Second) covers
// for both the same way, without the grace (the delay was its grace), and
// takes both off the registry when it finds the lock free.
func (l *Lock) coverFirst(ctx context.Context, w *waiters.Waiter, timer *time.Timer, due time.Time, ws *waitState) (woken bool, err error) {
	for { // w's last wake-up asks it to cover for designees
		if w.Second() {
			if !resetUntil(timer, earlier(time.Now().Add(secondGrace()), due)) {
				return false, nil // due: try as the timer would have
			}
			woken, err = l.sleep(ctx, w, timer, ws)
			switch {
			case err != nil: // the call ends before it knows the first acted
				w.PassOn()
				return false, err
			case woken && !w.Covering():
				return true, nil
			case woken: // asked to cover again
				continue
			case !time.Now().Before(due):
				return false, nil
			}
		}
		until := due
		if !w.ReleasedSince() {
			ttl, held, err := l.look(ctx)
			if err != nil { // the call ends without acting on its designation
				w.PassOn()
				if errors.Is(err, base.ErrClosed) {
					return false, err
				}
				return false, ws.ctxErr(ctx)
			}
			if !held {
				for _, tag := range w.Designees() {
					l.unregister(ws.plan.channel, tag)
				}
				return true, nil
			}
			if ttl >= 0 {
				until = earlier(until, time.Now().Add(max(ttl, time.Millisecond)))
			}
		}
		if !resetUntil(timer, until) {
			return false, nil
		}
		if woken, err = l.sleep(ctx, w, timer, ws); err != nil || !woken || !w.Covering() {
			return woken, err
		}
	}
}

// defaultSecondGrace is how long a call whose client a release designated
// second waits for evidence that the first designee acted before it looks
// at the lock itself (see coverFirst): long enough for most critical
// sections to end within it, which spares the look; short enough that a
// first designee that is gone costs the lock one such wait.
const defaultSecondGrace = 100 * time.Millisecond

func secondGrace() time.Duration {
	if d := testSecondGrace.Load(); d != 0 {
		return time.Duration(d)
	}
	return defaultSecondGrace
}

// earlier returns the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// resetUntil resets timer to fire at t, and reports false (leaving it
// alone) when t has passed.
func resetUntil(timer *time.Timer, t time.Time) bool {
	left := time.Until(t)
	if left <= 0 {
		return false
	}
	timer.Reset(left)
	return true
}

// unregister takes the client of tag off the registry of the lock of
// channel, in the background: a release named it first and it did not act
// (see coverFirst).
func (l *Lock) unregister(channel, tag string) {
	if tag != "" && tag != l.c.tag {
		l.c.passOnFor(channel, tag, true, false)
	}
}

// look reads the lock's TTL without trying for it: held reports whether
// the lock exists, and ttl is negative for a lock without expiry. A read
// that fails reports the lock free, so the attempt that follows finds
// out. It returns an error only when ctx ends (at once, leaving the read
// to a background worker as attempt does) or the client is closed.
func (l *Lock) look(ctx context.Context) (ttl time.Duration, held bool, err error) {
	var d time.Duration
	var rerr error
	if err := l.c.await(ctx, func() { d, rerr = l.c.rdb.PTTL(ctx, l.name).Result() }); err != nil {
		return 0, false, err
	}
	if rerr != nil {
		return 0, false, nil
	}
	ttl, held = pttl(d)
	return ttl, held, nil
}

// retry is a waiting call's next attempt. A wake-up whose attempt fails is
// passed on to the channel's next waiter, so a failure never swallows a
// release meant for someone; and a read-write lock's reader refused
// because waiting writers keep it out of a free lock wakes a writer of
// the client (if one waits without a wake-up pending), which can take it.
func (l *Lock) retry(ctx context.Context, w *waiters.Waiter, ws *waitState, woken bool) (outcome, error) {
	ws.woken = woken
	out, err := l.attempt(ctx, ws.o, ws.req)
	switch {
	case woken && err != nil:
		w.PassOn()
	case err == nil && out.forWriter:
		w.PassOnToPreferred()
	}
	if hook := testHookRetried.Load(); hook != nil {
		(*hook)(ctx)
	}
	out, err = ws.retryable(out, err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return out, ws.ctxErr(ctx)
	}
	return out, err
}

// leave takes o's owner out of the line of a kind whose waiters stand in
// one, in the background when it can: the caller is returning and must not
// wait for Redis. It runs after any attempt still in flight (they share
// o's semaphore), and does nothing when the owner holds the lock (a grant
// already took it out of the line) or another call of the owner has
// started waiting meanwhile. If it fails, the place is dropped anyway once
// its deadline passes unrenewed.
func (l *Lock) leave(o *ownerState) {
	call, ok := l.kind.leave(o.key.field, l.c.publishArg(context.Background()))
	if !ok {
		return
	}
	l.c.retain(o)
	run := func() {
		defer l.c.putOwner(o)
		_ = o.acquire(context.Background())
		defer o.release()
		if o.count > 0 || o.waiting.Load() > 0 {
			return
		}
		if err := l.sendLeave(call); err != nil {
			l.c.logger().Warn("rlock: leaving the line failed; the place lapses at its deadline",
				"lock", l.name, "owner", o.key.field, "err", err)
		}
	}
	if !l.c.goBackground(run) {
		run()
	}
}

// leaveTries bounds how often a leave is sent when Redis does not answer
// it: leaving is idempotent, and a place left behind holds up the waiters
// behind it until its deadline (the queue timeout, 30 s by default).
const leaveTries = 4

// sendLeave sends call, a leave, and sends it again (pausing 10, 20, 40
// ms) while its outcome is unknown or the failure transient.
func (l *Lock) sendLeave(call scriptCall) error {
	for try := 0; ; try++ {
		err := l.c.runCall(context.Background(), call).Err()
		if err == nil || try == leaveTries-1 || !transient(err) {
			return err
		}
		time.Sleep(transientPause << try)
	}
}

// Pauses of a waiting Lock before it tries again after a failure it
// outlives: an acquisition undone because no replica acknowledged it, and
// transient Redis errors (doubling from the first to the most).
const (
	notReplicatedPause = 100 * time.Millisecond
	transientPause     = 10 * time.Millisecond
	transientPauseMax  = time.Second
)

// waitState is one waiting Lock call: what it asks, how it waits, the last
// transient error (reported with ctx's error if ctx ends before a grant),
// and how many came in a row.
type waitState struct {
	l      *Lock
	o      *ownerState
	req    request
	plan   waitPlan
	last   error
	failed Outlive // the transient failures in a row

	waited bool // it waited for a release (for its acquire event)
	woken  bool // its last attempt followed a wake-up
}

// retryable turns the failures a waiting Lock outlives into a pause before
// the next attempt: an acquisition undone for lack of replica
// acknowledgement, and a transient Redis error (a timeout, a broken
// connection, a failover under way). Any other error is returned.
func (ws *waitState) retryable(out outcome, err error) (outcome, error) {
	l := ws.l
	switch {
	case err == nil:
		ws.failed = Outlive{}
		return out, nil
	case errors.Is(err, base.ErrNotReplicated):
		l.c.logger().Warn("rlock: acquisition undone, no replica acknowledged it; trying again", "lock", l.name, "owner", ws.o.key.field, "err", err)
		return pausedFor(notReplicatedPause), nil
	case transient(err):
		ws.last = err
		pause, gone := ws.failed.transient(l.c, l.name, err)
		if gone != nil {
			return out, gone
		}
		l.c.logger().Debug("rlock: attempt failed; trying again", "lock", l.name, "owner", ws.o.key.field, "err", err, "pause", pause)
		return pausedFor(pause), nil
	}
	return out, err
}

// done ends a blocking Lock call with err: when the call gives up after
// an attempt whose reply was lost (which it would have sent again), a hold
// that attempt may have taken is given back, in the background.
func (ws *waitState) done(err error) error {
	if err != nil && ws.last != nil {
		// The last attempt's outcome, or an earlier one's that it was
		// to send again, may be unknown: settleSoon settles if so.
		ws.l.settleSoon(ws.o)
	}
	return err
}

// ctxErr is ctx's error, with the last transient error if there was one.
func (ws *waitState) ctxErr(ctx context.Context) error {
	if ws.last != nil {
		return fmt.Errorf("rlock: waiting for %q: %w (last error: %w)", ws.l.name, ctx.Err(), ws.last)
	}
	return ws.l.ctxErr(ctx)
}

// transient reports whether err is a failure to reach Redis, or a reply
// that says to try again later, rather than a final answer. An error a
// script raised while it ran is final (a key of another type stays so),
// but for the cluster's non-local-key error, which passes with the slot's
// migration (see ranInPart).
func transient(err error) bool {
	for _, final := range []error{base.ErrClosed, base.ErrUnreachable, base.ErrInvalidArgument, base.ErrLockLost,
		base.ErrUnexpectedReply, base.ErrNotHeld, base.ErrNotObtained, base.ErrUpgrade, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, final) {
			return false
		}
	}
	// No reply at all is a timeout, a broken or refused connection.
	return !isReply(err) || nonLocalKey(err) ||
		isReply(err, "LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "BUSY", "NOREPLICAS", "MOVED", "ASK")
}

// unknownOutcome reports whether a script call that failed with err may
// have changed the server: no reply was read and the failure does not
// prove that nothing was sent (see notSentError), or the reply is an
// error raised while the script ran, after writes it may have made (see
// ranInPart). Any other error reply comes before the script runs.
func unknownOutcome(err error) bool {
	return err != nil && (ranInPart(err) || !isReply(err) && !wasNotSent(err))
}

// ranInPart reports whether err is the error reply of a script that Redis
// stopped while it ran, keeping what it had written (Redis does not roll
// a script back): an error a redis.call raised (WRONGTYPE on a key of
// another type under one of the lock's derived keys, a counter that is not
// an integer, a cluster's non-local key; see nonLocalKey) or a Lua runtime
// error, wherever in the script it came (docs/safety.md lists the calls
// that can fail after a script's first write). Not such replies: the
// scripts' own refusals (returned with redis.error_reply, before any
// write), and the refusals Redis raises only at a script's first write
// (out of memory, a read-only replica, a failed save, too few replicas),
// which prove that the script wrote nothing.
func ranInPart(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := reply.Error()
	return raisedInScript(msg) && !isReply(err, "OOM", "READONLY", "MISCONF", "NOREPLICAS")
}

// raisedInScript reports whether msg is an error reply raised inside a
// running script rather than returned by it. Redis 7 ends such a reply
// with " script: <SHA1>, on @user_script:<line>." (a script's own
// redis.error_reply, returned, has no such tail); Redis 6 starts it with
// "ERR Error running script"; miniredis (v2.40) starts every error a
// script raises with "ERR Error compiling script" (it says so of runtime
// errors too; rlock's scripts always compile).
func raisedInScript(msg string) bool {
	return strings.Contains(msg, ", on @user_script:") ||
		strings.HasPrefix(msg, "ERR Error running script") || strings.HasPrefix(msg, "ERR Error compiling script")
}

// nonLocalKey reports whether err is the error reply of a script that a
// cluster node stopped when it touched a key it did not declare (a read
// hold's timeout key, a writer's until key) whose slot the node did not
// serve there and then, which is the case mid-migration for a key not on
// the node (issue 27: a read re-entry had added its hold to the hash when
// it was stopped before writing the hold's timeout key). It ran in part,
// and the reply passes with the migration, so it is also transient.
func nonLocalKey(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply) && strings.Contains(reply.Error(), "attempted to access a non local key")
}
