package faults

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/reentrant"
)

// closeBound is how soon after the release a live waiter must hold the
// lock when clients closed meanwhile were the release's designees. Its
// own poll is the TTL its last attempt saw, about 30 s (the holder's
// default watchdog lease): a waiter granted within 5 s was woken, it did
// not wait for its poll.
const closeBound = 5 * time.Second

// TestFaultCloseDuringWaits: two clients wait for a lock held elsewhere
// (so they are the two least recently registered, the ones a release
// designates), one of them also holds a lock of its own; both are closed.
// Then a live client waits, and the holder releases. Under the
// holder-vs-server check throughout:
//   - the closed clients' waiting Lock calls return ErrClosed, and their
//     holding reports the loss (Err wraps ErrLockLost and ErrClosed, Done
//     closed), while its key on the server runs out within its lease;
//   - the live waiter holds the lock within closeBound of the release.
func TestFaultCloseDuringWaits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		const lease = time.Second // the closed client's own hold
		cc := newClaimCheck(t, lease/2+300*time.Millisecond, b.Universal(t))
		handle := func(label string, c *rlock.Client, lock string) (*reentrant.Lock, *activity) {
			l, err := reentrant.New(c, lock)
			require.NoError(t, err)
			act := &activity{}
			cc.add(handleClaim(label, l, act, 0, lock, owner(t, l), false))
			return l, act
		}
		holder, hact := handle("holder", newTestClient(t, b.NewClient(t)), name) // default 30 s lease
		func() {
			defer hact.begin(false)()
			require.NoError(t, holder.Lock(ctx))
		}()

		type result struct {
			label string
			at    time.Time
			err   error
		}
		results := make(chan result, 3)
		// The claims are registered before the sampler starts.
		type waiter struct {
			label string
			c     *rlock.Client
			l     *reentrant.Lock
			act   *activity
		}
		newWaiter := func(label string, c *rlock.Client) waiter {
			l, act := handle(label, c, name)
			return waiter{label, c, l, act}
		}
		wait := func(w waiter) {
			label, c, l, act := w.label, w.c, w.l, w.act
			end := act.begin(false)
			go func() {
				defer end()
				err := l.Lock(ctx)
				results <- result{label, time.Now(), err}
			}()
			require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 }, 10*time.Second, time.Millisecond, "%s never waited", label)
		}
		var closing []*rlock.Client
		var own *reentrant.Lock
		for i := range 2 {
			c := newTestClient(t, b.NewClient(t), rlock.WithWatchdogLease(lease))
			closing = append(closing, c)
			if i == 0 {
				var act *activity
				own, act = handle("closed client's own hold", c, name+":own")
				func() {
					defer act.begin(false)()
					require.NoError(t, own.Lock(ctx))
				}()
			}
			wait(newWaiter(fmt.Sprintf("closed waiter %d", i), c))
		}
		live := newWaiter("live waiter", newTestClient(t, b.NewClient(t)))
		stop := sampling(t, cc, "close during waits")
		defer func() {
			if stop != nil {
				stop()
			}
		}()
		// The sampler has seen the holds before the clients close (the
		// Orphan half excuses a hold only within the slack of the last
		// Until it saw).
		require.Eventually(t, func() bool { n, _, _, _ := cc.result(); return n >= 2 }, 10*time.Second, time.Millisecond)
		ownDone := own.Done()
		for _, c := range closing {
			require.NoError(t, c.Close())
		}
		for range 2 {
			r := <-results
			require.ErrorIs(t, r.err, rlock.ErrClosed, "%s", r.label)
		}
		select {
		case <-ownDone:
		default:
			t.Fatal("the closed client's holding did not end")
		}
		require.ErrorIs(t, own.Err(), rlock.ErrLockLost)
		require.ErrorIs(t, own.Err(), rlock.ErrClosed)

		wait(live)
		ttl, err := holder.TTL(ctx)
		require.NoError(t, err)
		released := time.Now()
		func() {
			defer hact.begin(true)()
			require.NoError(t, holder.Unlock(ctx))
		}()
		timer := time.NewTimer(closeBound)
		defer timer.Stop()
		select {
		case r := <-results:
			require.NoError(t, r.err)
			t.Logf("the live waiter held the lock %v after the release (the TTL it would poll on: %v)", r.at.Sub(released).Round(time.Millisecond), ttl.Round(time.Second))
		case <-timer.C:
			t.Fatalf("the live waiter did not get the free lock within %v of the release (its poll: the %v TTL it saw)", closeBound, ttl.Round(time.Second))
		}
		func() {
			defer live.act.begin(true)()
			require.NoError(t, live.l.Unlock(ctx))
		}()
		// The closed client's own hold runs out on the server within its
		// lease (nothing renews it); the sampler watches it go.
		rdb := b.Universal(t)
		require.Eventually(t, func() bool {
			n, err := rdb.Exists(ctx, name+":own").Result()
			return err == nil && n == 0
		}, lease+2*time.Second, 10*time.Millisecond)
		stop()
		stop = nil
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatal("the run's context ran out")
		}
	})
}
