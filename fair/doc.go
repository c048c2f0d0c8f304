// Package fair implements Redisson's RFairLock for Go: a reentrant
// distributed lock on Redis that is granted in strict arrival order. It
// shares its data layout with Redisson (the lock hash, the queue list
// "redisson_lock_queue:{name}" and the score sorted set
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
// pub/sub connection. It is woken when the lock is freed by Unlock or
// ForceUnlock, and when it becomes first in line because the owner before
// it gave up or was pruned as dead. When it becomes first in line because
// the owner before it was granted the lock, it is woken only if the new
// holder's lease may run out before its own next poll (a Redisson waiter,
// or an rlock waiter whose liveness deadline, below, comes after the new
// lease ends); otherwise that poll, due before its deadline anyway,
// teaches it the lease in time. Woken, it tries again: it is granted, or
// it learns the holder's remaining lease and tries again when that runs
// out, unless a release wakes it first. So the lock passes to the next in
// line within a round trip or two of becoming free, whether it was freed
// by Unlock, ForceUnlock, the departure of the waiter ahead, or the expiry
// of a lease (a holder that died, or was paused past its lease); waiters
// further back do not poll for it. A handoff costs one wake-up and one
// attempt, the new holder's, however many wait (two of each when the
// grant wakes the next in line, as with a lease shorter than the queue
// timeout). A wake-up lost with a pub/sub connection is made up for when
// the client resubscribes.
//
// # Scores, dead waiters and live ones
//
// One queue serves rlock and Redisson waiters alike, so its sorted set
// keeps Redisson's scores, by Redisson's rule, whoever changes it. With W
// the thread wait time (WithThreadWaitTime; Redisson's
// fairLockWaitTimeout, 5 min by default in both):
//
//   - a joiner scores the tail's score plus W (first in line: now + the
//     holder's remaining lease + W; an rlock joiner takes the highest
//     score in the set, the tail's unless a renewal raised one ahead);
//   - a grant subtracts W from every queued score (rlock's grants too);
//   - a waiter that gives up subtracts W (a Redisson tryLock: its wait)
//     from the score of every waiter behind it;
//   - a waiter first in line whose score has passed is dead: the scripts
//     that reach it drop it, Redisson's every attempt, rlock's releases
//     and attempts (an rlock waiter's first join behind a held lock leaves
//     the head to the release; rlock's scripts judge rlock waiters by
//     their liveness deadline instead, below).
//
// Redisson waiters never renew their scores. An rlock waiter renews its
// place on every poll, at least every third of its queue timeout T
// (WithQueueTimeout, 30 s by default), however long it waits, and never
// lowers its score: it raises it to at least now + T + (waiters ahead) ×
// W, which the grants and departures ahead of it cannot use up before its
// next renewal. Beside the scores, each rlock waiter records its own
// liveness deadline, now + T at its last renewal, in
// "redisson_lock_timeout:{name}:rlock" (a hash; Redisson ignores it): rlock
// drops an rlock waiter first in line once that passes, so a dead rlock
// waiter holds up the queue for at most T, as before. Since its score
// never falls below that deadline (given one W for every client), rlock's
// scripts read only the deadline to judge an rlock waiter. A waiter that is
// dropped is told on its own channel, so one dropped while still alive
// polls at once and queues again (at the tail). Scores and deadlines use
// the Redis server's clock in rlock's scripts, the Java client's clock in
// Redisson's; only that clock drops a waiter. The rlock client's clock
// spares two reads of the server's: a release takes the head for alive
// when its deadline lies more than a third of the queue timeout past the
// client's now (a live waiter's lies at least two thirds ahead; a client
// clock more than T/3 behind the server's may then wake a dead head,
// which the next attempt that finds the lock free drops), and a grant
// judges by it whether the next in line must be woken.
//
// A waiter whose context ends leaves the queue (in the background, after
// any attempt still in flight), and if it was first in line, it wakes the
// next one. The queue keys carry no TTL (Redisson's waiters may be in
// them); an empty list or sorted set vanishes by itself, and dead entries
// are dropped by the next script that reaches them. The liveness hash
// expires between T + 1 s and 2T + 1 s after the last rlock renewal (its
// TTL is extended about once per T, not on every renewal).
//
// # Sharing a lock with Redisson
//
// In a queue that mixes Redisson RFairLock and rlock waiters in any order:
// mutual exclusion and reentrancy hold; grants follow arrival order; each
// handoff happens within a round trip or two of the release, by a wake-up
// on the next waiter's channel (publish mode as rlock.PubSubMode says);
// no live rlock waiter is dropped; a dead rlock waiter is dropped within T
// by rlock's scripts, and at its score by Redisson's. Limits, all of
// Redisson's own making: a Redisson waiter that waits longer than its
// score (about W per waiter ahead of it when it joined) counts as dead and
// is dropped, as in a Redisson-only queue (Redisson issues #3004, #6150),
// but is told and queues again at once; rlock's renewal floor assumes
// every Redisson wait is at most W (a Redisson tryLock with a longer wait
// that gives up subtracts more than an rlock waiter behind it budgets
// for); and W must match the Redisson clients' fairLockWaitTimeout. In
// rlock-only queues nothing changes: exact arrival order, and a dead
// waiter dropped within T.
//
// # Safety
//
// The safety model is the reentrant lock's (see package rlock): a Redis
// lock expires by wall-clock time and can be lost in a failover; use
// Done/Err to learn of a loss, and fencing tokens (WithFencing) to make a
// store reject writes from a holder that lost the lock without knowing.
package fair
