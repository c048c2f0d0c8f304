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
// The lock kinds, each in its own package, take the client first and the
// lock's name second:
//
//   - reentrant: Redisson's RLock: a reentrant lock with leases, watchdog
//     renewal and waits woken by pub/sub.
//   - fair: Redisson's fair lock: the same, granted in arrival order.
//   - multilock: several locks of any kind held as one, all or nothing,
//     or (quorum mode) held when k of n are.
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
// A Redis lock is a lease, not a guarantee. What rlock promises while Redis
// works and clocks behave: at most one owner holds a lock at a time; a
// holder that crashes releases it when its lease runs out; a blocked Lock
// is woken promptly by the release (pub/sub) and never waits longer than
// the lock's remaining TTL; an operation the Redis client re-sends after a
// lost reply takes effect once; and a Redis error is never read as
// "acquired".
//
// What it cannot promise, and what to do about it:
//
//   - Expiry uses the server's clock. A holder paused longer than its lease
//     (GC, CPU starvation, a frozen VM) can still believe it holds a lock
//     that has expired and been granted to someone else. The watchdog
//     renews while the process runs and reports loss (Lock.Done, Lock.Err)
//     as soon as it learns of it, or as soon as the lease has certainly run
//     out while Redis was unreachable — but a paused process learns nothing
//     while paused. Check Done before acting, keep critical sections short,
//     and protect the resource itself with a fencing token where it matters:
//     with WithFencing (reentrant and fair), every grant from free to held
//     draws a token strictly larger than any before on that name, and a
//     store that refuses tokens lower than one it has seen refuses the
//     paused holder's late writes. The counter lives in Redis: a restart
//     without persistence starts it again.
//   - Replication is asynchronous. A failover can promote a replica that
//     never saw the lock, and a second owner then gets it.
//   - A Redis restart without persistence deletes every lock; holders are
//     told at their next renewal.
//
// Every lock kind is a lease on one Redis deployment; RedLock, over several
// independent masters, narrows the failover window but does not remove the
// clock assumptions.
package rlock
