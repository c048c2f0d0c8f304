package reentrant

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/waiters"
	"github.com/rlock-go/rlock/scripts"
)

// Lock is a handle on one reentrant lock. Create it with New; it is cheap,
// does no I/O, and is safe for concurrent use. The handle is also the
// default owner: every handle has its own owner ID, so two handles on the
// same name exclude each other, and the same handle re-enters. Carry an
// explicit owner with rlock.WithOwner to share an owner across handles.
type Lock struct {
	c       *Client
	name    string
	channel string
	ownerID string        // the handle's own owner ID
	lease   time.Duration // 0: watchdog mode
	last    atomic.Pointer[epoch]
}

var _ rlock.Locker = (*Lock)(nil)

// Option configures a Lock. A nil Option is ignored.
type Option func(*Lock) error

// WithLease gives the lock an explicit lease: every acquisition sets the
// lock's TTL to d, and nothing renews it, so the lock is released when d
// runs out even if its holder is still working. d must be at least 1 ms.
// Without WithLease the lock is in watchdog mode: its lease is the
// watchdog lease (30 s by default) and the client's watchdog renews it
// (every 10 s by default) for as long as it is held.
func WithLease(d time.Duration) Option {
	return func(l *Lock) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: lease %v is less than 1ms", rlock.ErrInvalidArgument, d)
		}
		l.lease = d
		return nil
	}
}

// New returns a handle on the lock called name (the name is the Redis key
// of the lock hash). It does no I/O. It reports ErrInvalidArgument for a
// nil client, a bad name or a bad option.
func New(c *Client, name string, opts ...Option) (*Lock, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", rlock.ErrInvalidArgument)
	}
	if err := rlock.ValidateName(name); err != nil {
		return nil, err
	}
	l := &Lock{
		c:       c,
		name:    name,
		channel: rlock.Channel(name),
		ownerID: "#" + strconv.FormatUint(c.handles.Add(1), 10),
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// field returns the owner field for ctx: the explicit owner carried by
// ctx, or this handle's own.
func (l *Lock) field(ctx context.Context) (string, error) {
	id, ok, err := rlock.OwnerFrom(ctx)
	if err != nil {
		return "", err
	}
	if !ok {
		id = l.ownerID
	}
	return l.c.id + ":" + id, nil
}

// Owner returns the owner field ("<clientID>:<ownerID>") this handle uses
// with ctx: the owner carried by ctx (rlock.WithOwner), or the handle's own.
func (l *Lock) Owner(ctx context.Context) (string, error) { return l.field(ctx) }

// Lock blocks until the lock is held by the caller's owner, re-entering it
// (one more hold) if the owner holds it already. It waits on the client's
// shared pub/sub subscription and retries when the lock is released, when
// its remaining TTL has passed, or at the latest every max-poll interval
// for a lock without expiry.
//
// When ctx ends first, Lock returns at once with an error wrapping ctx's
// error (context.Canceled or context.DeadlineExceeded), and the owner ends
// up holding nothing more than before: an attempt already sent finishes in
// the background and releases the hold again if it was granted. It returns ErrClosed if the
// client is closed, and Redis errors as they are (never as acquired).
func (l *Lock) Lock(ctx context.Context) error { return l.lock(ctx, true) }

// TryLock makes one attempt. It returns nil when the caller's owner now
// holds the lock (re-entry included), an error wrapping ErrNotObtained when
// another owner holds it, and ctx's error if ctx ended before or during the
// attempt (a hold obtained then is released again).
func (l *Lock) TryLock(ctx context.Context) error { return l.lock(ctx, false) }

func (l *Lock) lock(ctx context.Context, wait bool) error {
	if err := l.ready(ctx); err != nil {
		return err
	}
	field, err := l.field(ctx)
	if err != nil {
		return err
	}
	h := l.c.holdFor(l.name, field)
	defer l.c.putHold(h)

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
		ttl, err = l.attempt(ctx, h)
		if err != nil || ttl == acquired {
			return err
		}
		if !wait {
			return fmt.Errorf("%w: %q is held by another owner", rlock.ErrNotObtained, l.name)
		}
		var ok bool
		if w, ok = l.c.hub.Join(l.channel); !ok {
			return rlock.ErrClosed
		}
	}
	defer w.Leave()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		// Retry on a wake-up (the subscription confirmed, or an unlock
		// message) or when the TTL seen by the last attempt has passed:
		// pub/sub is only a hint, expiry publishes nothing.
		d := l.c.maxPoll // no expiry: nothing else bounds the wait
		if ttl >= 0 {
			d = max(ttl, time.Millisecond)
		}
		timer.Reset(d)
		select {
		case <-w.C:
		case <-timer.C:
		case <-ctx.Done():
			return l.ctxErr(ctx)
		case <-l.c.closing:
			return rlock.ErrClosed
		}
		ttl, err = l.attempt(ctx, h)
		if err != nil || ttl == acquired {
			return err
		}
	}
}

// acquired is what attempt returns for "the lock is held now".
const acquired time.Duration = -1 << 63

// attempt runs the acquire script once for h's owner. It returns acquired,
// or the lock's remaining TTL when another owner holds it (negative when
// the lock has no expiry).
//
// An attempt is never abandoned, since its outcome must be known: when ctx
// ends first, attempt returns ctx's error at once and the attempt finishes
// in the background, releasing the hold again if it was granted.
func (l *Lock) attempt(ctx context.Context, h *hold) (time.Duration, error) {
	if ctx.Done() == nil { // cannot end: no need for a goroutine
		return l.attemptLocked(ctx, h)
	}
	type result struct {
		ttl time.Duration
		err error
	}
	done := make(chan result, 1)
	l.c.retain(h)
	l.c.bg.Add(1)
	go func() {
		defer l.c.bg.Done()
		defer l.c.putHold(h)
		ttl, err := l.attemptLocked(ctx, h)
		done <- result{ttl, err}
	}()
	select {
	case r := <-done:
		return r.ttl, r.err
	case <-ctx.Done():
		return 0, l.ctxErr(ctx)
	}
}

// attemptLocked is attempt, run to the end whatever ctx does. A hold
// granted after ctx ended is released again and ctx's error returned.
func (l *Lock) attemptLocked(ctx context.Context, h *hold) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	lease, watchdogMode := l.lease, l.lease == 0
	if watchdogMode {
		lease = l.c.wd.LeaseDuration()
	}
	sent := time.Now()
	res, err := scripts.Lock.Run(context.WithoutCancel(ctx), l.c.rdb, []string{l.name},
		lease.Milliseconds(), h.key.field, h.count).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("rlock: acquiring %q: %w", l.name, err)
	}
	if len(res) != 2 || res[0] != 0 && res[0] != 1 || res[0] == 1 && res[1] < 1 {
		return 0, fmt.Errorf("%w: acquire script replied %v", rlock.ErrUnexpectedReply, res)
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
		ep = newEpoch()
		h.ep.Store(ep)
	}
	if watchdogMode {
		h.lease = lease
		if h.watch == nil {
			h.watch = l.c.wd.Add(l.name, h.key.field, sent, func(err error) { l.c.lost(h, ep, err) })
		}
	} else if h.watch == nil {
		h.lease = lease
	}
	l.last.Store(ep)

	if ctx.Err() != nil {
		if err := l.releaseLocked(ctx, h); err != nil {
			return 0, fmt.Errorf("%w (and releasing the hold obtained after it: %w)", l.ctxErr(ctx), err)
		}
		return 0, l.ctxErr(ctx)
	}
	return acquired, nil
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

// Unlock releases one hold of the caller's owner. The last hold deletes the
// lock and publishes the unlock message, which wakes a waiter; an earlier
// one restores the lease. It returns an error wrapping ErrNotHeld, and
// changes nothing, when the owner holds no hold (never held, already
// released, expired or force-unlocked: the holding period then ends as
// lost).
//
// Unlock runs to completion even when ctx is already cancelled, so a
// deferred Unlock with a finished request context still releases; only the
// Redis client's own timeouts bound it. If it fails with a Redis error
// while releasing the last hold, the watchdog stops renewing anyway, so the
// lock is released at the latest when its lease runs out, and the holding
// period ends (Done closes, Err wraps ErrLockLost). A release
// re-sent by the Redis client after a lost reply takes effect once.
func (l *Lock) Unlock(ctx context.Context) error {
	if l.c.closed.Load() {
		return rlock.ErrClosed
	}
	field, err := l.field(ctx)
	if err != nil {
		return err
	}
	h := l.c.holdFor(l.name, field)
	defer l.c.putHold(h)
	h.mu.Lock()
	defer h.mu.Unlock()
	return l.releaseLocked(ctx, h)
}

// releaseLocked releases one hold; h.mu must be held.
func (l *Lock) releaseLocked(ctx context.Context, h *hold) error {
	lease := h.lease
	if lease <= 0 {
		lease = l.c.wd.LeaseDuration()
	}
	keys := []string{l.name, l.channel, l.latchKey()}
	res, err := scripts.Unlock.Run(context.WithoutCancel(ctx), l.c.rdb, keys,
		lease.Milliseconds(), h.key.field, h.count, rlock.UnlockMessage, l.c.replay.Milliseconds()).Int64Slice()
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

// ForceUnlock deletes the lock whoever holds it and wakes a waiter. It
// reports whether there was a lock to delete. A holder on this or another
// client learns of it from its watchdog (its Done channel closes with
// ErrLockLost) or from its next Unlock (ErrNotHeld). Like Unlock it runs to
// completion even when ctx is cancelled, and takes effect once if re-sent.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if l.c.closed.Load() {
		return false, rlock.ErrClosed
	}
	keys := []string{l.name, l.channel, l.latchKey()}
	n, err := scripts.ForceUnlock.Run(context.WithoutCancel(ctx), l.c.rdb, keys,
		rlock.UnlockMessage, l.c.replay.Milliseconds()).Int64()
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

// IsHeld reports whether the caller's owner (see Owner) holds the lock.
func (l *Lock) IsHeld(ctx context.Context) (bool, error) {
	n, err := l.HoldCount(ctx)
	return n > 0, err
}

// HoldCount returns how many holds the caller's owner has on the lock: 0
// when it holds none.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	field, err := l.field(ctx)
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

// TTL returns the lock's remaining lease, whoever holds it: 0 when nobody
// holds it, and ErrNoExpiry for a lock without expiry.
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

// Done returns a channel that is closed when the holding period this handle
// last took part in ends: by the owner's last Unlock, or by loss (see Err).
// Before the handle's first acquisition it returns a closed channel. Select
// on it inside a long critical section to stop work once the lock is lost.
// Loss is detected by the watchdog, at an Unlock, or at a re-entry; a lock
// with an explicit lease (WithLease) is not watched, so its expiry does not
// close Done: such a holder must finish within its lease.
func (l *Lock) Done() <-chan struct{} {
	if ep := l.last.Load(); ep != nil {
		return ep.done
	}
	return closedChan
}

// Err returns nil while the holding period this handle last took part in
// goes on, or when it ended by Unlock; after a loss it returns an error
// wrapping rlock.ErrLockLost that says why (not held at renewal, lease ran
// out while Redis was unreachable, not held at unlock, client closed).
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

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
