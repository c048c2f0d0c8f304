package semaphore

import (
	"context"
	"sync"
	"time"

	"github.com/rlock-go/rlock/internal/lua"
)

// The expiry watch (see scripts/exp_common.lua): a refused waiting
// acquire of an Expirable may be told that its client watches the
// nearest expiry of a held permit. The client then runs one watcher per
// semaphore, which at that expiry reclaims the expired permits and
// designates waiters for them (ExpWatch), and goes on to the next expiry
// while rlock clients wait; the waiters themselves sleep until a message
// or their poll. So a lease that passes wakes about as many waiters as
// it frees permits, across all clients, rather than every waiter of
// every client at once.

// watcher is a running watch of one semaphore by one client.
type watcher struct {
	mu    sync.Mutex
	at    time.Time     // the expiry to reclaim at
	later time.Time     // a later expiry claimed meanwhile (zero: none)
	kick  chan struct{} // at moved earlier
	ended bool          // it ended; a new one must start
}

var watchers sync.Map // handleKey -> *watcher

// watching starts this client's watcher of the semaphore, or moves it to
// an earlier expiry, when a refused attempt says the client watches
// r.next.
func (e *Expirable) watching(r attemptReply) {
	if !r.watch || r.next.IsZero() {
		return
	}
	key := e.s.key()
	for {
		v, loaded := watchers.LoadOrStore(key, &watcher{at: r.next, kick: make(chan struct{}, 1)})
		w := v.(*watcher)
		if !loaded {
			if !e.s.c.Background(func() { e.watch(key, w) }) {
				w.mu.Lock()
				w.ended = true
				watchers.CompareAndDelete(key, w)
				w.mu.Unlock()
			}
			return
		}
		w.mu.Lock()
		if w.ended {
			w.mu.Unlock()
			continue // it was leaving the map: start a new one
		}
		if r.next.Before(w.at) {
			w.at = r.next
			select {
			case w.kick <- struct{}{}:
			default:
			}
		} else if r.next.After(w.at) && (w.later.IsZero() || r.next.Before(w.later)) {
			w.later = r.next // watched after at, even if at's call ends the watch
		}
		w.mu.Unlock()
		return
	}
}

// watch runs watcher w: at each expiry it reclaims and designates, until
// the script says this client watches no more or the client closes. A
// call that fails (its outcome unknown: it may have moved the watch to
// the next expiry, which the lost reply named) is tried again, the script
// being safe to run twice, at growing intervals (watchRetry) for as long
// as the watch's key would outlive the expiry (the registration life);
// then the key lapses and the waiters' polls reclaim.
func (e *Expirable) watch(key handleKey, w *watcher) {
	// endLocked takes w out of the map; w.mu must be held, so that no
	// refusal moves an ended watcher's expiry unseen.
	endLocked := func() {
		w.ended = true
		watchers.CompareAndDelete(key, w)
	}
	life := e.s.c.Life()
	var failing time.Time // when the calls began to fail; zero while they succeed
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		w.mu.Lock()
		at := w.at
		w.mu.Unlock()
		timer.Reset(max(time.Until(at)+time.Millisecond, time.Millisecond))
		select {
		case <-life.Done():
			w.mu.Lock()
			endLocked()
			w.mu.Unlock()
			return
		case <-w.kick:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			continue
		case <-timer.C:
		}
		next, err := e.watchOnce(life)
		// The next expiry: the script's, or one claimed since (a refusal
		// or a grant of this client), the earliest.
		w.mu.Lock()
		var to time.Time
		consider := func(t time.Time) {
			if !t.IsZero() && (to.IsZero() || t.Before(to)) {
				to = t
			}
		}
		switch {
		case err == nil:
			failing = time.Time{}
			if next > 0 {
				consider(time.UnixMilli(next))
			}
		case life.Err() == nil:
			now := time.Now()
			if failing.IsZero() {
				failing = now
			}
			if now.Sub(failing) < e.s.live() {
				consider(now.Add(watchRetry(now.Sub(failing))))
			}
		}
		consider(w.later)
		if !w.at.Equal(at) {
			consider(w.at)
		}
		w.later = time.Time{}
		if to.IsZero() {
			endLocked()
			w.mu.Unlock()
			return
		}
		w.at = to
		w.mu.Unlock()
	}
}

// watchRetry is how long a watcher whose calls have failed for d waits
// before it tries again: 50 ms, growing with d, at most 2 s.
func watchRetry(d time.Duration) time.Duration {
	return min(max(d/2, 50*time.Millisecond), 2*time.Second)
}

// watchOnce runs the watch's script once (see exp_watch.lua) and returns
// the next expiry to watch in epoch ms, or -1.
func (e *Expirable) watchOnce(life context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(life, 5*time.Second)
	defer cancel()
	return e.s.c.Run(ctx, lua.ExpWatch, []string{e.s.name, e.timeout, e.s.channel, e.s.waiters, e.watchKey},
		time.Now().UnixMilli(), e.s.c.PublishArg(ctx), e.s.desig, e.s.live().Milliseconds(), NoLeaseScore).Int64()
}
