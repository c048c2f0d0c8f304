package fair

import (
	"context"
	"fmt"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/core"
)

// DefaultQueueTimeout is how long a waiter keeps its place in the queue
// without renewing it, unless WithQueueTimeout says otherwise. A live
// waiter renews its place every third of it.
const DefaultQueueTimeout = 30 * time.Second

// Lock is a handle on one fair lock. Create it with New; it is cheap, does
// no I/O, and is safe for concurrent use. As with the reentrant lock,
// goroutines that share it exclude each other (in arrival order), a Lock
// whose ctx descends from the holding's Ctx re-enters, the handle is the
// default owner, and rlock.WithOwner carries an explicit one.
// All calls of one owner that wait share one place in the queue.
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

// WithLease gives the lock an explicit lease, as reentrant.WithLease does:
// every acquisition sets the lock's TTL to d and nothing renews it. d must
// be at least 1 ms, or rlock.WatchdogMode (the default: a 30 s lease that
// the client's watchdog renews every 10 s while held).
func WithLease(d time.Duration) Option {
	return func(c *config) error {
		if err := base.CheckLease(d); err != nil {
			return err
		}
		c.Lease = d
		return nil
	}
}

// WithQueueTimeout sets how long a waiter keeps its place in the queue
// without renewing it; default 30 s. A live waiter renews its place at
// least every d/3, however long it waits, so only a waiter whose process
// died (or stalled for d) loses its place: it is dropped when it reaches
// the head of the queue with its deadline passed, and the next waiter is
// granted the lock at the latest then. A shorter timeout recovers sooner
// from crashed waiters and costs one more script call per waiter per d/3.
// d must be at least 3 ms.
func WithQueueTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 3*time.Millisecond {
			return fmt.Errorf("%w: queue timeout %v is less than 3ms", rlock.ErrInvalidArgument, d)
		}
		c.QueueTimeout = d
		return nil
	}
}

// DefaultThreadWait is the thread wait time unless WithThreadWaitTime says
// otherwise: Redisson's default fairLockWaitTimeout.
const DefaultThreadWait = core.DefaultThreadWait

// WithThreadWaitTime sets the thread wait time W of the queue's scores,
// which rlock keeps by Redisson's rule so that Redisson and rlock waiters
// can share one queue (see the package doc): a joiner adds W to the
// tail's score, a grant subtracts W from every score, a waiter that gives
// up subtracts W from those behind it. Set it to the Redisson clients'
// fairLockWaitTimeout (default 5 min, as here). It does not bound how
// long a waiter may wait, nor how soon a dead rlock waiter is dropped
// (WithQueueTimeout does); it must be at least 1 ms.
func WithThreadWaitTime(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: thread wait time %v is less than 1ms", rlock.ErrInvalidArgument, d)
		}
		c.ThreadWait = d
		return nil
	}
}

// WithFencing makes every grant from free to held draw a fencing token,
// as reentrant.WithFencing does; Token returns it.
func WithFencing() Option {
	return func(c *config) error {
		c.Fencing = true
		return nil
	}
}

// New returns a handle on the fair lock called name, run through client c
// (the same client the reentrant locks use). It does no I/O. It reports
// ErrInvalidArgument for a nil client, a bad name or a bad option.
func New(c *rlock.Client, name string, opts ...Option) (*Lock, error) {
	cc, ok := core.Of(c)
	if !ok {
		return nil, fmt.Errorf("%w: nil client", rlock.ErrInvalidArgument)
	}
	cfg := core.LockConfig{Kind: core.Fair}
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

// Name returns the lock's name (the Redis key of its hash).
func (l *Lock) Name() string { return l.l.Name() }

// Owner returns the owner field ("<clientID>:<ownerID>") this handle uses
// with ctx: the owner carried by ctx (rlock.WithOwner), or the handle's own.
// It is also the owner's entry in the queue.
func (l *Lock) Owner(ctx context.Context) (string, error) { return l.l.Owner(ctx) }

// Lock blocks until the caller's owner holds the lock, re-entering it at
// once if the owner holds it already. Otherwise the owner takes the last
// place in the queue, and the lock is granted in queue order: only the
// owner first in line is woken, on its own channel, when the lock is
// released and when it becomes first unless its next poll comes in time
// anyway (see the package doc). While waiting, the
// call renews its place at least every third of the queue timeout, and
// retries when woken, when the lock's TTL has passed, or when the waiter
// ahead of it missed its deadline.
//
// When ctx ends first, Lock returns at once with an error wrapping ctx's
// error, the owner leaves the queue (in the background, after any attempt
// in flight; a hold granted meanwhile is released again), and the waiters
// behind it move up. It returns ErrClosed if the client is closed (leaving
// the queue first). Transient Redis errors and lost replies are outlived
// as by reentrant.Lock.Lock: it tries again until ctx ends; errors that
// trying again cannot mend are returned (never as acquired; the owner then
// leaves the queue too).
func (l *Lock) Lock(ctx context.Context) error { return l.l.Lock(ctx) }

// TryLock makes one attempt and never joins the queue: it returns nil when
// the caller's owner now holds the lock (re-entry included), and an error
// wrapping ErrNotObtained when another owner holds it or the lock is free
// but other owners are queued for it. A context that ends is reported as
// for Lock.
func (l *Lock) TryLock(ctx context.Context) error { return l.l.TryLock(ctx) }

// LockLease is Lock with lease for this acquisition instead of the
// handle's WithLease setting: a positive lease, or rlock.WatchdogMode.
func (l *Lock) LockLease(ctx context.Context, lease time.Duration) error {
	return l.l.LockLease(ctx, lease)
}

// TryLockLease is TryLock with lease for this acquisition.
func (l *Lock) TryLockLease(ctx context.Context, lease time.Duration) error {
	return l.l.TryLockLease(ctx, lease)
}

// SetLease changes the lease of the caller's owner's current holding, as
// reentrant.Lock.SetLease does.
func (l *Lock) SetLease(ctx context.Context, lease time.Duration) error {
	return l.l.SetLease(ctx, lease)
}

// Unlock releases one hold of the caller's owner. The last hold deletes the
// lock, drops waiters at the head of the queue whose deadline has passed,
// and wakes the first live one. It returns an error wrapping ErrNotHeld,
// and changes nothing, when the owner holds no hold (Redisson answers
// success when a fair lock has expired; rlock reports it, and the holding
// period ends as lost). Like the reentrant lock's Unlock, it runs to
// completion even when ctx is cancelled, a copy re-sent by the Redis
// client takes effect once, and after a Redis error the client completes
// the release itself: do not call Unlock again for the same hold.
func (l *Lock) Unlock(ctx context.Context) error { return l.l.Unlock(ctx) }

// ForceUnlock deletes the lock whoever holds it and wakes the waiter first
// in line; the queue stays. It reports whether there was a lock to delete.
// A holder learns of it from its watchdog or its next Unlock.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) { return l.l.ForceUnlock(ctx) }

// IsLocked reports whether any owner holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) { return l.l.IsLocked(ctx) }

// IsHeld reports whether the caller's owner holds the lock.
func (l *Lock) IsHeld(ctx context.Context) (bool, error) {
	n, err := l.l.HoldCount(ctx)
	return n > 0, err
}

// HoldCount returns how many holds the caller's owner has on the lock.
func (l *Lock) HoldCount(ctx context.Context) (int, error) { return l.l.HoldCount(ctx) }

// TTL returns the lock's remaining lease, whoever holds it: 0 when nobody
// holds it, and ErrNoExpiry for a lock without expiry.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) { return l.l.TTL(ctx) }

// Done returns a channel closed when the holding period this handle last
// took part in ends (see reentrant.Lock.Done).
func (l *Lock) Done() <-chan struct{} { return l.l.Done() }

// Err returns why the holding period this handle last took part in ended
// by loss (wrapping rlock.ErrLockLost), or nil.
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
// took part in (see WithFencing), or 0.
func (l *Lock) Token() int64 { return l.l.Token() }

// Waiter is one entry of a fair lock's queue.
type Waiter struct {
	// Owner is the waiting owner's field, "<clientID>:<ownerID>".
	Owner string
	// Deadline is when the waiter's place lapses unless it renews it (a
	// live waiter does, every third of its queue timeout). Zero if the
	// entry has none (written by a foreign client); it is then dropped
	// when it reaches the head.
	Deadline time.Time
	// Left is Deadline minus the server's time when the queue was read;
	// not positive means overdue: the waiter is presumed dead and will be
	// dropped when it reaches the head.
	Left time.Duration
}

// Queue returns the lock's waiters, first in line first, with their
// deadlines, read atomically by the server. It is for operators and
// monitoring; it changes nothing.
func (l *Lock) Queue(ctx context.Context) ([]Waiter, error) {
	q, now, err := l.l.Queue(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Waiter, len(q))
	for i, w := range q {
		out[i] = Waiter{Owner: w.Owner, Deadline: w.Deadline}
		if !w.Deadline.IsZero() {
			out[i].Left = w.Deadline.Sub(now)
		}
	}
	return out, nil
}
