// Package fair implements Redisson's RFairLock for Go: a reentrant
// distributed lock on Redis that is granted in strict arrival order. It
// shares its data layout with Redisson (the lock hash, the queue list
// "redisson_lock_queue:{name}" and the deadline sorted set
// "redisson_lock_timeout:{name}"), and shares everything else with package
// reentrant: the same *rlock.Client, owners, leases, watchdog, loss
// reporting and exactly-once effects.
//
//	c, err := rlock.NewClient(rdb)
//	...
//	l, err := fair.New(c, "payouts")
//	...
//	if err := l.Lock(ctx); err != nil {
//		return err // ctx ended, client closed, or a Redis error
//	}
//	defer l.Unlock(ctx)
//
// # Order and wake-ups
//
// An owner that cannot take the lock joins the tail of the queue; the lock
// is granted only to the owner first in line, even when it is free, so
// nobody overtakes. TryLock never joins the queue.
//
// Only the owner first in line is ever woken, on its own channel
// ("redisson_lock__channel:{name}:<owner>"), over the client's one shared
// pub/sub connection. It is woken when it becomes first in line (the owner
// before it was granted the lock, gave up, or was pruned as dead) and when
// the lock is freed by Unlock or ForceUnlock. Woken, it tries again: it is
// granted, or it learns the holder's remaining lease and tries again when
// that runs out, unless a release wakes it first. So the lock passes to
// the next in line within a round trip or two of becoming free, whether it
// was freed by Unlock, ForceUnlock, the departure of the waiter ahead, or
// the expiry of a lease (a holder that died, or was paused past its
// lease); waiters further back do not poll for it. A handoff costs two
// wake-ups and two attempts, the new holder's and the next in line's,
// however many wait. A wake-up lost with a pub/sub connection is made up
// for when the client resubscribes.
//
// # Dead waiters and live ones
//
// Each waiter has a deadline in the sorted set. A live waiter renews it to
// now + the queue timeout (WithQueueTimeout, 30 s by default) at least
// every third of that timeout, however long it waits. A waiter whose
// process died stops renewing; when it reaches the head with its deadline
// passed it is dropped, and the next waiter is granted the lock at the
// latest at that deadline. This differs from Redisson, whose deadlines are
// estimates that live waiters never renew, so a waiter that waits longer
// than the timeout is dropped as dead (Redisson issues #3004, #6150).
// Deadlines use the Redis server's clock, not the clients'.
//
// A waiter whose context ends leaves the queue (in the background, after
// any attempt still in flight), and if it was first in line, it wakes the
// next one. The queue keys expire a little after
// the last deadline, so waiters that all crashed leave nothing behind.
//
// # Sharing a lock with Redisson
//
// Mutual exclusion and reentrancy interoperate with Redisson's RFairLock.
// Strict order across the two does not: Redisson shifts other waiters'
// deadlines by its own wait time when it is granted, which can make rlock
// waiters look dead (they then rejoin at the tail), and Redisson waiters do
// not renew their deadlines.
//
// # Safety
//
// The safety model is the reentrant lock's (see package rlock): a Redis
// lock expires by wall-clock time and can be lost in a failover; use
// Done/Err to learn of a loss, and fencing tokens (WithFencing) to make a
// store reject writes from a holder that lost the lock without knowing.
package fair
