package core

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/replsync"
)

// request is what one Lock call asks of each of its attempts.
type request struct {
	lease    time.Duration // base.WatchdogMode or an explicit lease
	queue    bool          // queue the owner, or renew its place (a kind with a line)
	retrying bool          // a blocking Lock: an attempt whose reply was lost is sent again by the next
	// waiting: the call's wait plan, for a waiting call whose attempts
	// register the client (waitPlan.registers); joined: the call is one of
	// the channel's waiters already.
	waiting *waitPlan
	joined  bool
	first   bool // the call's first attempt (see registration.behind)
}

// queueing is what req's attempt asks of a kind with a queue: nothing
// for a one-shot attempt; to join for a waiting call's first attempt; to
// renew the owner's place for its later ones.
func (req request) queueing() queueing {
	switch {
	case !req.queue:
		return noQueue
	case req.first:
		return joinQueue
	}
	return renewPlace
}

// outcomeKind names what an attempt found, for a caller that did not get
// an error.
type outcomeKind uint8

const (
	notTried     outcomeKind = iota // no attempt yet: wait for a wake-up, polling
	acquired                        // the owner holds the lock now
	busy                            // another owner holds it (or is ahead in line) for at most ttl
	busyNoExpiry                    // another owner holds it without expiry: poll
	lapsed                          // the grant's lease ran out before its reply came: try again at once
	paused                          // a failure a waiting Lock outlives: try again after ttl
)

// outcome is what an attempt found, and how long the next may wait.
type outcome struct {
	kind outcomeKind
	ttl  time.Duration // busy: the lock's TTL; paused: the pause
	// forWriter: busy, the lock being free but kept for a read-write
	// lock's waiting writers (a reader's refusal); a waiting writer can
	// take it.
	forWriter bool
}

// busyFor is the outcome of a refusal whose lock has ttl left, negative
// for none.
func busyFor(ttl time.Duration) outcome {
	if ttl < 0 {
		return outcome{kind: busyNoExpiry}
	}
	return outcome{kind: busy, ttl: ttl}
}

// pausedFor is the outcome of a failure outlived by pausing d.
func pausedFor(d time.Duration) outcome { return outcome{kind: paused, ttl: d} }

// wait is how long to wait after out before the next attempt, given the
// client's longest wait on a lock without expiry.
func (out outcome) wait(maxPoll time.Duration) time.Duration {
	switch out.kind {
	case notTried, busyNoExpiry:
		return maxPoll // nothing else bounds the wait
	case lapsed:
		return time.Millisecond
	}
	return max(out.ttl, time.Millisecond)
}

// States of an attempt that runs in the background (see attempt).
const (
	attemptPending   int32 = iota // the caller waits for the result
	attemptClaimed                // the attempt got the lock and the caller takes it
	attemptAbandoned              // the caller left with ctx's error
)

// attempt runs the acquire script once for o's owner and says what it
// found.
//
// An attempt is never abandoned, since its outcome must be known: when ctx
// ends first, attempt returns ctx's error at once and the attempt finishes
// in the background, releasing the hold again if it was granted. The
// caller and the background attempt agree through one state word on which
// of the two happened, so a grant is never both kept and reported as
// ctx's error (regression: TestLateGrantIsNeverLeaked).
func (l *Lock) attempt(ctx context.Context, o *ownerState, req request) (outcome, error) {
	if ctx.Done() == nil { // cannot end: no need for a goroutine
		return l.attemptLocked(ctx, o, req, nil)
	}
	if inline(ctx) { // the combinator's goroutine is the background: Close waits for it
		if !l.c.enterBackground() {
			return outcome{}, base.ErrClosed
		}
		defer l.c.bg.Done()
		return l.attemptLocked(ctx, o, req, nil)
	}
	if l.c.waitsOnPipeliner() { // the caller can wait for the reply or ctx itself
		return l.attemptPipelined(ctx, o, req)
	}
	return l.attemptOnWorker(ctx, o, req)
}

// attemptOnWorker is attempt on a background worker, while the caller
// waits for its result or for ctx.
func (l *Lock) attemptOnWorker(ctx context.Context, o *ownerState, req request) (outcome, error) {
	type result struct {
		out outcome
		err error
	}
	done := make(chan result, 1)
	var state atomic.Int32 // attemptPending, attemptClaimed or attemptAbandoned
	l.c.retain(o)
	run := func() {
		defer l.c.putOwner(o)
		out, err := l.attemptLocked(ctx, o, req, &state)
		done <- result{out, err}
	}
	if !l.c.goBackground(run) {
		l.c.putOwner(o)
		return outcome{}, base.ErrClosed
	}
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(attemptPending, attemptAbandoned) {
			return outcome{}, l.ctxErr(ctx)
		}
		// The attempt claimed a grant before ctx ended: the owner holds
		// the lock, and the result is on its way.
		r := <-done
		return r.out, r.err
	}
}

// inline reports whether a combinator asks for the attempt to run on the
// calling goroutine (see Grant.Inline).
func inline(ctx context.Context) bool {
	g := GrantFrom(ctx)
	return g != nil && g.Inline
}

// callerWaits reports whether the caller still waits for the attempt
// whose state is state (nil: it runs in the caller's goroutine).
func callerWaits(state *atomic.Int32) bool {
	return state == nil || state.Load() == attemptPending
}

// attemptLocked is attempt, run to the end whatever ctx does. A hold
// granted after ctx ended, or after the caller stopped waiting for it
// (state, when the attempt runs in the background), is released again and
// ctx's error returned.
//
// req.retrying says the caller (a blocking Lock) tries again after a
// failure: an attempt whose reply was lost is then not settled but simply
// sent again by the next attempt, which the script answers as a re-send (a
// grant that stood is the caller's). Otherwise, or when the caller has
// left, it is settled at once (a grant the caller was not told of is given
// back).
func (l *Lock) attemptLocked(ctx context.Context, o *ownerState, req request, state *atomic.Int32) (outcome, error) {
	if err := o.acquire(ctx); err != nil {
		return outcome{}, l.ctxErr(ctx)
	}
	defer o.release()
	if err := l.prepare(ctx, o, req.retrying); err != nil {
		return outcome{}, err
	}
	at := sentAttempt{req: req, lease: l.c.leaseOf(req.lease), sent: time.Now(), state: state}
	rep, err := l.sendAcquire(ctx, o, at.lease, req)
	return l.conclude(ctx, o, at, rep, err)
}

// sentAttempt is what concluding an attempt needs to know of it besides
// its reply.
type sentAttempt struct {
	req   request
	lease time.Duration // the lease asked for (the watchdog's, in watchdog mode)
	sent  time.Time
	state *atomic.Int32 // nil: the caller waits on this goroutine (see attempt)
}

// conclude acts on an attempt's reply rep, or its failure err, and says
// what the attempt found: a grant is adopted, and kept only while ctx is
// alive and the caller waits (see keepOrRelease). o's semaphore must be
// held.
func (l *Lock) conclude(ctx context.Context, o *ownerState, at sentAttempt, rep acquireReply, err error) (outcome, error) {
	req, lease, sent, state := at.req, at.lease, at.sent, at.state
	if err == nil && o.unsure && o.resend {
		o.unsure, o.resend = false, false // the reply of a re-send (see prepare)
	}
	switch {
	case err != nil:
		// A waiting caller sends the call again only after a transient
		// failure; a final one (a script stopped by WRONGTYPE after a
		// grant, say) is settled at once.
		return outcome{}, l.acquireFailed(ctx, o, err, lease, req.retrying && callerWaits(state) && transient(err))
	case rep.kind == goneAtReentry:
		return outcome{}, l.lostAtReentry(o, "was no longer held at re-entry")
	case rep.kind == upgradeRefused:
		return outcome{}, fmt.Errorf("%w: %q", base.ErrUpgrade, l.name)
	case rep.kind == refused:
		out := l.refused(o, rep.wait)
		out.forWriter = rep.forWriter
		return out, nil
	case rep.syncErr != nil || rep.sync.Unsynced():
		return outcome{}, l.undoUnreplicated(ctx, o, rep)
	}
	if req.lease == base.WatchdogMode && time.Since(sent) >= lease {
		held, rsent, err := l.confirmLateGrant(ctx, o, lease)
		if !held {
			return outcome{kind: lapsed}, err
		}
		sent = rsent
	}
	l.adopt(o, rep, lease, req.lease == base.WatchdogMode, sent)
	if err := l.keepOrRelease(ctx, o, state); err != nil {
		return outcome{}, err
	}
	reportGrant(ctx, o, rep.holds)
	return outcome{kind: acquired}, nil
}

// prepare readies o for an attempt: it sends nothing once ctx has ended
// (a fair waiter's departure may already have run; a join now would undo
// it), recognises the re-send of this call's unanswered attempt, starts
// afresh after a loss the owner was told of, and settles an earlier call
// whose outcome is unknown.
func (l *Lock) prepare(ctx context.Context, o *ownerState, retrying bool) error {
	if ctx.Err() != nil {
		return l.ctxErr(ctx)
	}
	if o.count > 0 && o.ended() {
		// The owner was told its holds were lost: start afresh, giving
		// back any the server still has (a loss reported when the lease
		// had certainly run out, by a reply that came later still).
		o.setCount(0)
		l.markUnsure(o, 0)
	} else if o.unsure && o.resend && retrying {
		// The previous attempt of this Lock call went unanswered and no
		// other call of the owner came between: this one is its re-send,
		// and its reply settles both (see conclude). Until a reply comes
		// the owner stays unsure: this attempt may fail before it is sent.
		return nil
	}
	return l.settleLocked(ctx, o)
}

// toSettle reports whether prepare would settle an earlier call of o's
// owner before an attempt of a call that retries or not (see prepare),
// which waits for Redis. o's semaphore must be held.
func (o *ownerState) toSettle(retrying bool) bool {
	return (o.unsure && !(o.resend && retrying)) || (o.count > 0 && o.ended())
}

// replyKind names an acquire script's answer.
type replyKind uint8

const (
	granted        replyKind = iota // the owner holds the lock: holds and token
	refused                         // not granted: wait at most wait
	goneAtReentry                   // the owner re-entered a lock it no longer held
	upgradeRefused                  // a read-write lock's writer asked while its owner reads
)

// acquireReply is an acquire script's reply, with its replication.
type acquireReply struct {
	kind         replyKind
	holds, token int64         // granted: the owner's hold count, the fencing token (0: none)
	wait         time.Duration // refused: the lock's TTL, negative for none
	forWriter    bool          // refused: the lock is free, kept for waiting writers (see outcome)
	sync         replsync.Result
	syncErr      error // the script ran but WAIT failed: replication unknown
}

// parseAcquireReply recognises the three replies every acquire script
// gives: {1, holds ≥ 1, token ≥ 0} for a grant, {0, wait ms} for a
// refusal, and {-1, 0} for a re-entry that found the owner's holds gone;
// the read-write lock reader's {0, wait ms, 1}: refused, the lock being
// free but kept for waiting writers; and the read-write lock writer's
// {-2, 0}: refused for good, as its owner holds the read lock (an
// upgrade). Anything else is not a reply of an acquire script.
func parseAcquireReply(res []int64) (acquireReply, bool) {
	switch {
	case len(res) == 3 && res[0] == 1 && res[1] >= 1 && res[2] >= 0:
		return acquireReply{kind: granted, holds: res[1], token: res[2]}, true
	case len(res) == 2 && res[0] == 0:
		return acquireReply{kind: refused, wait: time.Duration(res[1]) * time.Millisecond}, true
	case len(res) == 3 && res[0] == 0 && res[2] == 1:
		return acquireReply{kind: refused, wait: time.Duration(res[1]) * time.Millisecond, forWriter: true}, true
	case len(res) == 2 && res[0] == -1:
		return acquireReply{kind: goneAtReentry}, true
	case len(res) == 2 && res[0] == -2:
		return acquireReply{kind: upgradeRefused}, true
	}
	return acquireReply{}, false
}

// sendAcquire sends the kind's acquire script for o's owner, with replica
// sync when it is on, and parses its reply.
func (l *Lock) sendAcquire(ctx context.Context, o *ownerState, lease time.Duration, req request) (acquireReply, error) {
	call := l.kind.acquire(o.key.field, o.count, lease, req.queueing(), l.c.publishArg(ctx), l.c.registration(req))
	cmd, sync, syncErr := l.c.runAcquire(detached(ctx), call.script, call.keys, call.args...)
	rep, err := acquireReplyOf(cmd)
	if err != nil {
		return acquireReply{}, err
	}
	rep.sync, rep.syncErr = sync, syncErr
	return rep, nil
}

// acquireReplyOf reads an acquire script call's reply, or its failure.
func acquireReplyOf(cmd *redis.Cmd) (acquireReply, error) {
	res, err := lua.AcquireReply(cmd)
	if err != nil {
		return acquireReply{}, err
	}
	rep, ok := parseAcquireReply(res)
	if !ok {
		return acquireReply{}, fmt.Errorf("%w: acquire script replied %v", base.ErrUnexpectedReply, res)
	}
	return rep, nil
}

// registration is what an attempt of req tells the acquire script about
// this client: nothing unless req is a waiting call that registers it.
func (c *Client) registration(req request) registration {
	if req.waiting == nil {
		return registration{}
	}
	others, listening := c.hub.Waiting(req.waiting.channel)
	if req.joined {
		others--
	}
	reg := registration{tag: c.tag, others: others > 0, unregistered: !listening, poll: c.maxPoll}
	if req.first && others > 0 && req.waiting.behindFirst {
		writers := c.hub.Preferred(req.waiting.channel)
		if req.joined {
			writers-- // itself (a plan that prefers joins preferred)
		}
		reg.behind = writers > 0
	}
	return reg
}

// acquireFailed handles an acquire script call that failed with err. A
// failure before the script was sent is certain (see unknownOutcome). When
// no reply came, the script may have run: the owner is still entitled to
// the holds it had; the call is either sent again by its caller (resend)
// or settled at once.
func (l *Lock) acquireFailed(ctx context.Context, o *ownerState, err error, lease time.Duration, resend bool) error {
	if unknownOutcome(err) {
		l.markUnsure(o, lease)
	}
	if o.unsure { // this call's outcome, or that of the attempt it sent again, is unknown
		o.resend = resend
		if !resend {
			l.settleNow(ctx, o)
		}
	}
	return fmt.Errorf("rlock: acquiring %q: %w", l.name, err)
}

// refused handles a refusal: if the owner believed it held the lock, its
// holds were lost.
func (l *Lock) refused(o *ownerState, wait time.Duration) outcome {
	if o.count > 0 {
		_ = l.lostAtReentry(o, "was no longer held at re-entry")
	}
	return busyFor(wait)
}

// confirmLateGrant handles a grant whose reply came after the lease
// counted from the send: the script may have run late (a server frozen
// meanwhile), so the hold may still stand. It asks once rather than report
// it lost, and reports whether the owner holds the lock and when the
// question was sent. Not held, a first hold is simply not obtained (a
// waiting Lock tries again) and a re-entry means the holds are lost (the
// error).
func (l *Lock) confirmLateGrant(ctx context.Context, o *ownerState, lease time.Duration) (bool, time.Time, error) {
	sent := time.Now()
	held, err := l.renew(ctx, o, lease)
	switch {
	case err != nil:
		if hp := o.holding.Load(); o.count > 0 && o.watch == nil && unknownOutcome(err) {
			// The renewal may have set the lease of the holds there were.
			l.leaseFailed(o, hp, false, hp.knownUntil(), sent, lease, true)
		}
		l.markUnsure(o, lease) // the grant may stand: give it back
		l.settleNow(ctx, o)
		return false, sent, fmt.Errorf("rlock: acquiring %q: checking a grant whose reply came late: %w", l.name, err)
	case !held && o.count > 0:
		return false, sent, l.lostAtReentry(o, "ran out of lease before the re-entry's reply came")
	}
	return held, sent, nil
}

// lostAtReentry records that the owner's holds were found gone at a
// re-entry: it ends the holding and returns the loss.
func (l *Lock) lostAtReentry(o *ownerState, why string) error {
	o.setCount(0)
	lost := base.Lost(base.LossNotHeldAtReentry, fmt.Errorf("%w: %q %s", base.ErrLockLost, l.name, why))
	o.stopRenewal(lost)
	return lost
}

// undoUnreplicated releases a grant that no replica is known to have (a
// failover now could hand the lock to someone else) and says why.
func (l *Lock) undoUnreplicated(ctx context.Context, o *ownerState, rep acquireReply) error {
	why := fmt.Errorf("%w: none of %d replicas acknowledged %q within %v", base.ErrNotReplicated, rep.sync.Replicas, l.name, l.c.sync.Timeout())
	if rep.syncErr != nil {
		why = fmt.Errorf("%w: %q: %w", base.ErrNotReplicated, l.name, rep.syncErr)
	}
	o.setCount(rep.holds)
	if err := l.releaseLocked(ctx, o); err != nil {
		return fmt.Errorf("%w (and undoing the acquisition: %w)", why, err)
	}
	return why
}

// adopt records a grant or re-entry: the owner's hold count, its holding
// (a new one after a release or loss), and what protects it. A re-entry
// never takes protection away: an explicit lease on a hold the watchdog
// renews leaves the watchdog on, and the script never shortens the TTL.
func (l *Lock) adopt(o *ownerState, rep acquireReply, lease time.Duration, watchdogMode bool, sent time.Time) {
	o.setCount(rep.holds)
	hp := o.holding.Load()
	if hp == nil || hp.ended() { // a new holding
		if o.watch != nil {
			o.watch.Stop()
			o.watch = nil
		}
		o.lease = 0
		hp = newHolding(rep.token)
		hp.began(l, o)
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

// keepOrRelease keeps a grant only if ctx is still alive and the caller
// still waits; checking ctx first keeps a synchronous caller's contract ("a
// Lock whose ctx ended holds no more than before") too. Otherwise it
// releases the hold again and returns ctx's error.
func (l *Lock) keepOrRelease(ctx context.Context, o *ownerState, state *atomic.Int32) error {
	keep := ctx.Err() == nil
	if keep && state != nil {
		if hook := testHookGranted.Load(); hook != nil {
			(*hook)(ctx)
		}
		keep = state.CompareAndSwap(attemptPending, attemptClaimed)
	}
	if keep {
		return nil
	}
	if err := l.releaseLocked(ctx, o); err != nil {
		return fmt.Errorf("%w (and releasing the hold obtained after it: %w)", l.ctxErr(ctx), err)
	}
	return l.ctxErr(ctx)
}
