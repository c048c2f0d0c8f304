// Package rlock is the root of rlock, distributed locks for Go on Redis
// with Redisson's semantics and data layout: the Client every lock kind
// runs through, the error sentinels, the Locker interfaces every lock kind
// implements, and explicit owners carried in a context.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	c, err := rlock.NewClient(rdb) // one per Redis deployment; no I/O
//	...
//	defer c.Close()
//	l, err := reentrant.New(c, "orders:42") // a cheap handle; no I/O
//	...
//	if err := l.Lock(ctx); err != nil {
//		return err
//	}
//	defer l.Unlock(ctx)
//
// # Ownership
//
// A lock handle is used like a sync.Mutex: goroutines that share one
// handle exclude each other (the read side of a read-write lock is shared,
// like sync.RWMutex's RLock), and waiting goroutines are let through in
// arrival order; after as many Unlocks as Locks the handle is free again,
// whichever goroutine calls them. Unlock when nothing is held returns
// ErrNotHeld and never releases another owner's hold. Re-entry is
// explicit: a Lock whose ctx descends from the holding's Ctx() (the
// context the work runs under; Do passes one to its function) re-enters
// the holding instead of waiting for it, and so downgrades a write lock to
// a read lock; re-entering with a plain ctx waits for itself, as a second
// sync.Mutex.Lock would. WithOwner names an owner that spans goroutines,
// handles or processes: calls carrying the same owner ID re-enter each
// other's holds, and the caller orders them. Do runs a function while
// holding a lock, and NewLocker adapts a lock to sync.Locker.
//
// The lock kinds, each in its own package, take the client first and the
// lock's name second:
//
//   - reentrant: Redisson's RLock: a reentrant lock with leases, watchdog
//     renewal and waits woken by pub/sub.
//   - fair: Redisson's fair lock: the same, granted in arrival order.
//   - multilock: several locks of any kind held as one, all or nothing,
//     or (quorum mode) held when k of n are.
//   - rwlock: Redisson's RReadWriteLock: shared reads, exclusive writes,
//     and waiting writers that keep new readers out.
//   - redlock: the Redlock algorithm: a quorum of n independent masters.
//
// Package watchdog documents the renewal of watchdog-mode locks (one
// scheduler per client) and its statistics; package scripts holds the Lua
// the locks run, readable as files. The rlock command (cmd/rlock) runs a
// demo and inspects and force-unlocks locks.
//
// # Client options and lock options
//
// Options of NewClient (ClientOption: WithClientID, WithLogger,
// WithWatchdogLease, ...) configure what every lock on the client shares;
// options of a lock constructor (reentrant.WithLease, fair.WithQueueTimeout,
// ...) configure that one handle. A lease is the one thing both speak of:
// the watchdog lease (WithWatchdogLease) is the lease a watchdog-mode hold
// gets and renews, a lock's lease (WithLease, LockLease) chooses between an
// explicit lease and watchdog mode (WatchdogMode, the zero lease).
//
// # Holding periods
//
// Every lock handle reports the holding period its last acquisition is
// part of, from free to held until the owner's last Unlock or a loss:
// Done and Err, Ctx (the same as a context whose cause wraps ErrLockLost
// on loss), and Until (the time up to which the lock is known to be held).
//
// # Data layout
//
// A lock is a Redis hash whose key is the lock name; its one field is the
// owner, "<clientID>:<ownerID>", and the value the owner's hold count.
// Releases publish "0" on "redisson_lock__channel:{<name>}". This is
// Redisson's layout byte for byte, so Java services on Redisson and Go
// services on rlock exclude each other on the same lock name.
//
// # Safety model
//
// A Redis lock is a lease, not a guarantee. While Redis works and clocks
// behave, rlock gives mutual exclusion, release on holder crash within one
// lease, prompt wake-ups, exactly-once effects of re-sent commands, and never
// reads a Redis error as "acquired". A holder paused past its lease, and a
// failover that loses an unreplicated lock, are outside what any Redis lock
// can prevent: watch Ctx, use fencing tokens (WithFencing) where a store can
// refuse stale writers, and keep replica sync on. The full statement, with
// unknown outcomes and the limits worth knowing, is docs/safety.md in the
// repository.
package rlock
