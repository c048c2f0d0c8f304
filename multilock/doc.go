// Package multilock holds several locks as one: Redisson's
// RedissonMultiLock for Go, all or nothing by default, or held by a quorum
// of its members (the mode RedLock is built on).
//
// The members are rlock.Locker values of any kind (reentrant, fair, another
// MultiLock, a RedLock), on one client or several, on one Redis server,
// cluster or several. A MultiLock is itself an rlock.LeaseLocker, so
// MultiLocks nest.
//
//	m, err := multilock.New([]rlock.Locker{orders, stock, payments})
//	...
//	if err := m.Lock(ctx); err != nil {
//		return err // ctx ended, or a member failed: nothing more is held
//	}
//	defer m.Unlock(ctx)
//
// # All mode (the default)
//
// The MultiLock is held when the caller's owner holds every member.
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
// unlock message instead of polling. The bound means two MultiLocks that
// take shared locks in different orders can delay each other but never
// deadlock. Goroutines that share a MultiLock handle exclude each other,
// as with a sync.Mutex. Re-locking a MultiLock with a ctx that descends
// from its Ctx re-enters every member, and a member locked with such a ctx
// re-enters too; each successful Lock or TryLock needs one Unlock.
//
// While the members are taken, every member that implements
// rlock.LeaseLocker holds in watchdog mode (its client's watchdog renews
// it), so the members taken first cannot expire while Lock waits for the
// rest. (Redisson uses a provisional lease of twice the wait budget; a
// Lock without a deadline has no budget to double.) Once every member is
// held, each hold this acquisition created is given the caller's lease
// (WithLease, LockLease) with SetLease, or stays in watchdog mode (lease
// 0, rlock.WatchdogMode, the default). A member the owner held already (a
// re-entry) keeps the lease of its hold: a MultiLock never shortens, or
// stops the renewal of, a hold it did not create, in either mode, neither
// when it is acquired nor by SetLease; the same holds for a member that is
// itself a MultiLock or RedLock, whose holds the owner had before keep
// their leases too. Members that implement only rlock.Locker keep their
// own handle's lease setting throughout.
//
// # Quorum mode (WithQuorum)
//
// With WithQuorum(k) the MultiLock is held when k of its n members are:
//
//	q, err := multilock.New(members, multilock.WithQuorum(2), multilock.WithLease(10*time.Second))
//
// Every attempt asks all members in parallel, so it costs the slowest
// member's round trip, bounded by the reply wait (WithReplyWait; default
// max(time left / n, 1 ms), or 500 ms without a deadline): a member that is
// down or frozen costs at most that. Up to n-k members may fail. An
// acquisition is valid for lease - elapsed - drift, where elapsed runs from
// the earliest request sent to a member that granted, and the drift, an
// allowance for clocks running at different speeds, is 1% of the lease
// plus 2 ms (Drift); one whose validity is not positive has failed. A
// failed attempt releases every member that granted before it returns
// (waiting at most another reply wait); until such a release has finished,
// the same owner's next attempt on that member waits for it, so a late
// release never undoes a newer grant. A member whose outcome is unknown (no
// answer in time, a lost reply) holds nothing by rlock.Locker's contract:
// rlock's own locks give back a grant they could not report. Lock retries
// after a random delay (WithRetryDelay, 20 to 200 ms) until its context
// ends, and gives up at once when so many members' clients are closed that
// no quorum is left. Re-locking through the same handle for the same owner
// counts one more hold without I/O; use one handle per owner.
//
// # Errors
//
// Failures are *Error values naming every member that failed and why
// (Failures; WithMemberNames names them). An acquisition that did not get
// its members wraps rlock.ErrNotObtained; a context that ends is reported
// as the context's error, never as ErrNotObtained.
//
// # Holding period, loss and queries
//
// Ctx is the holding period of the last acquisition as a context (as
// etcd's Session.Ctx): it is cancelled when it ends, with a cause wrapping
// rlock.ErrLockLost that names the member(s) on loss and context.Canceled
// on release; Done and Err say the same. It follows the holding periods
// the members report for this acquisition (rlock's locks and MultiLocks
// do): in all mode it ends at the first member lost, also one that Unlock
// finds lost; in quorum mode when fewer than k members still hold, or when
// an explicit lease's validity runs out.
//
// Until is the time up to which the MultiLock is known to be held, less the
// drift allowance, from the members' own Until (in watchdog mode, each
// member's watchdog lease from its last successful renewal): the earliest
// in all mode, the k-th latest in quorum mode; in quorum mode with an
// explicit lease, the validity end unless that is later. A re-entered
// member keeps its own lease: when that is shorter than the MultiLock's,
// Until says so. In watchdog mode it moves on with every renewal. Act
// while time.Now().Before(m.Until()).
//
// IsHeld asks the members whether the caller's owner holds them (every
// one, or k). There is no HoldCount: the members of one MultiLock may be
// held different numbers of times (a member the owner held before), so no
// one count describes it. There is no IsLocked: "someone holds it" is
// ambiguous across members held by different owners; ask the members.
package multilock
