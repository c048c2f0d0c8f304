// Package multilock holds several locks as one, all or nothing: Redisson's
// RedissonMultiLock for Go.
//
// The members are rlock.Locker values of any kind (reentrant, fair, another
// MultiLock), on one client or several, on one Redis server or several. A
// MultiLock is held when the caller's owner holds every member; it is
// itself an rlock.LeaseLocker, so MultiLocks nest.
//
//	m, err := multilock.New([]rlock.Locker{orders, stock, payments})
//	...
//	if err := m.Lock(ctx); err != nil {
//		return err // ctx ended, or a member failed: nothing more is held
//	}
//	defer m.Unlock(ctx)
//
// # Acquisition
//
// Members are taken one after the other in the given order; give every
// MultiLock that shares locks the same order. TryLock makes one attempt on
// each member and, when one is held by another owner, releases the members
// it took and fails with rlock.ErrNotObtained. Lock waits: for the first
// member as long as its context allows (holding nothing), for each later
// member at most a bounded member wait (WithMemberWait: 50 ms at first,
// doubling per failed round up to 1 s, with random jitter), since it holds
// the earlier members meanwhile. When that wait runs out it releases
// everything, waits (holding nothing, as long as its context allows) until
// the member that was busy can be taken, lets it go again and starts over.
// Waits go through the members' own Lock, so a reentrant member wakes on its
// unlock message instead of polling; there is no busy loop and no fixed
// sleep. The bound means two MultiLocks that take shared locks in different
// orders can delay each other but never deadlock.
//
// # Leases
//
// While the members are taken, every member that implements
// rlock.LeaseLocker holds in watchdog mode (its client's watchdog renews
// it), so the members taken first cannot expire while Lock waits for the
// rest, however long that takes. (Redisson uses a provisional lease of
// twice the wait budget instead; a Lock without a deadline has no budget to
// double, and renewal also covers a crashed process, whose locks then
// expire after the watchdog lease.) Once every member is held, each hold
// this acquisition created is given the caller's lease (WithLease,
// LockLease) with SetLease, or stays in watchdog mode when none was given.
// A member the owner held already (a re-entry, also of the whole
// MultiLock) keeps the lease of its hold: a MultiLock never shortens, or
// stops the renewal of, a hold it did not create. Members that implement
// only rlock.Locker keep their own handle's lease setting throughout.
//
// # Release, reentrancy and loss
//
// Unlock releases one hold on every member in parallel and reports every
// member that failed (errors.Join), not only the first. Re-locking a
// MultiLock the owner holds re-enters every member; each successful Lock or
// TryLock needs one Unlock. Done and Err aggregate the members that report
// loss (those with Done and Err methods, like reentrant locks), watching
// the holding period each member's acquisition is part of: the MultiLock
// is lost as soon as any member is, also when its Unlock is what finds a
// member lost. After an Unlock that releases every member, Err is nil.
package multilock
