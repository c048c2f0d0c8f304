// Package redlock implements the Redlock algorithm over independent Redis
// masters, with reentrant locks (Redisson's RLock layout) on each node.
//
// A RedLock over n nodes is a multilock.MultiLock in quorum mode over one
// reentrant lock per node, all of one name: it is held when a quorum of
// n/2+1 nodes granted it. That is Redisson's RedissonRedLock contract (a
// MultiLock with a failure budget of n-(n/2+1) and a per-node wait of
// max(wait/n, 1 ms)), with one change: the nodes are asked in parallel, so
// an attempt costs the slowest node's round trip (bounded by the per-node
// wait), not the sum over the nodes.
//
//	nodes := []*rlock.Client{c1, c2, c3, c4, c5} // one per master
//	rl, err := redlock.New(nodes, "orders:42", redlock.WithLease(10*time.Second))
//	...
//	if err := rl.Lock(ctx); err != nil {
//		return err
//	}
//	defer rl.Unlock(ctx)
//	if time.Now().After(rl.Until()) { // known held until then only
//		return errTooLate
//	}
//
// # Validity
//
// An acquisition is valid for lease - elapsed - drift, where elapsed runs
// from the earliest request sent to a node that granted and drift, an
// allowance for clocks running at different speeds on the nodes, is 1% of
// the lease plus 2 ms (multilock.Drift). An attempt whose validity is not
// positive has failed and is rolled back on every node. Until reports the
// end of the validity. In watchdog mode (the default; WithLease(0) and
// LockLease(ctx, 0) mean it too) every node's lock is renewed by its
// client's watchdog while held, and Until is the quorum-th latest of the
// nodes' watchdog leases, each from its last successful renewal, less the
// drift: it moves on with every renewal. Ctx, Done and Err report when
// fewer than a quorum of nodes still hold the lock, and with an explicit
// lease also when its validity runs out. IsHeld asks the nodes.
//
// # Failures
//
// A node that is down, frozen or slow costs an attempt at most the per-node
// wait: the attempt returns then, whatever the Redis client is still doing.
// Partial acquisitions are released on every node that granted before the
// attempt returns (it waits at most another per-node wait for that, and the
// owner's next attempt on such a node waits for the release). A node whose
// answer did not arrive, or whose reply was lost, gives back what its
// script granted by itself, whether the attempt failed or succeeded: its
// client releases a grant that arrives after the per-node wait, and settles
// an unknown outcome at once. Errors are *multilock.Error values naming each
// node that failed and why (WithNodeNames names them); they wrap
// rlock.ErrNotObtained when no quorum was reached, while a context that ends
// is reported as the context's error, never as ErrNotObtained.
//
// # go-redis settings for RedLock nodes
//
// Acquisition never waits longer than the per-node wait, but each
// request's goroutine lives on until the go-redis client gives up, and
// Unlock (which runs to completion, like every rlock Unlock) waits for it.
// With go-redis defaults a frozen node holds a request for ReadTimeout (3
// s) times 1+MaxRetries (4), and a dead one costs DialerRetries (5) dials
// with backoff, about 1.7 s. For RedLock nodes use options such as
//
//	&redis.Options{
//		Addr:          addr,
//		DialTimeout:   200 * time.Millisecond,
//		ReadTimeout:   200 * time.Millisecond,
//		WriteTimeout:  200 * time.Millisecond,
//		MaxRetries:    1,
//		DialerRetries: 1,
//	}
//
// ContextTimeoutEnabled does not matter for lock scripts: an attempt is
// never cut off mid-flight by its context, because its outcome must be
// known to release a late grant.
//
// # Safety
//
// Redlock's guarantees are disputed, and Redisson deprecated its RedLock in
// favour of a single lock with replica synchronisation or fencing tokens.
// Use it knowing that: expiry is measured by each node's wall clock, so a
// clock jump shortens a lease; a node that restarts without persistence
// forgets the locks it granted (use AOF with fsync always, or keep a
// restarted node out for longer than the longest lease); a holder paused
// (GC, swap, VM migration) past its validity can act after another owner
// took the lock. Check Until before acting, stop work when Ctx is
// cancelled, and make the protected resource reject stale writers where it
// matters.
//
// # Reentrancy and owners
//
// The RedLock handle is the owner by default, and rlock.WithOwner carries an
// explicit one. Goroutines that share the handle exclude each other, as
// with a sync.Mutex. Re-locking a held, still valid RedLock with a ctx that
// descends from its Ctx counts one more hold without I/O; Unlock releases the nodes on the
// last one. Use one handle per owner: a second handle for the same owner
// does not know which nodes the first one holds.
package redlock
