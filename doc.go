// Package rlock is the shared vocabulary of the rlock distributed locks for
// Go on Redis: the error sentinels, the Locker interface every lock kind
// implements, explicit owners carried in a context, the small Redis client
// interface the locks depend on, and the Redisson-compatible key layout.
//
// The locks themselves live in the sub-packages: reentrant (Redisson RLock
// semantics: reentrant, leases, watchdog renewal, pub/sub waits), with the
// client every lock kind shares, and watchdog (lease renewal for every lock
// a client holds).
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
