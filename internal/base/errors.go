package base

import "errors"

// Every error rlock returns either is, or wraps, one of these sentinels, a
// context error (context.Canceled, context.DeadlineExceeded) or an error
// from the Redis client. Test for them with errors.Is.
var (
	// ErrNotObtained means a lock was held by another owner when TryLock
	// made its attempt. It never means the wait was cancelled: a Lock whose
	// context ends returns the context's error instead.
	ErrNotObtained = errors.New("rlock: lock not obtained")

	// ErrNotHeld means the caller's owner does not hold the lock it tried to
	// release or renew: it never held it, released it already, or the lock
	// expired or was force-unlocked meanwhile. Nothing was changed.
	ErrNotHeld = errors.New("rlock: lock not held by this owner")

	// ErrLockLost means a lock this client held stopped being held without
	// an Unlock: the watchdog found its hash field gone (lease expired,
	// force-unlocked, Redis restarted or failed over), or Redis stayed
	// unreachable until the lease had certainly run out.
	ErrLockLost = errors.New("rlock: lock lost")

	// ErrInvalidArgument means an argument was rejected before any I/O: an
	// empty name, a nil client, a lease that is not positive, and so on.
	// The wrapping error says which argument and why.
	ErrInvalidArgument = errors.New("rlock: invalid argument")

	// ErrClosed means the client was closed; no further operation is sent.
	ErrClosed = errors.New("rlock: client closed")

	// ErrNoExpiry is returned by TTL queries for a lock hash that exists but
	// has no expiry (written by a foreign client without PEXPIRE).
	ErrNoExpiry = errors.New("rlock: lock has no expiry")

	// ErrNotReplicated means a lock (or a semaphore's permits, by an
	// acquire or a drain) was granted on a master with connected replicas,
	// but none acknowledged the write within the replica-sync timeout
	// (WAIT), so a failover could have lost it: the acquisition was undone
	// and the caller holds nothing. Lock and a semaphore's Acquire retry
	// within their context; TryLock, TryAcquire and DrainPermits return
	// it.
	ErrNotReplicated = errors.New("rlock: lock not replicated")

	// ErrMayBeLost means a write that cannot be undone (a latch's
	// TrySetCount, CountDown or Delete) was applied on a master with
	// connected replicas, but none acknowledged it within the replica-sync
	// timeout (WAIT), or waiting for them failed: the write stands on the
	// master, and a failover before it reaches a replica would lose it.
	// The call was not undone and must not be repeated blindly (a second
	// CountDown counts down again).
	ErrMayBeLost = errors.New("rlock: write not replicated, may be lost on failover")

	// ErrUnexpectedReply means Redis answered a lock script with a reply of
	// the wrong shape (for example, a key of another type under the lock's
	// name). It is never read as "acquired".
	ErrUnexpectedReply = errors.New("rlock: unexpected reply from Redis")

	// ErrUnreachable means a waiting Lock gave up because Redis could not
	// be reached, in a row, for the client's unreachable timeout (see
	// rlock.WithUnreachableTimeout); it wraps the last failure. The lock
	// is not held.
	ErrUnreachable = errors.New("rlock: Redis unreachable")

	// ErrUpgrade means the caller's owner asked for the write lock of a
	// read-write lock while it holds that lock's read lock. The write lock
	// would wait for the owner's own read holds, for ever (Redisson blocks
	// here); rlock refuses at once instead, holds and registers nothing.
	// Release every read hold first, then ask for the write lock (others
	// may take the lock in between), or take the write lock first and the
	// read lock under it (a downgrade, always granted).
	ErrUpgrade = errors.New("rlock: the owner holds the read lock; the write lock would wait for itself")

	// ErrWrongType means the key under a synchronizer's name (a semaphore's
	// counter, a count-down latch's count), or a key derived from it (a
	// semaphore's registry of waiting clients), holds a value of another
	// type or one that is not what the synchronizer stores there. Nothing
	// was changed: the scripts check before their first write.
	ErrWrongType = errors.New("rlock: key holds a value of another type")
)
