// Package semaphore is Redisson's RSemaphore for Go: a counting semaphore
// shared by every process (Go or Java) that names it, built on the same
// rlock.Client as the locks and sharing its pub/sub hub.
//
//	s, err := semaphore.New(client, "partner-api") // a cheap handle; no I/O
//	...
//	if _, err := s.TrySetPermits(ctx, 5); err != nil { // once, by anyone
//		return err
//	}
//	if err := s.Acquire(ctx, 1); err != nil {
//		return err
//	}
//	defer s.Release(context.WithoutCancel(ctx), 1)
//
// # Layout
//
// The key named by the semaphore holds the available permits as a decimal
// integer (a missing key is 0), and every release publishes the new count
// on "redisson_sc:{name}" ("redisson_sc:name" for a name with a hash tag),
// with PUBLISH, or SPUBLISH when the client uses sharded pub/sub, exactly
// as Redisson does: Redisson's RSemaphore and this package share one
// semaphore by name. rlock adds one key of its own, "{name}:rlock_ops"
// ("name:rlock_ops" with a hash tag), in the same hash slot: a sorted set
// of the IDs of recent operations, each kept for the client's replay
// window (rlock.WithReplayWindow) and trimmed by every write.
//
// # Safety model
//
// Permits have no owner, as in Redisson and in the JDK: Release adds
// permits whoever calls it, and a holder that crashes without releasing
// leaks its permits for good. What rlock adds is exactly-once calls:
//
//   - Each acquire, release and permit change carries an operation ID
//     recorded by its script. A copy of the call that go-redis re-sends
//     after a lost reply finds its ID and changes nothing again: an
//     acquire never takes twice, a release never returns twice (Redisson's
//     does, issue #5066).
//   - An acquire whose reply never came back is settled at once: the
//     permits it may have taken are given back, and no later copy of it
//     can take any. An acquire granted after its ctx ended gives its
//     permits back too.
//   - No wait depends on a message: a waiter tries again when a release
//     wakes it, when its subscription is confirmed (so a release between
//     its first try and its SUBSCRIBE is never missed), and at least every
//     poll interval (WithPoll, 1 s by default).
//   - A message wakes as many of a client's waiters as it counts permits,
//     and a waiter granted with permits left over wakes the next one.
//
// Every call's keys share one hash slot, so the scripts run unchanged on
// Redis Cluster.
package semaphore
