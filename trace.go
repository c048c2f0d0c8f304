package rlock

import (
	"fmt"
	"time"

	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/renewal"
)

// Trace is a set of hooks that a client calls on its locks' events, for
// metrics and tracing (package extra/rlockotel turns them into
// OpenTelemetry metrics). Every field is optional: a nil field costs
// nothing. Give it to NewClient with WithTrace; several Traces may be
// given, and all are called, in the order given. New fields may be added
// to Trace and to the info structs in later versions.
//
// The hooks are called synchronously, on the goroutine of the event: a
// Lock call's, a release's, the watchdog's or a lease timer's, sometimes
// while the lock's internal state is locked. They must be fast, must not
// block, and must not call back into the lock or the client (Lock,
// Unlock, SetLease, Close...); a hook that needs to do so must hand the
// work to another goroutine. A hook may be called concurrently with
// itself.
type Trace struct {
	// AcquireDone is called when a Lock or TryLock call (of any lock kind,
	// or of a member of a MultiLock or RedLock) returns, whatever its
	// outcome. A call that fails its argument checks, or finds the client
	// closed or its ctx ended before it tries, is not reported.
	AcquireDone func(AcquireInfo)
	// Released is called when a holding period ends by its owner's last
	// release (see Lock.Done). A grant that a Lock call obtained after its
	// ctx ended, and so gave back at once, is reported too.
	Released func(ReleaseInfo)
	// Lost is called when a holding period ends by the loss of the
	// owner's holds (Err wraps ErrLockLost): whenever the lock's Done
	// channel closes with an error. Every loss is logged too (see
	// WithLogger), with or without this hook. Released and Lost are called
	// just before Done closes, so whoever waits on Done finds them called.
	Lost func(LossInfo)
	// Renewed is called after each of the watchdog's renewal rounds on
	// one Redis node, from the watchdog's goroutine.
	Renewed func(RenewInfo)
	// Waiting is called when a blocking Lock call starts waiting for a
	// release (Delta +1: after an attempt found the lock held, or when it
	// queues behind the client's other waiters) and when it stops
	// (Delta -1, before its AcquireDone).
	Waiting func(WaitInfo)
}

// LockInfo names the lock and the owner of an event.
type LockInfo struct {
	Name  string // the lock's name
	Kind  string // the lock kind: "reentrant", "fair", "read" or "write"
	Owner string // the owner's field in the lock hash ("<clientID>:<ownerID>", ":write" appended for a writer)
}

// Outcome is how a Lock or TryLock call ended.
type Outcome uint8

// The outcomes of a Lock or TryLock call.
const (
	// OutcomeAcquired: the owner holds the lock.
	OutcomeAcquired Outcome = iota
	// OutcomeNotObtained: another owner holds it (ErrNotObtained).
	OutcomeNotObtained
	// OutcomeCanceled: the call's ctx was cancelled or passed its deadline.
	OutcomeCanceled
	// OutcomeError: any other error (Redis unreachable, a loss found at a
	// re-entry, the client closed, ...).
	OutcomeError
)

// String returns "acquired", "not_obtained", "canceled" or "error".
func (o Outcome) String() string {
	switch o {
	case OutcomeAcquired:
		return "acquired"
	case OutcomeNotObtained:
		return "not_obtained"
	case OutcomeCanceled:
		return "canceled"
	case OutcomeError:
		return "error"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// AcquireInfo describes the end of one Lock or TryLock call.
type AcquireInfo struct {
	LockInfo
	Outcome Outcome
	// Waited reports whether the call waited for a release at least once
	// (a blocking Lock that found the lock held).
	Waited bool
	// Handoff reports whether the lock was granted on the attempt that a
	// release's wake-up started: handed from its last holder to this call.
	Handoff bool
	// Wait is the time from the call's start to its return.
	Wait time.Duration
	// Err is the call's error; nil when acquired.
	Err error
}

// ReleaseInfo describes a holding period ended by its owner's last release.
type ReleaseInfo struct {
	LockInfo
	// Held is the time from the grant that started the holding period to
	// its end.
	Held time.Duration
}

// LossInfo describes a holding period ended by the loss of its holds.
type LossInfo struct {
	LockInfo
	// Held is the time from the grant that started the holding period to
	// the moment the loss was noticed.
	Held time.Duration
	// Cause is a short stable string naming why:
	//   - "not_held_at_renewal": the watchdog found the holds gone (they
	//     expired, or were force-unlocked or deleted);
	//   - "renewal_failed": the watchdog lease ran out while renewals failed;
	//   - "renewal_late": the watchdog lease ran out before a renewal was answered;
	//   - "lease_expired": an explicit lease ran out;
	//   - "client_closed": the client was closed while the lock was held;
	//   - "not_held_at_unlock", "not_held_at_reentry", "not_held_at_set_lease":
	//     that call found the holds gone;
	//   - "not_held_after_lost_reply": checking after a call whose reply was
	//     lost found the holds gone;
	//   - "release_failed": the last release failed, so renewal stopped and
	//     the lease decides;
	//   - "unknown": none of these (not expected).
	Cause string
	// Err is the loss, as the lock's Err reports it (wrapping ErrLockLost).
	Err error
}

// RenewInfo describes one watchdog renewal round on one Redis node.
type RenewInfo struct {
	Node    string        // the node's address (or its client's name)
	Locks   int           // how many locks the round renewed: its batch size
	Renewed int           // of them, renewed
	NotHeld int           // of them, found no longer held (each then reported by Lost)
	Failed  int           // of them, whose renewal failed (retried until their lease runs out)
	Latency time.Duration // from the round's first request sent to its last reply
	Err     error         // why the failed ones failed; nil if none did
}

// WaitInfo describes a change in the number of blocking Lock calls that
// wait for a release.
type WaitInfo struct {
	LockInfo
	Delta int // +1: a Lock call starts waiting; -1: it stops
}

// WithTrace adds t's hooks to the client (see Trace). Several may be
// given; all are called, in the order given. A nil t is ErrInvalidArgument.
func WithTrace(t *Trace) ClientOption {
	return func(c *clientConfig) error {
		if t == nil {
			return fmt.Errorf("%w: nil trace", ErrInvalidArgument)
		}
		c.Hooks = append(c.Hooks, t.hooks())
		if f := t.Renewed; f != nil {
			c.Watchdog = append(c.Watchdog, renewal.WithRoundHook(func(r renewal.Round) {
				f(RenewInfo{Node: r.Node, Locks: r.Locks, Renewed: r.Renewed, NotHeld: r.NotHeld,
					Failed: r.Failed, Latency: r.Latency, Err: r.Err})
			}))
		}
		return nil
	}
}

// hooks converts t's lock hooks to the engine's, leaving nil those t
// leaves nil.
func (t *Trace) hooks() core.Hooks {
	var h core.Hooks
	if f := t.AcquireDone; f != nil {
		h.AcquireDone = func(e core.AcquireEvent) {
			f(AcquireInfo{LockInfo: LockInfo(e.Lock), Outcome: Outcome(e.Outcome), Waited: e.Waited,
				Handoff: e.Handoff, Wait: e.Wait, Err: e.Err})
		}
	}
	if f := t.Released; f != nil {
		h.Released = func(e core.HoldEvent) { f(ReleaseInfo{LockInfo: LockInfo(e.Lock), Held: e.Held}) }
	}
	if f := t.Lost; f != nil {
		h.Lost = func(e core.HoldEvent) {
			f(LossInfo{LockInfo: LockInfo(e.Lock), Held: e.Held, Cause: e.Cause, Err: e.Err})
		}
	}
	if f := t.Waiting; f != nil {
		h.Waiting = func(e core.WaitEvent) { f(WaitInfo{LockInfo: LockInfo(e.Lock), Delta: e.Delta}) }
	}
	return h
}
