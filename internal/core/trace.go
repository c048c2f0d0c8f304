package core

import (
	"context"
	"errors"
	"time"

	"github.com/rlock-go/rlock/internal/base"
)

// Hooks are callbacks for the engine's events; a nil field is skipped.
// Package rlock's Trace documents them: they run synchronously on the
// goroutine of the event, so they must be fast and must not call the lock.
type Hooks struct {
	AcquireDone func(AcquireEvent)
	Released    func(HoldEvent)
	Lost        func(HoldEvent)
	Waiting     func(WaitEvent)
}

// LockRef names the lock and owner of an event.
type LockRef struct {
	Name  string // the lock's name
	Kind  string // "reentrant", "fair", "read" or "write"
	Owner string // the owner's field in the lock hash
}

// Outcome is how a Lock or TryLock call ended.
type Outcome uint8

// The outcomes of a Lock or TryLock call.
const (
	OutcomeAcquired    Outcome = iota // the owner holds the lock
	OutcomeNotObtained                // TryLock: held by another owner
	OutcomeCanceled                   // ctx ended (cancelled or past its deadline)
	OutcomeError                      // any other error (Redis, a loss found at re-entry, the client closed)
)

// AcquireEvent is the end of one Lock or TryLock call.
type AcquireEvent struct {
	Lock    LockRef
	Outcome Outcome
	Waited  bool          // the call waited for a release at least once
	Handoff bool          // granted on the attempt that a release's wake-up started
	Wait    time.Duration // from the call's start to its end
	Err     error
}

// HoldEvent is the end of a holding: by the owner's last release (Cause
// "", Err nil) or by loss.
type HoldEvent struct {
	Lock  LockRef
	Held  time.Duration // from the grant that started the holding to its end
	Cause string        // a base.Loss constant; "" for a release
	Err   error         // the loss
}

// WaitEvent is a change in the number of waiting Lock calls.
type WaitEvent struct {
	Lock  LockRef
	Delta int // +1: a Lock call starts waiting; -1: it stops
}

// events are a client's hooks, by event.
type events struct {
	acquire  []func(AcquireEvent)
	released []func(HoldEvent)
	lost     []func(HoldEvent)
	waiting  []func(WaitEvent)
}

func newEvents(hs []Hooks) events {
	var e events
	for _, h := range hs {
		if h.AcquireDone != nil {
			e.acquire = append(e.acquire, h.AcquireDone)
		}
		if h.Released != nil {
			e.released = append(e.released, h.Released)
		}
		if h.Lost != nil {
			e.lost = append(e.lost, h.Lost)
		}
		if h.Waiting != nil {
			e.waiting = append(e.waiting, h.Waiting)
		}
	}
	return e
}

// now is the start of a Lock call: the time when anything reports
// acquisitions, else the zero time (not read).
func (e *events) now() time.Time {
	if len(e.acquire) == 0 {
		return time.Time{}
	}
	return time.Now()
}

// kindName names a lock kind for events and logs.
func kindName(k kind) string {
	switch k.(type) {
	case *fairKind:
		return "fair"
	case *readKind:
		return "read"
	case *writeKind:
		return "write"
	}
	return "reentrant"
}

func (l *Lock) ref(owner string) LockRef {
	return LockRef{Name: l.name, Kind: kindName(l.kind), Owner: owner}
}

// acquireDone reports the end of a Lock or TryLock call of o's owner that
// started at start: err is its result; waited, whether it waited for a
// release; woken, whether its last attempt followed a wake-up.
func (l *Lock) acquireDone(o *ownerState, start time.Time, waited, woken bool, err error) {
	if len(l.c.ev.acquire) == 0 {
		return
	}
	e := AcquireEvent{Lock: l.ref(o.key.field), Outcome: outcomeOf(err), Waited: waited,
		Handoff: woken && err == nil, Wait: time.Since(start), Err: err}
	for _, f := range l.c.ev.acquire {
		f(e)
	}
}

func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeAcquired
	case errors.Is(err, base.ErrNotObtained):
		return OutcomeNotObtained
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	}
	return OutcomeError
}

// startWaiting marks the call as waiting for a release, and reports it.
func (ws *waitState) startWaiting() {
	ws.waited = true
	ws.l.waitingBy(ws.o, 1)
}

// stopWaiting reports that the call no longer waits.
func (ws *waitState) stopWaiting() { ws.l.waitingBy(ws.o, -1) }

func (l *Lock) waitingBy(o *ownerState, delta int) {
	if len(l.c.ev.waiting) == 0 {
		return
	}
	e := WaitEvent{Lock: l.ref(o.key.field), Delta: delta}
	for _, f := range l.c.ev.waiting {
		f(e)
	}
}

// began records which lock and owner hp is a holding of, and when it
// started when anything reports its end.
func (hp *holding) began(l *Lock, o *ownerState) {
	hp.lock, hp.owner = l, o.key.field
	if o.key.field == l.ownKind {
		// A Lock with it re-enters (see Gate). The mark lives in hp:
		// no allocation of its own.
		hp.marked = markedCtx{Context: hp.ctx, g: l.gate}
		hp.ctx = &hp.marked
	}
	if len(l.c.ev.released)+len(l.c.ev.lost) > 0 {
		hp.start = time.Now()
	}
}

// report logs a holding's loss and reports its end (err nil: released).
// It runs once per holding, under hp.mu.
func (hp *holding) report(err error) {
	l := hp.lock
	if l == nil {
		return
	}
	e := HoldEvent{Lock: LockRef{Name: l.name, Owner: hp.owner}, Err: err}
	hooks := l.c.ev.released
	if err != nil {
		e.Cause = base.LossCause(err)
		hooks = l.c.ev.lost
		l.c.logger().Warn("rlock: lock lost", "lock", l.name, "owner", hp.owner, "cause", e.Cause, "err", err)
	}
	if len(hooks) == 0 {
		return
	}
	e.Lock.Kind, e.Held = kindName(l.kind), time.Since(hp.start)
	for _, f := range hooks {
		f(e)
	}
}
