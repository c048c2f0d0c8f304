package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/internal/renewal"
)

// holding is one holding period of one owner: from the grant that takes
// the owner from no holds to some, until its last release or the loss of
// its holds. Its ctx is the holding itself: cancelled when the holding
// ends, with a cause wrapping ErrLockLost on loss and context.Canceled
// (cancel(nil)) on release; nothing else records that it ended or why.
type holding struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	marked markedCtx // ctx marked with the handle's gate (see began)
	token  int64     // fencing token, 0 without fencing

	// lock and owner name the holding for its end's report (see began);
	// start is when it began, when anything reports its end.
	lock  *Lock
	owner string
	start time.Time

	// watch is the watchdog's registration while the watchdog renews the
	// holding, for Until.
	watch atomic.Pointer[renewal.Lease]

	// until is when an explicit lease has certainly run out (unix ns);
	// 0 in watchdog mode.
	until atomic.Int64

	mu        sync.Mutex  // guards the fields below, and orders the ends
	expiry    *time.Timer // fires at until
	releasing bool        // a release of the owner is in flight
	deferred  error       // a loss reported while releasing
}

func newHolding(token int64) *holding {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &holding{ctx: ctx, cancel: cancel, token: token}
}

// done is closed when the holding ends.
func (hp *holding) done() <-chan struct{} { return hp.ctx.Done() }

// ended reports whether the holding has ended.
func (hp *holding) ended() bool { return hp.ctx.Err() != nil }

// err returns why the holding ended: the loss, or nil while it lasts or
// after a release. Once what protects it (knownUntil) has passed, it is
// lost: err says so at once, while the timer that ends it (Done, Ctx) may
// still be on its way.
func (hp *holding) err() error {
	switch cause := context.Cause(hp.ctx); cause {
	case context.Canceled: // cancel(nil) sets exactly context.Canceled
		return nil
	case nil:
		return hp.overdue(time.Now().UnixNano())
	default:
		return cause
	}
}

// overdue returns the loss of a holding that has not ended yet if what
// protects it has passed at now (unix ns), or nil.
func (hp *holding) overdue(now int64) error {
	if u := hp.until.Load(); u != 0 {
		if now < u {
			return nil
		}
		name := ""
		if hp.lock != nil {
			name = hp.lock.name
		}
		return leaseRanOut(name)
	}
	if w := hp.watch.Load(); w != nil && now >= w.Until().UnixNano() {
		return w.RanOut()
	}
	return nil
}

// knownUntil returns the time up to which the holding is known to last:
// the end of an explicit lease, or the watchdog lease counted from the
// last renewal sent that succeeded; the zero time once it ended.
func (hp *holding) knownUntil() time.Time {
	switch {
	case hp.ended():
		return time.Time{}
	case hp.until.Load() != 0:
		return time.Unix(0, hp.until.Load())
	}
	if w := hp.watch.Load(); w != nil {
		return w.Until()
	}
	return time.Time{}
}

// end ends the holding, with err nil for a release or the loss otherwise.
// Only the first call has an effect.
func (hp *holding) end(err error) {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	hp.endLocked(err)
}

func (hp *holding) endLocked(err error) {
	if hp.ended() {
		return
	}
	if hp.expiry != nil {
		hp.expiry.Stop()
	}
	hp.report(err) // before Done closes: whoever waits on it sees the event reported
	hp.cancel(err) // nil: context.Canceled
}

// lose is a loss found by the watchdog or the lease's end. While a release
// of the owner is in flight, the loss may be that release's own doing (a
// renewal that ran after it), so it waits for the release's outcome.
func (hp *holding) lose(err error) {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if hp.releasing {
		if hp.deferred == nil {
			hp.deferred = err
		}
		return
	}
	hp.endLocked(err)
}

// releaseStarted marks a release in flight; releaseDone ends it, applying
// a loss reported meanwhile unless the release ended the holding itself.
func (hp *holding) releaseStarted() {
	hp.mu.Lock()
	hp.releasing = true
	hp.mu.Unlock()
}

func (hp *holding) releaseDone() {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	hp.releasing = false
	if hp.deferred != nil {
		hp.endLocked(hp.deferred)
	}
}

// expireAt arranges for the holding to end as lost at t, the end of an
// explicit lease, unless a later call moves t on. The owner's semaphore
// must be held.
func (hp *holding) expireAt(t time.Time, lost func()) {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if hp.loseIfOverdue() {
		return
	}
	hp.until.Store(t.UnixNano())
	switch {
	case hp.ended():
	case hp.expiry == nil:
		hp.expiry = time.AfterFunc(time.Until(t), lost)
	default:
		hp.expiry.Reset(time.Until(t))
	}
}

// loseIfOverdue ends the holding as lost if what protects it has passed
// already (err has said so, or may have): a later call that finds the
// holds on the server must not take back a loss once reported, so Err
// never goes from non-nil back to nil. It reports whether the holding is
// over. hp.mu must be held.
func (hp *holding) loseIfOverdue() bool {
	if hp.ended() {
		return true
	}
	err := hp.overdue(time.Now().UnixNano())
	if err == nil {
		return false
	}
	if hp.releasing {
		if hp.deferred == nil {
			hp.deferred = err
		}
		return true
	}
	hp.endLocked(err)
	return true
}

// keepAlive stops the lease's end from ending the holding: the watchdog
// protects it now. The owner's semaphore must be held.
func (hp *holding) keepAlive() {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if hp.loseIfOverdue() {
		return
	}
	hp.until.Store(0)
	if hp.expiry != nil {
		hp.expiry.Stop()
	}
}
