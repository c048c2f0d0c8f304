// Package latch is a distributed count-down latch on Redis, compatible
// with Redisson's RCountDownLatch: the key named by the latch holds the
// count as a decimal string, the channel is
// "redisson_countdownlatch__channel__{name}", and the messages are
// Redisson's ("0": the count reached zero; "1": a new count, or a
// delete). Java services on Redisson and Go services on rlock share a
// latch by name.
//
// One side sets a count (TrySetCount), workers count down (CountDown),
// and any number of waiters block in Await until the count reaches zero.
// What it adds to Redisson's latch:
//   - No wait depends on one message: Await looks at the count at least
//     every poll (WithPoll, 1 s by default), so a lost "0" costs at most
//     that, where Redisson's untimed await hangs.
//   - Delete releases rlock's waiters (Redisson's are left waiting).
//   - Exactly-once writes: every TrySetCount, CountDown and Delete carries
//     an operation ID that the latch's operation log
//     ("rlock_latch_ops:{name}", a sorted set trimmed to the client's
//     replay window, at most 10000 IDs) records, so a copy re-sent by
//     go-redis after a lost reply never counts down twice.
//   - Bad input is an error, never a panic: a count that is not positive
//     is rlock.ErrInvalidArgument, a key holding anything but a decimal
//     integer is rlock.ErrWrongType (and is left alone).
//
// Replica sync: every write shares the client's replica sync with the
// locks (rlock.WithReplicaSync, on by default for a *redis.Client or a
// *redis.ClusterClient): the script and WAIT go in one pipeline on the
// latch's master. A write that changed the latch, on a master with a
// connected replica of which none acknowledged it within the timeout (or
// WAIT failed after the script ran), cannot be undone (a CountDown to zero
// has released the waiters already): the call returns its usual result
// with an error wrapping rlock.ErrMayBeLost, and the caller must assume
// the write is applied on the current master, exactly once, and may
// vanish if that master fails over before a replica copies it (a lost
// TrySetCount leaves the latch open; a lost CountDown or Delete keeps
// waiters waiting). Calling CountDown again is not a retry: it counts down
// again. A write that changed nothing reports no such error.
//
// Waiters share the client's pub/sub hub (one subscription per latch per
// client) and its pub/sub mode (classic or sharded, see
// rlock.WithPubSubMode). On Redis Cluster, a name with a hash tag of its
// own puts the channel in another slot than the key (Redisson's layout),
// and the scripts are then refused with CROSSSLOT: use plain names there.
package latch
