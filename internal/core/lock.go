package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/waiters"
)

// Kind selects a lock algorithm.
type Kind int

const (
	// Reentrant is Redisson's RLock.
	Reentrant Kind = iota
	// Fair is Redisson's RFairLock: reentrant, granted in arrival order.
	Fair
)

// DefaultQueueTimeout is how long a fair-lock waiter keeps its place
// without renewing it, unless configured otherwise.
const DefaultQueueTimeout = 30 * time.Second

// DefaultThreadWait is a fair lock's thread wait time unless configured
// otherwise: Redisson's default fairLockWaitTimeout, 5 min.
const DefaultThreadWait = 5 * time.Minute

// LockConfig configures a lock handle. The public packages validate it.
type LockConfig struct {
	Kind         Kind
	Lease        time.Duration // base.WatchdogMode or positive
	QueueTimeout time.Duration // fair only; 0: DefaultQueueTimeout
	// ThreadWait is the fair queue's thread wait time (Redisson's
	// fairLockWaitTimeout; see fair_common.lua); 0: DefaultThreadWait.
	ThreadWait time.Duration
	Fencing    bool // issue fencing tokens
}

// Lock is the engine behind a reentrant or fair lock handle.
type Lock struct {
	c       *Client
	name    string
	cfg     LockConfig
	channel string // the unlock channel; for a fair lock, the prefix of the waiters' channels
	keys    []string
	ownerID string // the handle's own owner ID
	last    atomic.Pointer[epoch]
}

// NewLock returns the engine of a handle on the lock called name. It does
// no I/O.
func (c *Client) NewLock(name string, cfg LockConfig) (*Lock, error) {
	if err := base.ValidateName(name); err != nil {
		return nil, err
	}
	if err := base.CheckLease(cfg.Lease); err != nil {
		return nil, err
	}
	if cfg.QueueTimeout == 0 {
		cfg.QueueTimeout = DefaultQueueTimeout
	}
	if cfg.ThreadWait == 0 {
		cfg.ThreadWait = DefaultThreadWait
	}
	l := &Lock{
		c:       c,
		name:    name,
		cfg:     cfg,
		channel: base.Channel(name),
		ownerID: "#" + strconv.FormatUint(c.handles.Add(1), 10),
	}
	token := base.DerivedKey(base.TokenPrefix, name)
	if cfg.Kind == Fair {
		l.keys = []string{name, base.DerivedKey(base.QueuePrefix, name), base.DerivedKey(base.TimeoutPrefix, name), token}
	} else {
		l.keys = []string{name, token}
	}
	return l, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Lease returns the handle's lease setting.
func (l *Lock) Lease() time.Duration { return l.cfg.Lease }

// Owner returns the owner field for ctx: the explicit owner carried by
// ctx, or this handle's own.
func (l *Lock) Owner(ctx context.Context) (string, error) {
	if err := base.CheckContext(ctx); err != nil {
		return "", err
	}
	id, ok, err := base.OwnerFrom(ctx)
	if err != nil {
		return "", err
	}
	if !ok {
		id = l.ownerID
	}
	return l.c.id + ":" + id, nil
}

// Lock blocks until the caller's owner holds the lock (see the public
// packages for the contract).
func (l *Lock) Lock(ctx context.Context) error { return l.lock(ctx, true, l.cfg.Lease) }

// TryLock makes one attempt.
func (l *Lock) TryLock(ctx context.Context) error { return l.lock(ctx, false, l.cfg.Lease) }

// LockLease is Lock with lease for this acquisition.
func (l *Lock) LockLease(ctx context.Context, lease time.Duration) error {
	return l.lock(ctx, true, lease)
}

// TryLockLease is TryLock with lease for this acquisition.
func (l *Lock) TryLockLease(ctx context.Context, lease time.Duration) error {
	return l.lock(ctx, false, lease)
}

func (l *Lock) lock(ctx context.Context, wait bool, lease time.Duration) error {
	if err := base.CheckLease(lease); err != nil {
		return err
	}
	field, err := l.Owner(ctx)
	if err != nil {
		return err
	}
	if err := l.ready(ctx); err != nil {
		return err
	}
	h := l.c.holdFor(l.name, field)
	defer l.c.putHold(h)
	if !wait {
		ttl, err := l.attempt(ctx, h, lease, false, false)
		if err == nil && ttl != acquired {
			err = l.notObtained()
		}
		return err
	}
	if l.cfg.Kind == Fair {
		return l.lockFair(ctx, h, lease)
	}

	// While other calls of this client wait for the lock, a new one queues
	// behind them instead of trying first (unless its owner holds the lock
	// and re-enters): one attempt fewer per grant under contention, and
	// grants go round the client's waiters in arrival order.
	var w *waiters.Waiter
	ws := waitState{l: l}
	ttl := time.Duration(-1) // unknown: the first wait is bounded by max-poll
	if !h.held.Load() {
		w = l.c.hub.JoinBehind(l.channel)
	}
	if w == nil {
		ttl, err = ws.retryable(l.attempt(ctx, h, lease, false, true))
		if err != nil || ttl == acquired {
			return ws.done(h, err)
		}
		var ok bool
		if w, ok = l.c.hub.Join(l.channel); !ok {
			return ws.done(h, base.ErrClosed)
		}
	}
	defer w.Leave()
	return ws.done(h, l.waitAndRetry(ctx, w, h, lease, false, &ws, ttl, noBound))
}

// noBound is waitAndRetry's most for waits bounded by the TTL alone.
const noBound time.Duration = 1<<63 - 1

// waitAndRetry waits on w and attempts again (join as for attempt) until
// the owner holds the lock, an attempt fails for good, ctx ends or the
// client closes. It retries on a wake-up (the subscription confirmed, or a
// release message) or when the TTL seen by the last attempt has passed,
// since pub/sub is only a hint and expiry publishes nothing; and at least
// every most. A wake-up whose attempt fails is passed on to the channel's
// next waiter, so a failure never swallows a release meant for someone.
func (l *Lock) waitAndRetry(ctx context.Context, w *waiters.Waiter, h *hold, lease time.Duration, join bool, ws *waitState, ttl, most time.Duration) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		timer.Reset(min(l.waitBound(ttl, l.c.maxPoll), most))
		woken := false
		select {
		case <-w.C:
			woken = true
			if hook := testHookWoken.Load(); hook != nil {
				(*hook)(ctx)
			}
		case <-timer.C:
		case <-ctx.Done():
			return ws.ctxErr(ctx)
		case <-l.c.closing:
			return base.ErrClosed
		}
		ttl0, err0 := l.attempt(ctx, h, lease, join, true)
		if woken && err0 != nil {
			w.PassOn()
		}
		var err error
		ttl, err = ws.retryable(ttl0, err0)
		if err != nil || ttl == acquired {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return ws.ctxErr(ctx)
			}
			return err
		}
	}
}

// lockFair is Lock for a fair lock. A waiting call joins the queue with its
// first attempt and renews its place with every later one, which it makes
// at least every third of the queue timeout; it listens on its owner's own
// channel, on which only a release that finds it first in line publishes.
// When it returns without the lock, its owner leaves the queue (in the
// background) unless another call of the same owner still waits.
func (l *Lock) lockFair(ctx context.Context, h *hold, lease time.Duration) (err error) {
	h.waiting.Add(1)
	granted := false
	defer func() {
		if h.waiting.Add(-1) == 0 && !granted {
			l.leave(h)
		}
	}()
	ws := waitState{l: l}
	ttl, err := ws.retryable(l.attempt(ctx, h, lease, true, true))
	if err != nil || ttl == acquired {
		granted = err == nil
		return ws.done(h, err)
	}
	w, ok := l.c.hub.Join(l.channel + ":" + h.key.field)
	if !ok {
		return ws.done(h, base.ErrClosed)
	}
	defer w.Leave()
	err = ws.done(h, l.waitAndRetry(ctx, w, h, lease, true, &ws, ttl, l.cfg.QueueTimeout/3))
	granted = err == nil
	return err
}

// leave takes h's owner out of the fair queue, in the background when it
// can: the caller is returning and must not wait for Redis. It runs after
// any attempt still in flight (they share h's semaphore), and does nothing
// when the owner holds the lock (a grant already took it out of the queue)
// or another call of the owner has started waiting meanwhile. If it fails,
// the place is dropped anyway once its deadline passes unrenewed.
func (l *Lock) leave(h *hold) {
	l.c.retain(h)
	run := func() {
		defer l.c.putHold(h)
		_ = h.acquire(context.Background())
		defer h.release()
		if h.count > 0 || h.waiting.Load() > 0 {
			return
		}
		err := l.c.run(context.Background(), lua.FairLeave, l.keys[:3],
			h.key.field, base.UnlockMessage, l.channel, l.c.publishArg(context.Background()), l.cfg.ThreadWait.Milliseconds()).Err()
		if err != nil {
			l.c.logger().Warn("rlock: leaving the fair queue failed; the place lapses at its deadline",
				"lock", l.name, "owner", h.key.field, "err", err)
		}
	}
	if !l.c.goBackground(run) {
		run()
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

// waitState is what a waiting Lock remembers across its attempts: the last
// transient error, reported with ctx's error if ctx ends before a grant,
// and how many came in a row.
type waitState struct {
	l     *Lock
	last  error
	fails int
}

// retryable turns the failures a waiting Lock outlives into a pause before
// the next attempt: an acquisition undone for lack of replica
// acknowledgement, and a transient Redis error (a timeout, a broken
// connection, a failover under way). Any other error is returned.
func (ws *waitState) retryable(ttl time.Duration, err error) (time.Duration, error) {
	l := ws.l
	switch {
	case err == nil:
		ws.fails = 0
		return ttl, nil
	case errors.Is(err, base.ErrNotReplicated):
		l.c.logger().Warn("rlock: acquisition undone, no replica acknowledged it; trying again", "lock", l.name, "err", err)
		return notReplicatedPause, nil
	case transient(err):
		ws.last = err
		pause := min(transientPause<<min(ws.fails, 10), transientPauseMax)
		ws.fails++
		l.c.logger().Debug("rlock: attempt failed; trying again", "lock", l.name, "err", err, "pause", pause)
		return pause, nil
	}
	return ttl, err
}

// done ends a blocking Lock call with err: when the call gives up after
// an attempt whose reply was lost (which it would have sent again), a hold
// that attempt may have taken is given back, in the background.
func (ws *waitState) done(h *hold, err error) error {
	if err != nil && unknownOutcome(ws.last) {
		ws.l.settleSoon(h)
	}
	return err
}

// ctxErr is ctx's error, with the last transient error if there was one.
func (ws *waitState) ctxErr(ctx context.Context) error {
	l := ws.l
	if ws.last != nil {
		return fmt.Errorf("rlock: waiting for %q: %w (last error: %w)", l.name, ctx.Err(), ws.last)
	}
	return l.ctxErr(ctx)
}

// transient reports whether err is a failure to reach Redis, or a reply
// that says to try again later, rather than a final answer.
func transient(err error) bool {
	for _, final := range []error{base.ErrClosed, base.ErrInvalidArgument, base.ErrLockLost,
		base.ErrUnexpectedReply, base.ErrNotHeld, base.ErrNotObtained, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, final) {
			return false
		}
	}
	// No reply at all is a timeout, a broken or refused connection.
	return !isReply(err) || isReply(err, "LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "BUSY", "NOREPLICAS", "MOVED", "ASK")
}

// unknownOutcome reports whether a script call that failed with err may
// have run on the server: no reply was read (a reply that is an error
// means the script did not complete its writes... or made none).
func unknownOutcome(err error) bool {
	return err != nil && !isReply(err)
}

// waitBound is how long to wait before the next attempt, given the TTL the
// last one saw (negative: no expiry).
func (l *Lock) waitBound(ttl, maxPoll time.Duration) time.Duration {
	if ttl < 0 {
		return maxPoll // no expiry: nothing else bounds the wait
	}
	return max(ttl, time.Millisecond)
}

func (l *Lock) notObtained() error {
	return fmt.Errorf("%w: %q is held by another owner", base.ErrNotObtained, l.name)
}

// acquired is what attempt returns for "the lock is held now".
const acquired time.Duration = -1 << 63

// attempt runs the acquire script once for h's owner. It returns acquired,
// or how long to wait at most before the next attempt: the lock's remaining
// TTL when another owner holds it (negative when the lock has no expiry).
// join asks a fair lock to queue the owner (or renew its place).
//
// An attempt is never abandoned, since its outcome must be known: when ctx
// ends first, attempt returns ctx's error at once and the attempt finishes
// in the background, releasing the hold again if it was granted. The
// caller and the background attempt agree through one state word on which
// of the two happened, so a grant is never both kept and reported as
// ctx's error (regression: TestLateGrantIsNeverLeaked).
func (l *Lock) attempt(ctx context.Context, h *hold, lease time.Duration, join, retrying bool) (time.Duration, error) {
	if ctx.Done() == nil { // cannot end: no need for a goroutine
		return l.attemptLocked(ctx, h, lease, join, retrying, nil)
	}
	type result struct {
		ttl time.Duration
		err error
	}
	done := make(chan result, 1)
	var state atomic.Int32 // attemptPending, attemptClaimed or attemptAbandoned
	l.c.retain(h)
	run := func() {
		defer l.c.putHold(h)
		ttl, err := l.attemptLocked(ctx, h, lease, join, retrying, &state)
		done <- result{ttl, err}
	}
	if !l.c.goBackground(run) {
		l.c.putHold(h)
		return 0, base.ErrClosed
	}
	select {
	case r := <-done:
		return r.ttl, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(attemptPending, attemptAbandoned) {
			return 0, l.ctxErr(ctx)
		}
		// The attempt claimed a grant before ctx ended: the owner holds
		// the lock, and the result is on its way.
		r := <-done
		return r.ttl, r.err
	}
}
