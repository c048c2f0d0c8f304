// Package reentrant implements Redisson's RLock for Go: a reentrant
// distributed lock on Redis with leases, watchdog renewal and waits woken
// by pub/sub, sharing its data layout with Redisson so Java and Go services
// can share locks.
//
// # Handles
//
// New returns a cheap handle on one lock name, run through an
// *rlock.Client (one per Redis deployment, shared by every lock kind: its
// client ID, its one pub/sub connection for every blocked Lock call and its
// one watchdog). Neither constructor does I/O.
//
//	c, err := rlock.NewClient(rdb)
//	...
//	defer c.Close()
//	l, err := reentrant.New(c, "orders:42")
//	...
//	if err := l.Lock(ctx); err != nil {
//		return err // ctx ended, client closed, or a Redis error
//	}
//	defer l.Unlock(ctx)
//	work(l.Ctx()) // cancelled, with a cause wrapping rlock.ErrLockLost, if the lock is lost
//
// # Owners and reentrancy
//
// A handle is used like a sync.Mutex: goroutines that share it exclude each
// other, in arrival order, and it is free again after as many Unlocks as
// Locks. Re-entry is explicit, never by goroutine: a Lock whose ctx
// descends from the holding's Ctx (as rlock.Do's function gets) re-enters,
// one more hold; a Lock with a plain ctx by the holder waits for itself.
// Any other handle is another owner. rlock.WithOwner carries an explicit
// owner in the context: every call with it re-enters, across handles and
// goroutines, and the caller orders them. Every owner field is
// "<clientID>:<ownerID>", as Redisson writes "<clientID>:<threadID>".
//
// # Leases and the watchdog
//
// With WithLease, each acquisition sets the lease and nothing renews it. By
// default (watchdog mode, also WithLease(0)) the lease is the client's
// watchdog lease, 30 s, and the client's watchdog renews it every 10 s
// while held (rlock.WithWatchdogLease, rlock.WithWatchdogInterval). When the
// watchdog finds the lock gone, or the lease has certainly run out while
// Redis was unreachable, it tells the holder: the handle's Done channel
// closes, Err wraps rlock.ErrLockLost, and Ctx is cancelled with that cause.
// Until tells up to when the lock is known to be held.
//
// # Cancellation
//
// Lock waits until acquired or its context ends; TryLock makes one attempt
// and reports rlock.ErrNotObtained when another owner holds the lock. A
// context that ends is reported as its own error, never as ErrNotObtained;
// an attempt already sent is allowed to finish, and a hold it obtained
// after the context ended is released before Lock returns. Unlock and
// ForceUnlock run to completion even with a cancelled context.
//
// # Exactly-once effects
//
// go-redis re-sends a command whose reply was lost (MaxRetries, 3 by
// default), so a script can run twice. Each owner's operations on a lock
// are serialised in the client and carry the hold count the client last
// saw; the scripts recognise a re-sent acquire or release by it, and a
// last release records its request ID in the lock's short-lived latch
// (one key per lock holding its last 32 such IDs, whatever the handles and
// owners; see docs/safety.md). A re-sent
// operation therefore changes the hold count once.
//
// # Fencing and replica sync
//
// WithFencing makes each grant from free to held draw a strictly larger
// fencing token (Token), for stores that can refuse stale writers. Replica
// sync (rlock.WithReplicaSync, on by default for a *redis.Client or a
// *redis.ClusterClient) pipelines WAIT with every acquisition on the lock's
// master and undoes an acquisition that no connected replica acknowledged,
// so a failover cannot silently hand the lock to a second owner; TryLock
// then reports rlock.ErrNotReplicated and Lock tries again. WAIT's default
// timeout is 1 s, or half the go-redis ReadTimeout when that is shorter;
// only a ReadTimeout under 2 ms turns it off, with a warning on the
// client's logger. On a cluster it follows MOVED, ASK and TRYAGAIN (slot
// migrations) as the ClusterClient does.
//
// The same client serves the fair lock (package fair); package multilock
// and package redlock combine locks of any kind.
package reentrant
