// Package history records what lock clients did and checks it: a
// linearizability check against an owner-aware reentrant mutex (with the
// porcupine checker), a "no two believers at once" check of critical
// sections, and a FIFO grant-order check for fair locks.
//
// # Recording
//
// A Recorder stamps every call with a monotonic call and return time (one
// clock for the whole test process) and classifies its result: OK, a
// definite refusal (ErrNotObtained from a try, ErrNotHeld from an unlock), or
// Unknown — any other error (a timeout, a reset connection, a lost reply):
// the command may or may not have run, and may even run after the call
// returned. The caller's next call is a new call, not a re-send of the
// failed one, so each attempt is recorded as it is. A careful caller then
// reads its hold count (a Count op), which pins down what the failed call
// did, and goes on from there: it calls again only if the call did not
// take effect, or makes another call. This is how exact hold counts are
// checked, and how a library that mistakes the next call for a re-send of
// the failed one is caught. Observations that are not calls are recorded
// too: the holder being told its lock was lost (Lost), the moment a hold
// may start to lapse without any unlock (Lapse: a killed holder, a frozen
// server), and a server losing its data (Wipe: redis-server killed and
// restarted without persistence).
//
// # The mutex model
//
// The state is (holder, count). Lock or TryLock by owner o succeeds only
// when the lock is free or o holds it (count+1); TryLock's refusal is legal
// only when another owner holds it; Unlock by o succeeds only when o holds
// it (count-1, free at 0); its ErrNotHeld is legal only when o does not hold
// it. An Unknown call may or may not have taken effect, at any moment after
// it was made until a grace period after it returned (CheckLinearizable's
// grace; unbounded if asked), so the model offers both next states. A Lapse of o frees the lock if o holds it, or changes
// nothing, at one moment within its interval (which may be unbounded). A Wipe frees the lock at one
// moment within its interval. A ForceUnlock frees the lock; its reply (1:
// it deleted a lock) is legal only if the lock was held. A Count read of
// an owner's hold count is legal only if it matches the state: this is
// what pins down an Unknown call that the caller did not repeat but
// followed with a different one (an unlock whose reply was lost, then
// another unlock).
//
// # What the model does not claim
//
// A Redis lock is a lease, not a linearizable mutex: a holder that is paused
// past its lease loses the lock without calling Unlock, and nothing in the
// call history says when. The mutex model is therefore checked only where
// expiry cannot happen silently: leases long enough (watchdog mode) that no
// hold expires during the run, except where the test records the cause as a
// Lapse or Wipe. Where expiry is the point of the fault (a frozen server),
// the weaker property from the issue is checked instead with
// CheckExclusive: no two owners believe they hold the lock at the same time,
// where an owner's belief ends when it starts to unlock or when it is told
// the lock was lost (its Done channel closed, or an unlock answered
// ErrNotHeld).
//
// Lapse ops are a deliberate weakening: within its interval the checker
// cannot tell a legitimate hold of o vanishing from the lapse it recorded.
// Each Lapse is therefore recorded only for a concrete cause in the test,
// with the tightest interval the cause allows (a freeze: from the freeze to
// the resume, since every lease is shorter than the freeze). Unbounded
// intervals also make the check exponential in their number.
package history
