package reentrant

import (
	"context"
	"fmt"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/core"
)

// Lock is a handle on one reentrant lock. Create it with New; it is cheap,
// does no I/O, and is safe for concurrent use: goroutines that share it
// exclude each other, as with a sync.Mutex. The handle is also the default
// owner: every handle has its own owner ID, so two handles on the same name
// exclude each other; a Lock whose ctx descends from the holding's Ctx
// re-enters. Carry an explicit owner with rlock.WithOwner to share an owner
// across handles.
type Lock struct {
	l *core.Lock
}

var (
	_ rlock.Locker      = (*Lock)(nil)
	_ rlock.LeaseLocker = (*Lock)(nil)
)

func init() {
	core.RegisterHandle(func(l *Lock) *core.Lock { return l.l })
}

// Option configures a Lock. A nil Option is ignored.
type Option func(*config) error

// config is what the options set.
type config = core.LockConfig

// WithLease gives the lock an explicit lease: every acquisition sets the
// lock's TTL to d, and nothing renews it, so the lock is released when d
// runs out even if its holder is still working. d must be at least 1 ms,
// or rlock.WatchdogMode for the default. Without WithLease the lock is in
// watchdog mode: its lease is the watchdog lease (30 s by default) and the
// client's watchdog renews it (every 10 s by default) for as long as it is
// held.
func WithLease(d time.Duration) Option {
	return func(c *config) error {
		if err := base.CheckLease(d); err != nil {
			return err
		}
		c.Lease = d
		return nil
	}
}

// WithFencing makes every acquisition that takes the lock from free to
// held draw a fencing token: a number from the counter
// "redisson_lock_token:{name}", strictly larger than any drawn before on
// that name, returned by Token. Re-entry keeps the token. Pass the token
// with every write the lock protects, and have the store reject a write
// whose token is lower than one it has seen: that keeps a holder that
// lost the lock without knowing it (paused past its lease) from
// overwriting a newer holder's work. The counter key is never deleted.
// Give every handle on a name this option, or the grants of handles
// without it draw no token.
func WithFencing() Option {
	return func(c *config) error {
		c.Fencing = true
		return nil
	}
}

// New returns a handle on the lock called name (the name is the Redis key
// of the lock hash). It does no I/O. It reports ErrInvalidArgument for a
// nil client, a bad name or a bad option.
func New(c *rlock.Client, name string, opts ...Option) (*Lock, error) {
	cc, ok := core.Of(c)
	if !ok {
		return nil, fmt.Errorf("%w: nil client", rlock.ErrInvalidArgument)
	}
	var cfg core.LockConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	l, err := cc.NewLock(name, cfg)
	if err != nil {
		return nil, err
	}
	return &Lock{l: l}, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.l.Name() }

// Owner returns the owner field ("<clientID>:<ownerID>") this handle uses
// with ctx: the owner carried by ctx (rlock.WithOwner), or the handle's own.
func (l *Lock) Owner(ctx context.Context) (string, error) { return l.l.Owner(ctx) }

// Lock blocks until the lock is held by the caller's owner. With a ctx that
// descends from the holding's Ctx it re-enters it (one more hold); with any
// other ctx it first waits for the handle's other goroutines to Unlock
// (see the package doc on owners). It waits on the client's
// shared pub/sub subscription and retries when the lock is released, when
// its remaining TTL has passed, or at the latest every max-poll interval
// for a lock without expiry.
//
// A transient Redis error (a timeout, a broken connection, a failover under
// way) does not end the wait: Lock tries again, backing off from 10 ms to
// 1 s, until ctx ends (then the error wraps both ctx's error and the last
// Redis error) or until Redis has not answered for the client's unreachable
// timeout (rlock.WithUnreachableTimeout, 15 s; then it wraps
// rlock.ErrUnreachable and the last Redis error). Errors that trying again cannot mend (a key of another
// type under the lock's name, a loss found at re-entry) are returned at
// once, never as acquired.
//
// When ctx ends first, Lock returns at once (within the time it takes to
// notice, not the Redis client's timeouts) with an error wrapping ctx's
// error (context.Canceled or context.DeadlineExceeded), and the owner ends
// up holding nothing more than before: an attempt already sent finishes in
// the background and releases the hold again if it was granted. With a
// ctx that never ends, an outage shorter than the unreachable timeout is
// ridden through. It returns ErrClosed if the client is closed.
func (l *Lock) Lock(ctx context.Context) error { return l.l.Lock(ctx) }

// TryLock makes one attempt. It returns nil when the caller's owner now
// holds the lock (re-entry included), an error wrapping ErrNotObtained when
// another owner holds it, and ctx's error if ctx ended before or during the
// attempt (a hold obtained then is released again). A Redis error is
// returned at once; if the attempt's reply was lost after it ran, the hold
// it may have taken is given back, so an error never leaves the owner
// holding more than before and TryLock may simply be called again.
func (l *Lock) TryLock(ctx context.Context) error { return l.l.TryLock(ctx) }

// LockLease is Lock with lease for this acquisition instead of the
// handle's WithLease setting: a positive lease, or rlock.WatchdogMode. A
// re-entry never takes protection away from the holds already there: on a
// lock the watchdog renews it leaves the watchdog on, and it never sets a
// TTL shorter than the one left (a longer lease extends it).
func (l *Lock) LockLease(ctx context.Context, lease time.Duration) error {
	return l.l.LockLease(ctx, lease)
}

// TryLockLease is TryLock with lease for this acquisition (see LockLease).
func (l *Lock) TryLockLease(ctx context.Context, lease time.Duration) error {
	return l.l.TryLockLease(ctx, lease)
}

// SetLease changes the lease of the caller's owner's current holding: a
// positive lease sets the lock's TTL to it and stops watchdog renewal;
// rlock.WatchdogMode hands the lock to the watchdog. Unlike a re-entry's
// lease, SetLease may shorten the lease: it is the owner's own decision for
// the whole holding. Releases that leave holds restore the new lease (never
// shortening what is left). It returns an error wrapping ErrNotHeld, and
// changes nothing, when the owner holds no hold (the holding period then
// ends as lost if the client believed it held). Like Unlock it runs to
// completion even when ctx is cancelled.
func (l *Lock) SetLease(ctx context.Context, lease time.Duration) error {
	return l.l.SetLease(ctx, lease)
}

// Unlock releases one hold of the caller's owner. The last hold deletes the
// lock and publishes the unlock message, which wakes a waiter; an earlier
// one restores the lease. It returns an error wrapping ErrNotHeld, and
// changes nothing, when the owner holds no hold (never held, already
// released, expired or force-unlocked: the holding period then ends as
// lost).
//
// Once sent, a release runs to completion even when ctx is cancelled, so
// a deferred Unlock with a finished request context still releases; only
// the Redis client's own timeouts bound it. ctx only bounds the wait for
// another call of the same owner on this lock still in progress: if ctx
// ends first, Unlock returns ctx's error and nothing was sent (call it
// again). It works after the client was closed too.
//
// A release re-sent by the Redis client after a lost reply takes effect
// once. If Unlock fails with any other error (a Redis error: its reply was
// lost and the outcome is unknown), the client completes the release
// itself, in the background or at the owner's next call on this lock,
// whatever that call is: do not call Unlock again for the same hold. If it
// was the last hold, the watchdog stops renewing at once and the holding
// period ends (Done closes, Err wraps ErrLockLost), so the lock is released
// at the latest when its lease runs out.
func (l *Lock) Unlock(ctx context.Context) error { return l.l.Unlock(ctx) }

// ForceUnlock deletes the lock whoever holds it and wakes a waiter. It
// reports whether there was a lock to delete. A holder on this or another
// client learns of it from its watchdog (its Done channel closes with
// ErrLockLost) or from its next Unlock (ErrNotHeld). Like Unlock it runs to
// completion even when ctx is cancelled, and takes effect once if re-sent.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) { return l.l.ForceUnlock(ctx) }

// IsLocked reports whether any owner holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) { return l.l.IsLocked(ctx) }

// IsHeld reports whether the caller's owner (see Owner) holds the lock.
func (l *Lock) IsHeld(ctx context.Context) (bool, error) {
	n, err := l.l.HoldCount(ctx)
	return n > 0, err
}

// HoldCount returns how many holds the caller's owner has on the lock: 0
// when it holds none.
func (l *Lock) HoldCount(ctx context.Context) (int, error) { return l.l.HoldCount(ctx) }

// TTL returns the lock's remaining lease, whoever holds it: 0 when nobody
// holds it, and ErrNoExpiry for a lock without expiry.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) { return l.l.TTL(ctx) }

// Done returns a channel that is closed when the holding period this handle
// last took part in ends: by the owner's last Unlock, or by loss (see Err).
// Before the handle's first acquisition it returns a closed channel. Select
// on it inside a long critical section to stop work once the lock is lost.
// Loss is detected by the watchdog, at an Unlock, or at a re-entry; with
// an explicit lease (WithLease, LockLease) the holding period also ends
// when the lease has run out (counted from when the acquisition was sent,
// so never later than Redis expires the lock), with an Err wrapping
// ErrLockLost.
func (l *Lock) Done() <-chan struct{} { return l.l.Done() }

// Err returns nil while the holding period this handle last took part in
// goes on, or when it ended by Unlock; after a loss it returns an error
// wrapping rlock.ErrLockLost that says why (not held at renewal, lease ran
// out while Redis was unreachable, an explicit lease ran out, not held at
// unlock, client closed). A renewal that finds the lock gone because the
// owner's own last release just ran is not a loss: after a successful
// Unlock, Err is nil.
func (l *Lock) Err() error { return l.l.Err() }

// Ctx returns the holding period this handle last took part in as a
// context (as etcd's Session.Ctx): it is cancelled when the holding period
// ends, and context.Cause then says why: an error wrapping
// rlock.ErrLockLost after a loss (the error Err returns), context.Canceled
// after the owner's last Unlock. Before the handle's first acquisition it
// is already cancelled. Derive the context of work that must stop when the
// lock is lost from it. It does not derive from the ctx given to Lock;
// when the work must also stop with that one, merge them (for example with
// context.AfterFunc).
func (l *Lock) Ctx() context.Context { return l.l.Ctx() }

// Until returns the time up to which the holding period this handle last
// took part in is known to last: with an explicit lease, the lease counted
// from when the acquisition (or the latest call that extended it) was
// sent; in watchdog mode, the watchdog lease counted from when the last
// successful renewal was sent. The lock may be held longer; it is held
// past Until only if a renewal succeeded meanwhile. The zero time once the
// holding period ended, and before the first acquisition.
func (l *Lock) Until() time.Time { return l.l.Until() }

// Token returns the fencing token of the holding period this handle last
// took part in (see WithFencing), or 0 when the handle has no fencing or
// never held the lock. Read it after Lock returns and before Unlock.
func (l *Lock) Token() int64 { return l.l.Token() }
