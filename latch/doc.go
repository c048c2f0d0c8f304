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
// Waiters share the client's pub/sub hub (one subscription per latch per
// client) and its pub/sub mode (classic or sharded, see
// rlock.WithPubSubMode). On Redis Cluster, a name with a hash tag of its
// own puts the channel in another slot than the key (Redisson's layout),
// and the scripts are then refused with CROSSSLOT: use plain names there.
package latch
