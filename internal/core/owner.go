package core

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/internal/renewal"
)

// ownerKey names one owner on one lock: the lock's name and the owner's
// field in the lock hash.
type ownerKey struct{ name, field string }

// ownerState is the client's bookkeeping of one owner on one lock: its
// hold count, what protects its holds (watchdog or lease), and its current
// holding. Its semaphore serialises that owner's operations on that lock,
// which is what lets the scripts recognise a re-sent request by comparing
// the stored hold count with the count sent (see scripts/holds.lua).
// Taking it watches the caller's ctx, so no call waits past its ctx behind
// another.
type ownerState struct {
	key  ownerKey
	refs int // goroutines using it; guarded by Client.mu

	sem chan struct{} // held by the operation in progress; guards the fields below

	// count is the owner's holds as the owner is entitled to them: the
	// server's count as of the last reply, or, after a call whose outcome
	// is unknown (unsure), the count that call meant to leave.
	count  int64
	unsure bool
	// unsureUntil is when the unknown outcomes can no longer matter (see
	// Lock.markUnsure); settler: a background settle runs (see settleSoon).
	unsureUntil time.Time
	settler     atomic.Bool
	settling    bool          // settleNow is running
	resend      bool          // unsure after an acquire that its Lock call sends again
	lease       time.Duration // TTL restored by a release that leaves holds
	watch       *renewal.Lease

	held    atomic.Bool             // count > 0, readable without sem
	holding atomic.Pointer[holding] // the current (or last) holding
	waiting atomic.Int32            // the owner's Lock calls waiting (see Lock.wait)

	// home is the handle whose own owner this is (nil for an explicit
	// owner): once forgotten, the state waits in home.spare for that
	// owner's next call (see Client.owner). Set at creation.
	home *Lock
}

// acquire takes o's semaphore, or returns ctx's error if ctx ends first.
func (o *ownerState) acquire(ctx context.Context) error {
	select {
	case o.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case o.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives o's semaphore back.
func (o *ownerState) release() { <-o.sem }

// setCount records the owner's hold count. o.sem must be held.
func (o *ownerState) setCount(n int64) {
	o.count = n
	o.held.Store(n > 0)
}

// ended reports whether the owner's current holding has ended (by loss).
func (o *ownerState) ended() bool {
	hp := o.holding.Load()
	return hp != nil && hp.ended()
}

// stopRenewal stops the watchdog for o and ends its holding with err (nil
// for a release). o's semaphore must be held.
func (o *ownerState) stopRenewal(err error) {
	if o.watch != nil {
		o.watch.Stop()
		o.watch = nil
	}
	if hp := o.holding.Load(); hp != nil {
		hp.end(err)
	}
}

// owner returns the state of the owner field on the lock name, creating
// it, and counts the caller as a user until it calls c.putOwner. home is
// the handle whose own owner field is field, or nil: its owner's state,
// forgotten after each holding, is kept by the handle and taken up again
// (see home.spare), which spares an uncontended lock+unlock two
// allocations.
func (c *Client) owner(home *Lock, name, field string) *ownerState {
	k := ownerKey{name, field}
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.owners[k]
	if o == nil {
		if home != nil && home.spare != nil {
			o, home.spare = home.spare, nil
			o.reset()
		} else {
			o = &ownerState{key: k, sem: make(chan struct{}, 1), home: home}
		}
		c.owners[k] = o
	}
	o.refs++
	return o
}

// reset makes a forgotten state (see forgetLocked) what a new one would
// be: nobody uses it (its semaphore is free, no settle runs) and it
// leaves nothing to settle. Whatever still refers to it from an earlier
// holding (a watchdog registration's or a lease timer's report of loss)
// acts on that holding, which is no longer the state's (see
// forgetLostLocked). c.mu must be held.
func (o *ownerState) reset() {
	o.count, o.unsure, o.unsureUntil = 0, false, time.Time{}
	o.settling, o.resend, o.lease, o.watch = false, false, 0, nil
	o.held.Store(false)
	o.holding.Store(nil)
}

// retain counts one more user of o, which the caller already uses.
func (c *Client) retain(o *ownerState) {
	c.mu.Lock()
	o.refs++
	c.mu.Unlock()
}

// putOwner ends the caller's use of o and forgets o once nobody uses it,
// nothing is left to settle, and the owner holds nothing (or its holding
// ended: lost, or its lease ran out).
func (c *Client) putOwner(o *ownerState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o.refs--
	c.forgetLocked(o)
}

// forgetLocked forgets o if it is unused and keeps nothing worth keeping.
// c.mu must be held. With refs at 0 nobody holds o's semaphore, and every
// write made under it happened before the writer's putOwner.
func (c *Client) forgetLocked(o *ownerState) {
	if o.refs == 0 && !o.unsure && (o.count == 0 || o.ended()) && c.owners[o.key] == o {
		delete(c.owners, o.key)
		if o.home != nil && !o.settler.Load() && o.waiting.Load() == 0 {
			o.home.spare = o
		}
	}
}

// lost is the watchdog's or the lease's report for hp: end the holding and
// forget o if nobody is using it.
//
// Many losses come at once (the timers of holdings that ran out together):
// each would wait its turn for c.mu, and a mutex that many goroutines
// queue for hands itself over one by one, starving the losses not yet
// reported. So a loss queues o (lock-free) and one goroutine at a time
// forgets the queued owners under c.mu.
func (c *Client) lost(o *ownerState, hp *holding, err error) {
	hp.lose(err)
	e := &lostEntry{o: o, hp: hp}
	for {
		e.next = c.lostQ.Load()
		if c.lostQ.CompareAndSwap(e.next, e) {
			break
		}
	}
	for c.lostQ.Load() != nil && c.draining.CompareAndSwap(false, true) {
		c.mu.Lock()
		c.forgetLostLocked()
		c.mu.Unlock()
		c.draining.Store(false)
	}
}

// lostEntry is a queued owner to forget (see lost).
type lostEntry struct {
	o    *ownerState
	hp   *holding
	next *lostEntry
}

// forgetLostLocked forgets the owners queued by lost; c.mu must be held.
func (c *Client) forgetLostLocked() {
	for e := c.lostQ.Swap(nil); e != nil; e = e.next {
		if e.o.holding.Load() == e.hp {
			c.forgetLocked(e.o)
		}
	}
}

// Records returns how many owners the client behind v (a *rlock.Client)
// keeps records of, for tests of its memory use.
func Records(v any) int {
	c, ok := Of(v)
	if !ok {
		return -1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLostLocked()
	return len(c.owners)
}
