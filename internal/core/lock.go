package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/waiters"
	"github.com/rlock-go/rlock/scripts"
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

// LockConfig configures a lock handle. The public packages validate it.
type LockConfig struct {
	Kind         Kind
	Lease        time.Duration // rlock.WatchdogMode or positive
	QueueTimeout time.Duration // fair only; 0: DefaultQueueTimeout
	Fencing      bool          // issue fencing tokens
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
	if err := rlock.ValidateName(name); err != nil {
		return nil, err
	}
	if err := CheckLease(cfg.Lease); err != nil {
		return nil, err
	}
	if cfg.QueueTimeout == 0 {
		cfg.QueueTimeout = DefaultQueueTimeout
	}
	l := &Lock{
		c:       c,
		name:    name,
		cfg:     cfg,
		channel: rlock.Channel(name),
		ownerID: "#" + strconv.FormatUint(c.handles.Add(1), 10),
	}
	token := rlock.DerivedKey(rlock.TokenPrefix, name)
	if cfg.Kind == Fair {
		l.keys = []string{name, rlock.DerivedKey(rlock.QueuePrefix, name), rlock.DerivedKey(rlock.TimeoutPrefix, name), token}
	} else {
		l.keys = []string{name, token}
	}
	return l, nil
}

// CheckLease rejects a lease that is neither rlock.WatchdogMode nor at
// least 1 ms.
func CheckLease(d time.Duration) error {
	if d != rlock.WatchdogMode && d < time.Millisecond {
		return fmt.Errorf("%w: lease %v is neither rlock.WatchdogMode nor at least 1ms", rlock.ErrInvalidArgument, d)
	}
	return nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Lease returns the handle's lease setting.
func (l *Lock) Lease() time.Duration { return l.cfg.Lease }

// Owner returns the owner field for ctx: the explicit owner carried by
// ctx, or this handle's own.
func (l *Lock) Owner(ctx context.Context) (string, error) {
	id, ok, err := rlock.OwnerFrom(ctx)
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
	if err := CheckLease(lease); err != nil {
		return err
	}
	if err := l.ready(ctx); err != nil {
		return err
	}
	field, err := l.Owner(ctx)
	if err != nil {
		return err
	}
	h := l.c.holdFor(l.name, field)
	defer l.c.putHold(h)
	if l.cfg.Kind == Fair {
		return l.lockFair(ctx, h, wait, lease)
	}

	// While other calls of this client wait for the lock, a new one queues
	// behind them instead of trying first (unless its owner holds the lock
	// and re-enters): one attempt fewer per grant under contention, and
	// grants go round the client's waiters in arrival order.
	var w *waiters.Waiter
	ttl := time.Duration(-1) // unknown: the first wait is bounded by max-poll
	if wait && !h.holding() {
		w = l.c.hub.JoinBehind(l.channel)
	}
	if w == nil {
		ttl, err = l.attempt(ctx, h, lease, false)
		if wait {
			ttl, err = l.retryable(ttl, err)
		}
		if err != nil || ttl == acquired {
			return err
		}
		if !wait {
			return l.notObtained()
		}
		var ok bool
		if w, ok = l.c.hub.Join(l.channel); !ok {
			return rlock.ErrClosed
		}
	}
	defer w.Leave()
	return l.waitAndRetry(ctx, w, h, lease, false, ttl, noBound)
}

// noBound is waitAndRetry's most for waits bounded by the TTL alone.
const noBound time.Duration = 1<<63 - 1

// waitAndRetry waits on w and attempts again (join as for attempt) until
// the owner holds the lock, an attempt fails, ctx ends or the client
// closes. It retries on a wake-up (the subscription confirmed, or a
// release message) or when the TTL seen by the last attempt has passed,
// since pub/sub is only a hint and expiry publishes nothing; and at least
// every most.
func (l *Lock) waitAndRetry(ctx context.Context, w *waiters.Waiter, h *hold, lease time.Duration, join bool, ttl, most time.Duration) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		timer.Reset(min(l.waitBound(ttl, l.c.maxPoll), most))
		select {
		case <-w.C:
		case <-timer.C:
		case <-ctx.Done():
			return l.ctxErr(ctx)
		case <-l.c.closing:
			return rlock.ErrClosed
		}
		var err error
		ttl, err = l.retryable(l.attempt(ctx, h, lease, join))
		if err != nil || ttl == acquired {
			return err
		}
	}
}

// lockFair is lock for a fair lock. A waiting call joins the queue with its
// first attempt and renews its place with every later one, which it makes
// at least every third of the queue timeout; it listens on its owner's own
// channel, on which only a release that finds it first in line publishes.
// When it returns without the lock, its owner leaves the queue (in the
// background) unless another call of the same owner still waits.
func (l *Lock) lockFair(ctx context.Context, h *hold, wait bool, lease time.Duration) (err error) {
	if !wait {
		ttl, err := l.attempt(ctx, h, lease, false)
		if err == nil && ttl != acquired {
			err = l.notObtained()
		}
		return err
	}
	h.waiting.Add(1)
	granted := false
	defer func() {
		if h.waiting.Add(-1) == 0 && !granted {
			l.leave(h)
		}
	}()
	ttl, err := l.retryable(l.attempt(ctx, h, lease, true))
	if err != nil || ttl == acquired {
		granted = err == nil
		return err
	}
	w, ok := l.c.hub.Join(l.channel + ":" + h.key.field)
	if !ok {
		return rlock.ErrClosed
	}
	defer w.Leave()
	err = l.waitAndRetry(ctx, w, h, lease, true, ttl, l.cfg.QueueTimeout/3)
	granted = err == nil
	return err
}

// leave takes h's owner out of the fair queue, in the background when it
// can: the caller is returning and must not wait for Redis. It runs after
// any attempt still in flight (they share h.mu), and does nothing when the
// owner holds the lock (a grant already took it out of the queue) or
// another call of the owner has started waiting meanwhile. If it fails,
// the place is dropped anyway once its deadline passes unrenewed.
func (l *Lock) leave(h *hold) {
	l.c.retain(h)
	run := func() {
		defer l.c.putHold(h)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.count > 0 || h.waiting.Load() > 0 {
			return
		}
		err := l.c.run(context.Background(), scripts.FairLeave, l.keys[:3],
			h.key.field, rlock.UnlockMessage, l.channel).Err()
		if err != nil {
			l.c.logger().Warn("rlock: leaving the fair queue failed; the place lapses at its deadline",
				"lock", l.name, "owner", h.key.field, "err", err)
		}
	}
	if !l.c.goBackground(run) {
		run()
	}
}

// notReplicatedPause is how long a waiting Lock pauses before trying again
// after an acquisition was undone because no replica acknowledged it.
const notReplicatedPause = 100 * time.Millisecond

// retryable turns an acquisition undone for lack of replica
// acknowledgement into a short wait, for the calls that wait.
func (l *Lock) retryable(ttl time.Duration, err error) (time.Duration, error) {
	if errors.Is(err, rlock.ErrNotReplicated) {
		l.c.logger().Warn("rlock: acquisition undone, no replica acknowledged it; trying again", "lock", l.name, "err", err)
		return notReplicatedPause, nil
	}
	return ttl, err
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
	return fmt.Errorf("%w: %q is held by another owner", rlock.ErrNotObtained, l.name)
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
func (l *Lock) attempt(ctx context.Context, h *hold, lease time.Duration, join bool) (time.Duration, error) {
	if ctx.Done() == nil { // cannot end: no need for a goroutine
		return l.attemptLocked(ctx, h, lease, join, nil)
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
		ttl, err := l.attemptLocked(ctx, h, lease, join, &state)
		done <- result{ttl, err}
	}
	if !l.c.goBackground(run) {
		l.c.putHold(h)
		return 0, rlock.ErrClosed
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

// testHookGranted, when set, runs in a background attempt after a grant was found in time
// and before the caller is asked to take it: tests use it to end ctx in
// that window.
var testHookGranted atomic.Pointer[func(context.Context)]

// AbandonNextGrant arranges, for tests, that the next attempt with ctx
// that is granted in time has ctx end (by cancel) before it hands the grant
// over, and then waits (up to 10 s) until the caller has returned, as when
// ctx ends in that window by chance. Call returned once the caller's Lock
// has returned; call restore when done.
func AbandonNextGrant(ctx context.Context, cancel context.CancelFunc) (returned, restore func()) {
	back := make(chan struct{})
	hook := func(gctx context.Context) {
		if gctx != ctx {
			return
		}
		cancel()
		select {
		case <-back:
		case <-time.After(10 * time.Second): // the caller never returned: its test fails
		}
	}
	testHookGranted.Store(&hook)
	return sync.OnceFunc(func() { close(back) }), func() { testHookGranted.Store(nil) }
}

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
func (l *Lock) attemptLocked(ctx context.Context, h *hold, lease time.Duration, join bool, state *atomic.Int32) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx.Err() != nil {
		// Ended before anything was sent: send nothing. (A fair waiter's
		// departure may already have run; a join now would undo it.)
		return 0, l.ctxErr(ctx)
	}
	watchdogMode := lease == rlock.WatchdogMode
	if watchdogMode {
		lease = l.c.wd.LeaseDuration()
	}
	if ep := h.ep.Load(); h.count > 0 && ep != nil && ep.ended() {
		h.count = 0 // the owner was told its holds were lost: start afresh
	}
	sent := time.Now()
	fencing := boolArg(l.cfg.Fencing)
	script, args := scripts.Lock, []any{lease.Milliseconds(), h.key.field, h.count, fencing}
	if l.cfg.Kind == Fair {
		script = scripts.FairLock
		args = append(args, l.cfg.QueueTimeout.Milliseconds(), boolArg(join), l.channel, rlock.UnlockMessage)
	}
	cmd, sync, syncErr := l.c.runAcquire(context.WithoutCancel(ctx), script, l.keys, args...)
	res, err := cmd.Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("rlock: acquiring %q: %w", l.name, err)
	}
	if len(res) < 2 || res[0] == 1 && (len(res) != 3 || res[1] < 1 || res[2] < 0) || res[0] != 1 && len(res) != 2 || res[0] < -1 || res[0] > 1 {
		return 0, fmt.Errorf("%w: acquire script replied %v", rlock.ErrUnexpectedReply, res)
	}
	if res[0] == -1 { // the owner re-entered a lock it no longer held
		h.count = 0
		lost := fmt.Errorf("%w: %q was no longer held at re-entry", rlock.ErrLockLost, l.name)
		h.stopRenewal(lost)
		return 0, lost
	}
	if res[0] == 1 && (syncErr != nil || sync.Unsynced()) {
		// Granted, but no replica is known to have it: a failover now
		// could hand the lock to someone else. Undo this acquisition.
		why := fmt.Errorf("%w: none of %d replicas acknowledged %q within %v", rlock.ErrNotReplicated, sync.Replicas, l.name, l.c.sync.Timeout())
		if syncErr != nil {
			why = fmt.Errorf("%w: %q: %w", rlock.ErrNotReplicated, l.name, syncErr)
		}
		h.count = res[1]
		if err := l.releaseLocked(ctx, h); err != nil {
			return 0, fmt.Errorf("%w (and undoing the acquisition: %w)", why, err)
		}
		return 0, why
	}
	if res[0] == 0 {
		if h.count > 0 { // the owner believed it held the lock: it was lost
			h.count = 0
			h.stopRenewal(fmt.Errorf("%w: %q was no longer held at re-entry", rlock.ErrLockLost, l.name))
		}
		return time.Duration(res[1]) * time.Millisecond, nil
	}

	h.count = res[1]
	ep := h.ep.Load()
	if ep == nil || ep.ended() { // a new holding period
		if h.watch != nil {
			h.watch.Stop()
			h.watch = nil
		}
		ep = newEpoch(res[2])
		h.ep.Store(ep)
	}
	if watchdogMode {
		h.lease = lease
		if h.watch == nil {
			h.watch = l.watch(h, ep, sent)
		}
	} else if h.watch == nil {
		h.lease = lease
	}
	l.last.Store(ep)

	// The grant stands only if ctx is still alive and the caller still
	// waits; checking ctx first keeps a synchronous caller's contract ("a
	// Lock whose ctx ended holds no more than before") too.
	keep := ctx.Err() == nil
	if keep && state != nil {
		if hook := testHookGranted.Load(); hook != nil {
			(*hook)(ctx)
		}
		keep = state.CompareAndSwap(attemptPending, attemptClaimed)
	}
	if !keep {
		if err := l.releaseLocked(ctx, h); err != nil {
			return 0, fmt.Errorf("%w (and releasing the hold obtained after it: %w)", l.ctxErr(ctx), err)
		}
		return 0, l.ctxErr(ctx)
	}
	return acquired, nil
}

func (l *Lock) watch(h *hold, ep *epoch, sent time.Time) *watchdogLease {
	return l.c.wd.Add(l.name, h.key.field, sent, func(err error) { l.c.lost(h, ep, err) })
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func (l *Lock) ready(ctx context.Context) error {
	if l.c.closed.Load() {
		return rlock.ErrClosed
	}
	if ctx.Err() != nil {
		return l.ctxErr(ctx)
	}
	return nil
}

func (l *Lock) ctxErr(ctx context.Context) error {
	return fmt.Errorf("rlock: waiting for %q: %w", l.name, ctx.Err())
}

// SetLease changes the lease of the caller's owner's current holding (see
// rlock.LeaseLocker).
func (l *Lock) SetLease(ctx context.Context, lease time.Duration) error {
	if err := CheckLease(lease); err != nil {
		return err
	}
	h, err := l.lockHold(ctx)
	if err != nil {
		return err
	}
	defer l.unlockHold(h)
	return l.setLeaseLocked(ctx, h, lease)
}

// setLeaseLocked is SetLease for h; h.mu must be held.
func (l *Lock) setLeaseLocked(ctx context.Context, h *hold, lease time.Duration) error {
	if h.count == 0 {
		return fmt.Errorf("%w: %q", rlock.ErrNotHeld, l.name)
	}
	ttl := lease
	if lease == rlock.WatchdogMode {
		ttl = l.c.wd.LeaseDuration()
	}
	sent := time.Now()
	res, err := l.c.run(context.WithoutCancel(ctx), scripts.Renew, []string{l.name},
		ttl.Milliseconds(), h.key.field).Int64Slice()
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%w: renew script replied %v", rlock.ErrUnexpectedReply, res)
	}
	if err != nil {
		return fmt.Errorf("rlock: setting the lease of %q: %w", l.name, err)
	}
	if res[0] == 0 {
		h.count = 0
		h.stopRenewal(fmt.Errorf("%w: %q was no longer held when its lease was set", rlock.ErrLockLost, l.name))
		return fmt.Errorf("%w: %q", rlock.ErrNotHeld, l.name)
	}
	h.lease = ttl
	if lease == rlock.WatchdogMode {
		if h.watch == nil {
			h.watch = l.watch(h, h.ep.Load(), sent)
		}
	} else if h.watch != nil {
		h.watch.Stop()
		h.watch = nil
	}
	return nil
}

// Unlock releases one hold of the caller's owner.
func (l *Lock) Unlock(ctx context.Context) error {
	h, err := l.lockHold(ctx)
	if err != nil {
		return err
	}
	defer l.unlockHold(h)
	return l.releaseLocked(ctx, h)
}

// lockHold returns the caller's owner's hold with its mutex held; the
// caller ends with unlockHold.
func (l *Lock) lockHold(ctx context.Context) (*hold, error) {
	if l.c.closed.Load() {
		return nil, rlock.ErrClosed
	}
	field, err := l.Owner(ctx)
	if err != nil {
		return nil, err
	}
	h := l.c.holdFor(l.name, field)
	h.mu.Lock()
	return h, nil
}

// unlockHold ends a lockHold.
func (l *Lock) unlockHold(h *hold) {
	h.mu.Unlock()
	l.c.putHold(h)
}

// releaseLocked releases one hold; h.mu must be held.
func (l *Lock) releaseLocked(ctx context.Context, h *hold) error {
	lease := h.lease
	if lease <= 0 {
		lease = l.c.wd.LeaseDuration()
	}
	var cmd *redis.Cmd
	keys := l.releaseKeys()
	if l.cfg.Kind == Fair {
		cmd = l.c.run(context.WithoutCancel(ctx), scripts.FairUnlock, keys,
			lease.Milliseconds(), h.key.field, h.count, rlock.UnlockMessage, l.c.replay.Milliseconds(), l.channel)
	} else {
		cmd = l.c.run(context.WithoutCancel(ctx), scripts.Unlock, keys,
			lease.Milliseconds(), h.key.field, h.count, rlock.UnlockMessage, l.c.replay.Milliseconds())
	}
	res, err := cmd.Int64Slice()
	if err == nil && (len(res) != 2 || res[0] < -1 || res[0] > 1) {
		err = fmt.Errorf("%w: release script replied %v", rlock.ErrUnexpectedReply, res)
	}
	if err != nil {
		err = fmt.Errorf("rlock: releasing %q: %w", l.name, err)
		if h.count <= 1 { // the outcome is unknown: stop renewing, let the lease decide
			h.stopRenewal(fmt.Errorf("%w: the last release failed, renewal stopped: %w", rlock.ErrLockLost, err))
		}
		return err
	}
	switch res[0] {
	case -1:
		believed := h.count > 0
		h.count = 0
		if believed {
			h.stopRenewal(fmt.Errorf("%w: %q was no longer held at unlock", rlock.ErrLockLost, l.name))
		}
		return fmt.Errorf("%w: %q", rlock.ErrNotHeld, l.name)
	case 0:
		h.count = res[1]
		return nil
	default:
		h.count = 0
		h.stopRenewal(nil)
		return nil
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
	return rlock.DerivedKey(rlock.LatchPrefix, l.name) + ":" + l.c.requestID()
}

// stopRenewal stops the watchdog for h and ends its holding period with
// err (nil for a release). h.mu must be held.
func (h *hold) stopRenewal(err error) {
	if h.watch != nil {
		h.watch.Stop()
		h.watch = nil
	}
	if ep := h.ep.Load(); ep != nil {
		ep.end(err)
	}
}

// ForceUnlock deletes the lock whoever holds it and wakes a waiter.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if l.c.closed.Load() {
		return false, rlock.ErrClosed
	}
	var cmd *redis.Cmd
	keys := l.releaseKeys()
	if l.cfg.Kind == Fair {
		cmd = l.c.run(context.WithoutCancel(ctx), scripts.FairForceUnlock, keys,
			rlock.UnlockMessage, l.c.replay.Milliseconds(), l.channel)
	} else {
		cmd = l.c.run(context.WithoutCancel(ctx), scripts.ForceUnlock, keys,
			rlock.UnlockMessage, l.c.replay.Milliseconds())
	}
	n, err := cmd.Int64()
	if err != nil {
		return false, fmt.Errorf("rlock: force-unlocking %q: %w", l.name, err)
	}
	return n == 1, nil
}

// IsLocked reports whether any owner holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	n, err := l.c.rdb.Exists(ctx, l.name).Result()
	if err != nil {
		return false, fmt.Errorf("rlock: querying %q: %w", l.name, err)
	}
	return n == 1, nil
}

// HoldCount returns how many holds the caller's owner has on the lock.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	field, err := l.Owner(ctx)
	if err != nil {
		return 0, err
	}
	n, err := l.c.rdb.HGet(ctx, l.name, field).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("rlock: querying %q: %w", l.name, err)
	}
	return n, nil
}

// TTL returns the lock's remaining lease, whoever holds it.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	d, err := l.c.rdb.PTTL(ctx, l.name).Result()
	if err != nil {
		return 0, fmt.Errorf("rlock: querying %q: %w", l.name, err)
	}
	switch {
	case d == -2 || d == -2*time.Millisecond:
		return 0, nil
	case d < 0:
		return 0, fmt.Errorf("%w: %q", rlock.ErrNoExpiry, l.name)
	}
	return d, nil
}

// QueuedWaiter is one entry of a fair lock's queue.
type QueuedWaiter struct {
	Owner    string
	Deadline time.Time // zero: none
}

// Queue returns a fair lock's queue, first in line first, and the server's
// time when it was read.
func (l *Lock) Queue(ctx context.Context) ([]QueuedWaiter, time.Time, error) {
	if l.cfg.Kind != Fair {
		return nil, time.Time{}, fmt.Errorf("%w: %q is not a fair lock", rlock.ErrInvalidArgument, l.name)
	}
	res, err := l.c.run(ctx, scripts.FairQueue, l.keys[:3]).Slice()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("rlock: reading the queue of %q: %w", l.name, err)
	}
	bad := fmt.Errorf("%w: queue script replied %v", rlock.ErrUnexpectedReply, res)
	if len(res)%2 != 1 {
		return nil, time.Time{}, bad
	}
	now, ok := res[0].(int64)
	if !ok {
		return nil, time.Time{}, bad
	}
	out := make([]QueuedWaiter, 0, len(res)/2)
	for i := 1; i < len(res); i += 2 {
		owner, ok1 := res[i].(string)
		ms, ok2 := res[i+1].(int64)
		if !ok1 || !ok2 {
			return nil, time.Time{}, bad
		}
		w := QueuedWaiter{Owner: owner}
		if ms >= 0 {
			w.Deadline = time.UnixMilli(ms)
		}
		out = append(out, w)
	}
	return out, time.UnixMilli(now), nil
}

// Done returns a channel closed when the holding period this handle last
// took part in ends.
func (l *Lock) Done() <-chan struct{} {
	if ep := l.last.Load(); ep != nil {
		return ep.done
	}
	return closedChan
}

// Err returns why the holding period this handle last took part in ended,
// or nil.
func (l *Lock) Err() error {
	if ep := l.last.Load(); ep != nil {
		select {
		case <-ep.done:
			return ep.err
		default:
		}
	}
	return nil
}

// Token returns the fencing token of the holding period this handle last
// took part in, 0 if none.
func (l *Lock) Token() int64 {
	if ep := l.last.Load(); ep != nil {
		return ep.token
	}
	return 0
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
