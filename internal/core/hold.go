package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/internal/renewal"
)

// holdKey names one owner's holds on one lock.
type holdKey struct{ name, field string }

// hold is the client's view of one owner's holds on one lock. Its
// semaphore serialises that owner's operations on that lock, which is what
// lets the scripts recognise a re-sent request by comparing the stored hold
// count with the count sent (see scripts/holds.lua). Taking it watches the
// caller's ctx, so no call waits past its ctx behind another.
type hold struct {
	key  holdKey
	refs int // goroutines using it; guarded by Client.mu

	sem chan struct{} // held by the operation in progress; guards the fields below

	// count is the owner's holds as the owner is entitled to them: the
	// server's count as of the last reply, or, after a call whose outcome
	// is unknown (unsure), the count that call meant to leave.
	count    int64
	unsure   bool
	settling bool          // settleNow is running
	resend   bool          // unsure after an acquire that its Lock call sends again
	lease    time.Duration // TTL restored by a release that leaves holds
	watch    *renewal.Lease

	held    atomic.Bool           // count > 0, readable without sem
	ep      atomic.Pointer[epoch] // the current holding period
	waiting atomic.Int32          // fair lock: the owner's Lock calls waiting in the queue
}

type watchdogLease = renewal.Lease

// acquire takes h's semaphore, or returns ctx's error if ctx ends first.
func (h *hold) acquire(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives h's semaphore back.
func (h *hold) release() { <-h.sem }

// setCount records the owner's hold count. h.sem must be held.
func (h *hold) setCount(n int64) {
	h.count = n
	h.held.Store(n > 0)
}

// epoch is one holding period: from free to held until released or lost.
type epoch struct {
	// ctx is cancelled when the holding period ends: with a cause wrapping
	// ErrLockLost on loss, with context.Canceled on release.
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   <-chan struct{} // ctx.Done()
	token  int64           // fencing token, 0 without fencing

	// watch is the watchdog's registration while the watchdog renews the
	// holding, for Until.
	watch atomic.Pointer[renewal.Lease]

	// until is when an explicit lease has certainly run out (unix ns);
	// 0 in watchdog mode.
	until atomic.Int64

	mu        sync.Mutex
	expiry    *time.Timer // fires at until
	closed    bool
	err       error // set before done is closed
	releasing bool  // a release of the owner is in flight
	deferred  error // a loss reported while releasing
}

func newEpoch(token int64) *epoch {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &epoch{ctx: ctx, cancel: cancel, done: ctx.Done(), token: token}
}

// knownUntil returns the time up to which the holding is known to last:
// the end of an explicit lease, or the watchdog lease counted from the
// last renewal sent that succeeded; the zero time once it ended.
func (e *epoch) knownUntil() time.Time {
	switch {
	case e.ended():
		return time.Time{}
	case e.until.Load() != 0:
		return time.Unix(0, e.until.Load())
	}
	if w := e.watch.Load(); w != nil {
		return w.Until()
	}
	return time.Time{}
}

// end closes the epoch, with err nil for a release or the loss otherwise.
// Only the first call has an effect.
func (e *epoch) end(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.endLocked(err)
}

func (e *epoch) endLocked(err error) {
	if e.closed {
		return
	}
	e.closed = true
	e.err = err
	if e.expiry != nil {
		e.expiry.Stop()
	}
	e.cancel(err) // nil: context.Canceled
}

// lose is a loss found by the watchdog or the lease's end. While a release
// of the owner is in flight, the loss may be that release's own doing (a
// renewal that ran after it), so it waits for the release's outcome.
func (e *epoch) lose(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.releasing {
		if e.deferred == nil {
			e.deferred = err
		}
		return
	}
	e.endLocked(err)
}

// releaseStarted marks a release in flight; releaseDone ends it, applying
// a loss reported meanwhile unless the release ended the epoch itself.
func (e *epoch) releaseStarted() {
	e.mu.Lock()
	e.releasing = true
	e.mu.Unlock()
}

func (e *epoch) releaseDone() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.releasing = false
	if e.deferred != nil {
		e.endLocked(e.deferred)
	}
}

func (e *epoch) ended() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// error returns why the epoch ended, nil while it lasts or after a release.
func (e *epoch) error() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// expireAt arranges for the epoch to end as lost at t, the end of an
// explicit lease, unless a later call moves t on. The hold's semaphore
// must be held.
func (e *epoch) expireAt(t time.Time, lost func()) {
	e.until.Store(t.UnixNano())
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
	case e.expiry == nil:
		e.expiry = time.AfterFunc(time.Until(t), lost)
	default:
		e.expiry.Reset(time.Until(t))
	}
}

// keepAlive stops the lease's end from ending the epoch: the watchdog
// protects the holding now. The hold's semaphore must be held.
func (e *epoch) keepAlive() {
	e.until.Store(0)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.expiry != nil {
		e.expiry.Stop()
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
		h = &hold{key: k, sem: make(chan struct{}, 1)}
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

// putHold ends the caller's use of h and forgets h once nobody uses it,
// nothing is left to settle, and the owner holds nothing (or its holding
// period ended: lost, or its lease ran out).
func (c *Client) putHold(h *hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.refs--
	c.forgetLocked(h)
}

// forgetLocked forgets h if it is unused and keeps nothing worth keeping.
// c.mu must be held. With refs at 0 nobody holds h's semaphore, and every
// write made under it happened before the writer's putHold.
func (c *Client) forgetLocked(h *hold) {
	if h.refs == 0 && !h.unsure && (h.count == 0 || h.ended()) && c.holds[h.key] == h {
		delete(c.holds, h.key)
	}
}

// ended reports whether the current holding period has ended (by loss).
func (h *hold) ended() bool {
	ep := h.ep.Load()
	return ep != nil && ep.ended()
}

// lost is the watchdog's or the lease's report for ep: end the holding
// period and forget the hold if nobody is using it.
func (c *Client) lost(h *hold, ep *epoch, err error) {
	ep.lose(err)
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.ep.Load() == ep {
		c.forgetLocked(h)
	}
}

// Records returns how many owners' holds the client behind v (a
// *reentrant.Client) keeps records of, for tests of its memory use.
func Records(v any) int {
	c, ok := Of(v)
	if !ok {
		return -1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.holds)
}
