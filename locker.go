package rlock

import (
	"context"
	"time"
)

// Locker is what every rlock lock kind implements, so that a MultiLock can
// combine locks of any kind. All methods take a context first and touch the
// network.
type Locker interface {
	// Lock blocks until the lock is acquired or ctx ends; on ctx's end it
	// returns ctx's error and holds nothing.
	Lock(ctx context.Context) error
	// TryLock makes one attempt; ErrNotObtained if another owner holds it.
	TryLock(ctx context.Context) error
	// Unlock releases one hold; ErrNotHeld if the owner holds none.
	Unlock(ctx context.Context) error
	// IsHeld reports whether the caller's owner holds the lock (for a
	// combinator: enough of its members, see MultiLock.IsHeld).
	IsHeld(ctx context.Context) (bool, error)
	// Name is the lock's name (its Redis key).
	Name() string
}

// WatchdogMode, given as a lease, asks for watchdog mode: the lock gets the
// client's watchdog lease (30 s by default, see WithWatchdogLease) and the
// client's watchdog renews it for as long as it is held. It is the zero
// lease, and the one rule for it across every lock kind: a lease of 0, as
// an option or per call, means watchdog mode; any other lease must be at
// least 1 ms.
const WatchdogMode time.Duration = 0

// LeaseLocker is a Locker whose lease can be chosen per acquisition and
// changed while held. The reentrant and fair locks implement it. MultiLock
// and RedLock use it to keep the members taken first alive while they wait
// for the rest, and to give every member the caller's lease afterwards.
//
// A lease is either positive (an explicit lease: the lock expires after it
// and nothing renews it) or WatchdogMode. Anything else is rejected with
// ErrInvalidArgument.
type LeaseLocker interface {
	Locker
	// LockLease is Lock with lease for this acquisition instead of the
	// handle's own lease setting.
	LockLease(ctx context.Context, lease time.Duration) error
	// TryLockLease is TryLock with lease for this acquisition instead of
	// the handle's own lease setting.
	TryLockLease(ctx context.Context, lease time.Duration) error
	// SetLease changes the lease of the caller's owner's current holding:
	// a positive lease sets the lock's remaining TTL to it and stops
	// watchdog renewal; WatchdogMode hands the lock to the watchdog. Later
	// releases that leave holds restore the new lease. It returns an error
	// wrapping ErrNotHeld, and changes nothing, when the owner holds none.
	SetLease(ctx context.Context, lease time.Duration) error
}
