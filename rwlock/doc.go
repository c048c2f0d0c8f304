// Package rwlock implements Redisson's RReadWriteLock for Go: many readers
// or one writer, reentrant per owner, with leases and watchdog renewal,
// sharing Redisson's data layout so that Java and Go services exclude each
// other — without Redisson's writer starvation.
//
//	c, err := rlock.NewClient(rdb) // one per Redis deployment, shared
//	...
//	rw, err := rwlock.New(c, "prices")
//	...
//	r := rw.ReadLock()
//	if err := r.Lock(ctx); err != nil {
//		return err
//	}
//	defer r.Unlock(ctx)
//	read(r.Ctx()) // cancelled, with a cause wrapping rlock.ErrLockLost, if the hold is lost
//
// # Semantics
//
//   - The read lock is shared: any number of owners hold it while no writer
//     does. The write lock is exclusive: one owner, no reader.
//   - Both are reentrant per owner, with hold counts (HoldCount). An owner
//     is the RWLock by default (its read and write handles share it), or
//     the one rlock.WithOwner carries.
//   - Downgrade: the owner that holds the write lock may take the read lock
//     too, then release the write lock and keep reading; nobody writes in
//     between. Readers that waited are let in at that release.
//   - Upgrade (reader → writer) is refused at once with rlock.ErrUpgrade:
//     the write lock would wait for the owner's own read holds for ever
//     (Redisson blocks here, by design). Nothing is held or registered.
//     Release every read hold, then ask for the write lock: not atomic,
//     others may write in between, so re-read what the decision was based
//     on.
//   - Each read hold has its own lease (its timeout key): one reader's
//     lease running out, or one reader dying, does not end another's; the
//     writer's lease is the lock hash's.
//
// # No writer starvation
//
// With Redisson, a steady stream of readers keeps a writer waiting for
// ever. Here a writer blocked in Lock that finds readers registers in a
// writer-wait set (a sorted set of rlock's own), and while it waits no new
// reader is let in (re-entering readers and the writer's downgrade are).
// It renews its place at least every T/3 (T = WithWriterWait, 10 s by
// default); a grant, or giving up (ctx ended), takes it out, and a writer
// that dies drops out T after its last attempt.
//
// Bound: a lone writer that finds readers at t0 is granted by
// t0 + D + T/3 at the latest, however many readers keep arriving, where D
// is the longest remaining hold among the readers holding at t0 (their
// critical sections; for a reader that died, its remaining lease: at most
// the watchdog lease, 30 s, or its explicit lease). In the normal case it
// is D plus the pub/sub latency: the last reader's release wakes it; T/3
// covers a lost message. Several writers are not ordered among themselves
// (as for the reentrant lock): a registered writer may also wait for the
// write holds of writers that get in first, but never for a new reader.
// Readers kept out by a writer that died wait at most T after its last
// attempt. Writers blocked by a writer do not register, so at a write
// release readers and writers compete as equals: neither side starves.
// TryLock never registers.
//
// # Wake-ups
//
// Both sides wait on the lock's one channel, "redisson_rwlock:{name}",
// through the client's one pub/sub connection. The last write release
// publishes "1". When it frees the lock and only writers of rlock clients
// wait (each waiting call's refused attempt registers its client, readers
// and writers apart), it first names up to two clients with waiting
// writers, as the reentrant lock's release does: the first wakes one
// writer, the second covers in case the first is gone, and every other
// client ignores that "1", so a release costs about one attempt however
// many writers wait (a writer whose client already has writers waiting
// does not take a free lock on its first attempt: it queues behind them).
// When rlock readers wait, or after a write release that leaves the
// writer's reads, "1" goes out undesignated and every waiter retries:
// readers enter as a group and compete with writers as equals. A read
// release publishes "0" (one waiter per client, a writer first) only when
// it leaves no holder at all; force unlock and the last waiting writer
// giving up publish "1" to everyone. A designated client that cannot use
// its wake-up passes it on; a client that closes leaves the registries.
// Every wait is also bounded by the reply's wait (a writer's lease, a
// waiting writer's deadline), and a writer's by T/3.
//
// # Leases, the watchdog, fencing
//
// WithLease gives both sides an explicit lease; by default (watchdog mode)
// the client's one watchdog renews read and write holds in its batches (a
// read hold's renewal renews its timeout keys). Loss is reported as for
// every lock kind: Done closes, Err wraps rlock.ErrLockLost, Ctx is
// cancelled. WithFencing gives write holds a fencing token (WriteLock.Token).
//
// # Redisson interop
//
// The layout is Redisson's: the hash named after the lock with field
// "mode" = "read" | "write" and one field per holder with its hold count
// (a writer's ends in ":write"), one timeout key per read hold
// ("{name}:<field>:rwlock_timeout:<n>"), the channel above. A Java reader
// and a Go writer exclude each other, and vice versa. The writer-wait set
// ("redisson_rwlock_writer_wait:{name}") is rlock's own: Redisson readers
// do not read it, so a stream of Java readers can still starve a Go
// writer, and Java writers never register, so the bound above holds for Go
// readers and writers only. Redisson's write release that leaves the
// writer's reads publishes nothing; ours publishes "1". Redisson's
// waiters read a designation as a number other than 0 and 1 and ignore
// it, then wake on the "1" that follows, as before. Redisson's read
// renewal sets the hash's TTL to its lease even when shorter, so on a lock
// shared with Java readers a Go reader's explicit longer lease can end
// early (the hash expires); Redisson versions before 4.4.0 (PR #7098)
// renew every holder's timeout keys, keeping dead Go readers alive. Like
// Redisson, rlock keeps the hash's TTL at the longest live read hold
// (Redisson's writer waits for that TTL alone). A Go writer whose lease
// runs out while its owner reads stops counting then for Go readers; Java
// readers see it gone at the next rlock script on the lock. See
// docs/redisson.md.
//
// # Leases of several holds
//
// An owner's read holds are one holding, as for the reentrant lock: Until
// is the longest lease any of them asked for (or the watchdog's), and the
// server keeps every one of them at least that long; SetLease sets the
// lease of all of them. An owner's write hold keeps its own lease when the
// owner also reads (a downgrade): when it runs out, the owner keeps its
// reads and others may read.
//
// # Everything else
//
// Cancellation, exactly-once effects under go-redis re-sends, replica
// sync and Redis Cluster support are those of package reentrant (all keys
// of a lock share its hash slot). Both handles are rlock.LeaseLockers, so
// a MultiLock can take read and write locks with other locks; listing one
// RWLock's write lock before its read lock downgrades, the other order
// gets rlock.ErrUpgrade. Bad input is reported as rlock.ErrInvalidArgument.
package rwlock
