package core

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/watchdog"
)

// holdKey names one owner's holds on one lock.
type holdKey struct{ name, field string }

// hold is the client's view of one owner's holds on one lock. Its mutex
// serialises that owner's operations on that lock, which is what lets the
// scripts recognise a re-sent request by comparing the stored hold count
// with the count sent (see scripts/lock.lua).
type hold struct {
	key  holdKey
	refs int // goroutines using it; guarded by Client.mu

	mu    sync.Mutex    // serialises operations; guards the fields below
	count int64         // the owner's holds, as of the last reply
	lease time.Duration // TTL restored by a release that leaves holds
	watch *watchdog.Lease
	ep    atomic.Pointer[epoch] // the current holding period

	waiting atomic.Int32 // fair lock: the owner's Lock calls waiting in the queue
}

type watchdogLease = watchdog.Lease

// epoch is one holding period: from free to held until released or lost.
type epoch struct {
	done  chan struct{}
	once  sync.Once
	err   error // written before done is closed
	token int64 // fencing token, 0 without fencing
}

func newEpoch(token int64) *epoch { return &epoch{done: make(chan struct{}), token: token} }

// end closes the epoch, with err nil for a release or the loss otherwise.
// Only the first call has an effect.
func (e *epoch) end(err error) {
	e.once.Do(func() {
		e.err = err
		close(e.done)
	})
}

func (e *epoch) ended() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// holdFor returns the hold of (name, field), creating it, and counts the
// caller as a user until it calls c.putHold.
func (c *Client) holdFor(name, field string) *hold {
	k := holdKey{name, field}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holds[k]
	if h == nil {
		h = &hold{key: k}
		c.holds[k] = h
	}
	h.refs++
	return h
}

// retain counts one more user of h, which the caller already uses.
func (c *Client) retain(h *hold) {
	c.mu.Lock()
	h.refs++
	c.mu.Unlock()
}

// putHold ends the caller's use of h and forgets h once nobody uses it and
// the owner holds nothing (or its holding period ended in loss).
func (c *Client) putHold(h *hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.refs--
	// With refs at 0 nobody can be inside h.mu, and every write to h made
	// under h.mu happened before the writer's putHold.
	if h.refs == 0 && (h.count == 0 || h.ended()) && c.holds[h.key] == h {
		delete(c.holds, h.key)
	}
}

// holding reports whether the owner held the lock as of the last reply.
func (h *hold) holding() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count > 0
}

// ended reports whether the current holding period has ended (by loss).
func (h *hold) ended() bool {
	ep := h.ep.Load()
	return ep != nil && ep.ended()
}

// lost is the watchdog's report for ep: end the holding period and forget
// the hold if nobody is using it.
func (c *Client) lost(h *hold, ep *epoch, err error) {
	ep.end(err)
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.refs == 0 && h.ep.Load() == ep && c.holds[h.key] == h {
		delete(c.holds, h.key)
	}
}
