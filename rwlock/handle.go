package rwlock

import (
	"context"
	"time"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/core"
)

// ReadLock is the read side of a read-write lock: any number of owners
// hold it at once, while no writer does. It is an rlock.LeaseLocker, so a
// MultiLock can take it with other locks.
//
// A new reader is let in when no writer holds the lock and no writer
// waits for the readers to leave (see the package doc). Goroutines that
// share the handle read together, and the pair's write side waits for all
// of them (as sync.RWMutex). A Lock whose ctx descends from a holding's Ctx
// re-enters: from the read holding, one more read; from the write holding,
// the read lock too (a downgrade). Each read hold has its own lease
// (its timeout key): one reader's lease running out does not end another's.
type ReadLock struct{ handle }

// WriteLock is the write side of a read-write lock: one owner at a time,
// and no reader meanwhile. It is an rlock.LeaseLocker.
//
// An owner that holds the read lock is refused the write lock at once with
// rlock.ErrUpgrade (it would wait for itself). A blocking Lock that finds
// readers keeps new readers out until it had its turn (see the package
// doc for the bound).
type WriteLock struct{ handle }

var (
	_ rlock.LeaseLocker = (*ReadLock)(nil)
	_ rlock.LeaseLocker = (*WriteLock)(nil)
)

func init() {
	core.RegisterHandle(func(h *ReadLock) *core.Lock { return h.l })
	core.RegisterHandle(func(h *WriteLock) *core.Lock { return h.l })
}

// handle holds the methods both sides share; each runs on its side's
// holds of the caller's owner.
type handle struct{ l *core.Lock }

// Name returns the lock's name (the same for both sides).
func (h handle) Name() string { return h.l.Name() }

// Owner returns the owner field ("<clientID>:<ownerID>") the handle uses
// with ctx: the owner carried by ctx (rlock.WithOwner), or the RWLock's
// own. Both sides of one RWLock return the same owner.
func (h handle) Owner(ctx context.Context) (string, error) { return h.l.Owner(ctx) }

// Lock blocks until the caller's owner holds this side, re-entering it
// (one more hold) if the owner holds it already. It waits on the client's
// shared pub/sub subscription and retries when a release is published,
// when the reply's wait has passed, or at the latest every max-poll
// interval; a writer also at least every third of its writer wait.
//
// A transient Redis error does not end the wait: Lock tries again, backing
// off from 10 ms to 1 s, until ctx ends; the error then wraps both ctx's
// error and the last Redis error. When ctx ends first, Lock returns at
// once with an error wrapping ctx's error, and the owner holds nothing
// more than before (an attempt already sent finishes in the background
// and releases what it got); a writer also leaves the writer-wait set. On
// the write side an owner that holds the read lock gets rlock.ErrUpgrade
// at once. It returns rlock.ErrClosed if the client is closed.
func (h handle) Lock(ctx context.Context) error { return h.l.Lock(ctx) }

// TryLock makes one attempt: nil when the caller's owner now holds this
// side (re-entry included), an error wrapping rlock.ErrNotObtained when it
// may not (another owner writes; or, reading, a writer waits), ctx's
// error if ctx ended before or during the attempt (a hold obtained then is
// released again), rlock.ErrUpgrade on the write side of an owner that
// reads. A writer's TryLock never keeps readers out. If the attempt's
// reply was lost after it ran, the hold it may have taken is given back.
func (h handle) TryLock(ctx context.Context) error { return h.l.TryLock(ctx) }

// LockLease is Lock with lease for this acquisition instead of the
// RWLock's WithLease setting: a positive lease, or rlock.WatchdogMode. A
// re-entry never takes protection away from the holds already there.
func (h handle) LockLease(ctx context.Context, lease time.Duration) error {
	return h.l.LockLease(ctx, lease)
}

// TryLockLease is TryLock with lease for this acquisition (see LockLease).
func (h handle) TryLockLease(ctx context.Context, lease time.Duration) error {
	return h.l.TryLockLease(ctx, lease)
}

// SetLease changes the lease of the caller's owner's holds of this side: a
// positive lease sets it (a reader's timeout keys, a writer's lock hash)
// and stops watchdog renewal; rlock.WatchdogMode hands them to the
// watchdog. It may shorten the lease. It returns an error wrapping
// rlock.ErrNotHeld, and changes nothing, when the owner holds none. Like
// Unlock it runs to completion even when ctx is cancelled.
func (h handle) SetLease(ctx context.Context, lease time.Duration) error {
	return h.l.SetLease(ctx, lease)
}

// Unlock releases one hold of the caller's owner on this side. The last
// read hold of the last reader deletes the lock and wakes a writer; the
// last write hold deletes it (or, when the owner still reads, turns it
// into a read lock) and wakes every waiter. It returns an error wrapping
// rlock.ErrNotHeld, and changes nothing, when the owner holds none (never
// held, released, expired, force-unlocked: the holding period then ends
// as lost).
//
// Once sent, a release runs to completion even when ctx is cancelled;
// ctx only bounds the wait for another call of the same owner on this
// side still in progress. It takes effect once when re-sent, and after an
// error whose outcome is unknown the client completes it itself: do not
// call Unlock again for the same hold. It works after the client was
// closed too.
func (h handle) Unlock(ctx context.Context) error { return h.l.Unlock(ctx) }

// ForceUnlock deletes the lock whoever holds it, only in this side's mode
// (as Redisson's): the read side deletes a lock that readers hold, the
// write side one that a writer holds. It reports whether it deleted the
// lock; false when it was free or held in the other mode. Every waiter is
// woken. RWLock.ForceUnlock deletes it in either mode. It runs to
// completion even when ctx is cancelled, and takes effect once if re-sent.
func (h handle) ForceUnlock(ctx context.Context) (bool, error) { return h.l.ForceUnlock(ctx) }

// IsLocked reports whether any owner holds this side: a live reader on the
// read side (the writer's own read holds included), a writer on the write
// side.
func (h handle) IsLocked(ctx context.Context) (bool, error) { return h.l.IsLocked(ctx) }

// IsHeld reports whether the caller's owner holds this side.
func (h handle) IsHeld(ctx context.Context) (bool, error) {
	n, err := h.l.HoldCount(ctx)
	return n > 0, err
}

// HoldCount returns how many holds of this side the caller's owner has: 0
// when it holds none (on the read side, also when every one of its read
// holds' leases ran out).
func (h handle) HoldCount(ctx context.Context) (int, error) { return h.l.HoldCount(ctx) }

// TTL returns the lock's remaining lease, whoever holds it, in whatever
// mode: 0 when nobody holds it, and rlock.ErrNoExpiry for a lock without
// expiry. RWLock.State has each holder's own lease.
func (h handle) TTL(ctx context.Context) (time.Duration, error) { return h.l.TTL(ctx) }

// Done returns a channel closed when the holding period this side's
// handle last took part in ends: by the owner's last Unlock of this side,
// or by loss (see Err). A read holding and a write holding of one owner
// are separate holding periods. Before the first acquisition it returns a
// closed channel.
func (h handle) Done() <-chan struct{} { return h.l.Done() }

// Err returns nil while the holding period this side's handle last took
// part in goes on, or when it ended by Unlock; after a loss, an error
// wrapping rlock.ErrLockLost that says why.
func (h handle) Err() error { return h.l.Err() }

// Ctx returns the holding period this side's handle last took part in as
// a context: cancelled when it ends, with context.Cause wrapping
// rlock.ErrLockLost after a loss and context.Canceled after the last
// Unlock. Before the first acquisition it is already cancelled.
func (h handle) Ctx() context.Context { return h.l.Ctx() }

// Until returns the time up to which the holding period this side's
// handle last took part in is known to last (an explicit lease's end, or
// the watchdog lease from the last successful renewal); the zero time once
// it ended, and before the first acquisition.
func (h handle) Until() time.Time { return h.l.Until() }

// Token returns the fencing token of the write holding period this handle
// last took part in (see WithFencing), or 0 without fencing or before the
// first write hold. Read it after Lock returns and before Unlock.
func (w *WriteLock) Token() int64 { return w.l.Token() }
