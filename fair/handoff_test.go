package fair_test

import (
	"context"
	"github.com/rlock-go/rlock"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/redistest"
)

// handoffMargin is how much later than the lease the next owner in line may
// be granted a lock left to expire: a bound on behaviour (a round trip or
// two, generously), not a speed claim. Without wake-ups the next owner in
// line slept up to a third of the queue timeout (10 s by default).
const handoffMargin = 2 * time.Second

// queueInOrder starts LockLease with lease for each of ls, in order, each once the
// one before it is queued (so the queue holds them in that order), and
// returns where each one's result arrives. Each call's ctx is ctx.
func queueInOrder(t *testing.T, ctx context.Context, watch *fair.Lock, lease time.Duration, ls []*fair.Lock) []<-chan error {
	t.Helper()
	before := len(queue(t, watch))
	dones := make([]<-chan error, len(ls))
	for i, l := range ls {
		done := make(chan error, 1)
		go func() { done <- l.LockLease(ctx, lease) }()
		dones[i] = done
		waitQueued(t, watch, before+i+1)
	}
	return dones
}

// expectGrants waits for each of dones in order and checks that each
// arrives (nil) within lease+handoffMargin of the one before it (or of from
// for the first). It returns when the last was granted.
func expectGrants(t *testing.T, from time.Time, lease time.Duration, dones []<-chan error) time.Time {
	t.Helper()
	prev := from
	for i, done := range dones {
		select {
		case err := <-done:
			require.NoError(t, err, "owner %d in line", i)
		case <-time.After(time.Until(prev.Add(lease + handoffMargin))):
			t.Fatalf("owner %d in line was not granted within %v of the previous grant (lease %v)", i, lease+handoffMargin, lease)
		}
		now := time.Now()
		t.Logf("owner %d in line granted %v after the previous grant", i, now.Sub(prev).Round(time.Millisecond))
		prev = now
		// Its grant stands: no other result arrived before it.
		for _, later := range dones[i+1:] {
			select {
			case err := <-later:
				t.Fatalf("an owner behind %d finished first: %v", i, err)
			default:
			}
		}
	}
	return prev
}

// Regression (issue 12, defect 12): eight owners take the fair lock with a
// 300 ms lease and never unlock. Each lease runs out unannounced; waiters
// that were not first in line polled at that moment, were told "free, but
// another waiter is first" with the head's deadline (about 30 s) and slept
// up to a third of the queue timeout, and the head's grant woke nobody:
// only 3 of 8 were granted within 3 s each. Now the grant wakes the next
// in line, which learns the new lease and retries when it runs out: all
// eight are granted in arrival order, one lease apart.
func TestExpiredLeasesHandOffInArrivalOrder(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		name := redistest.Name(t)
		const lease = 300 * time.Millisecond
		const n = 8
		ls := make([]*fair.Lock, n)
		for i := range ls {
			ls[i] = newLock(t, newClient(t, b), name, fair.WithLease(lease))
		}
		require.NoError(t, ls[0].Lock(ctx))
		granted := time.Now()
		dones := queueInOrder(t, ctx, ls[0], lease, ls[1:])
		expectGrants(t, granted, lease, dones)
		require.Empty(t, queue(t, ls[0]))
	})
}

// pauseHook holds back the script calls of the go-redis client it is added
// to while paused, as if the owner's process had stopped: a call that
// arrives meanwhile waits, unsent, until resume.
type pauseHook struct {
	gate    atomic.Pointer[chan struct{}] // nil: not paused
	waiting atomic.Int32                  // calls held back now
}

func (h *pauseHook) pause() {
	c := make(chan struct{})
	h.gate.Store(&c)
}

func (h *pauseHook) resume() {
	if c := h.gate.Swap(nil); c != nil {
		close(*c)
	}
}

func (h *pauseHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pauseHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c := h.gate.Load(); c != nil && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			h.waiting.Add(1)
			<-*c
			h.waiting.Add(-1)
		}
		return next(ctx, cmd)
	}
}

func (h *pauseHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Regression (issue 12, defect 13), the deterministic replay: A holds; B is
// first in line, C behind. B is paused while A unlocks; A calls Lock again
// at once and reaches the server before B, so it is told "free, but B is
// first". B resumes, is granted with a lease and dies (never unlocks, so
// the lease runs out). Nobody told C of B's grant: C slept until its next
// renewal of its place (8.9 s after the kill in the report) while the lock
// lay free. Now B's grant wakes C, C learns B's lease and is granted when
// it runs out; C dies the same way, and A, woken by C's grant, follows.
func TestLostHolderHandsOffToNextInLine(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		name := redistest.Name(t)
		const lease = 500 * time.Millisecond

		a := newLock(t, newClient(t, b), name) // watchdog mode
		require.NoError(t, a.Lock(ctx))
		bRdb, cRdb := b.NewClient(t), b.NewClient(t)
		pause, bCalls, cCalls := &pauseHook{}, &redistest.ScriptCalls{}, &redistest.ScriptCalls{}
		bRdb.AddHook(bCalls)
		bRdb.AddHook(pause)
		cRdb.AddHook(cCalls)
		bl := newLock(t, clientOn(t, bRdb), name, fair.WithLease(lease))
		cl := newLock(t, clientOn(t, cRdb), name, fair.WithLease(lease))
		bDone := lockAsync(ctx, bl)
		waitQueued(t, a, 1)
		cDone := lockAsync(ctx, cl)
		waitQueued(t, a, 2)
		// Each joined, subscribed its channel, and tried again once the
		// subscription was confirmed; now both only wait.
		require.Eventually(t, func() bool { return bCalls.N() == 2 && cCalls.N() == 2 }, 10*time.Second, time.Millisecond)

		pause.pause()
		require.NoError(t, a.Unlock(ctx)) // wakes B, whose attempt waits at the pause
		require.Eventually(t, func() bool { return pause.waiting.Load() == 1 }, 10*time.Second, time.Millisecond)
		aDone := lockAsync(ctx, a) // reaches the server before B: told "free, but B is first"
		waitQueued(t, a, 3)
		require.Equal(t, []string{owner(t, bl), owner(t, cl), owner(t, a)}, queue(t, a))

		pause.resume()
		require.NoError(t, <-bDone) // B is granted, and dies holding the lock
		expectGrants(t, time.Now(), lease, []<-chan error{cDone, aDone})
		require.NoError(t, a.Unlock(ctx))
		require.Empty(t, queue(t, a))
	})
}

// TestForceUnlockHandsOffAlongQueue: a force unlock wakes the first in
// line, and each grant wakes the next, so holders that die one after the
// other hand the lock down the queue one lease apart.
func TestForceUnlockHandsOffAlongQueue(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		name := redistest.Name(t)
		const lease = 300 * time.Millisecond
		holder := newLock(t, newClient(t, b), name) // watchdog mode: only a wake-up hands off in time
		require.NoError(t, holder.Lock(ctx))
		ls := make([]*fair.Lock, 3)
		for i := range ls {
			ls[i] = newLock(t, newClient(t, b), name)
		}
		dones := queueInOrder(t, ctx, holder, lease, ls)
		forced, err := holder.ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, forced)
		expectGrants(t, time.Now(), 0, dones[:1]) // woken at once
		expectGrants(t, time.Now(), lease, dones[1:])
		require.Empty(t, queue(t, holder))
	})
}

// TestLeavingHeadHandsOffAlongQueue: the lock is freed without a wake-up
// (as by expiry); the waiter first in line gives up and wakes the next,
// whose grant wakes the one after it, which is granted when the lease runs
// out. Queue timeouts and max-poll are an hour: only wake-ups are in time.
func TestLeavingHeadHandsOffAlongQueue(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		name := redistest.Name(t)
		const lease = 300 * time.Millisecond
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx))
		ls := make([]*fair.Lock, 3)
		for i := range ls {
			c := newClient(t, b, rlock.WithMaxPoll(time.Hour))
			ls[i] = newLock(t, c, name, fair.WithQueueTimeout(time.Hour))
		}
		hctx, leave := context.WithCancel(ctx)
		dones := queueInOrder(t, hctx, holder, lease, ls[:1])
		dones = append(dones, queueInOrder(t, ctx, holder, lease, ls[1:])...)

		require.NoError(t, b.NewClient(t).Del(ctx, name).Err()) // freed; nobody is told
		leave()
		require.ErrorIs(t, <-dones[0], context.Canceled)
		expectGrants(t, time.Now(), 0, dones[1:2]) // woken by the departure
		expectGrants(t, time.Now(), lease, dones[2:])
		require.Empty(t, queue(t, holder))
	})
}

// TestHeadLeavingWhileHeldWakesNext: the waiter that becomes first in line
// because the head gave up is woken even though the lock is held, so it
// learns the holder's lease instead of sleeping on what it was told before
// (here the 30 s lease of an earlier holder; queue timeouts and max-poll
// are an hour), and is granted when that lease runs out.
func TestHeadLeavingWhileHeldWakesNext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		name := redistest.Name(t)
		const lease = 300 * time.Millisecond
		holder := newLock(t, newClient(t, b), name) // watchdog mode: 30 s TTL
		require.NoError(t, holder.Lock(ctx))
		ls := make([]*fair.Lock, 3)
		calls := make([]*redistest.ScriptCalls, len(ls))
		for i := range ls {
			rdb := b.NewClient(t)
			calls[i] = &redistest.ScriptCalls{}
			rdb.AddHook(calls[i])
			c := clientOn(t, rdb, rlock.WithMaxPoll(time.Hour))
			ls[i] = newLock(t, c, name, fair.WithQueueTimeout(time.Hour))
		}
		dones := queueInOrder(t, ctx, holder, lease, ls[:1])
		lctx, leave := context.WithCancel(ctx)
		dones = append(dones, queueInOrder(t, lctx, holder, lease, ls[1:2])...)
		dones = append(dones, queueInOrder(t, ctx, holder, lease, ls[2:])...)
		// Each joined, subscribed its channel, and tried again once the
		// subscription was confirmed; now all only wait.
		require.Eventually(t, func() bool {
			return calls[0].N() == 2 && calls[1].N() == 2 && calls[2].N() == 2
		}, 10*time.Second, time.Millisecond)

		require.NoError(t, holder.Unlock(ctx))
		expectGrants(t, time.Now(), 0, dones[:1]) // ls[0] holds and dies
		leave()                                   // ls[1] gives up while ls[0] holds
		require.ErrorIs(t, <-dones[1], context.Canceled)
		expectGrants(t, time.Now(), lease, dones[2:])
		require.Empty(t, queue(t, holder))
	})
}

// TestPruningDeadHeadWakesNext: the lock is freed without a wake-up; the
// waiter first in line has died (it stopped renewing its place); a waiter
// further back prunes it when it polls. The waiter now first in line is
// woken and granted, though it was told to sleep for the 30 s TTL the lock
// had before it vanished.
func TestPruningDeadHeadWakesNext(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		name := redistest.Name(t)
		const deadTimeout = 2 * time.Second
		holder := newLock(t, newClient(t, b), name) // watchdog mode: 30 s TTL
		require.NoError(t, holder.Lock(ctx))

		deadRdb := b.NewClient(t)
		pause, deadCalls := &pauseHook{}, &redistest.ScriptCalls{}
		deadRdb.AddHook(deadCalls)
		deadRdb.AddHook(pause)
		dead := newLock(t, clientOn(t, deadRdb), name, fair.WithQueueTimeout(deadTimeout))
		t.Cleanup(pause.resume) // before its client closes
		next := newLock(t, newClient(t, b, rlock.WithMaxPoll(time.Hour)), name, fair.WithQueueTimeout(time.Hour))
		back := newLock(t, newClient(t, b), name, fair.WithQueueTimeout(300*time.Millisecond)) // polls every 100 ms
		dctx, dcancel := context.WithCancel(ctx)
		defer dcancel()
		lockAsync(dctx, dead)
		waitQueued(t, holder, 1)
		require.Eventually(t, func() bool { return deadCalls.N() == 2 }, 10*time.Second, time.Millisecond)
		pause.pause() // it renews nothing from now on
		nextDone := lockAsync(ctx, next)
		waitQueued(t, holder, 2)
		backDone := lockAsync(ctx, back)
		waitQueued(t, holder, 3)
		// The dead waiter's renewal, a third of its queue timeout after the
		// last one, is held back: its deadline is that timeout after it.
		require.Eventually(t, func() bool { return pause.waiting.Load() == 1 }, 10*time.Second, time.Millisecond)
		require.NoError(t, b.NewClient(t).Del(ctx, name).Err()) // freed; nobody is told

		expectGrants(t, time.Now(), deadTimeout, []<-chan error{nextDone})
		require.Equal(t, []string{owner(t, back)}, queue(t, holder), "the dead waiter was pruned")
		require.NoError(t, next.Unlock(ctx))
		require.NoError(t, <-backDone)
		require.NoError(t, back.Unlock(ctx))
	})
}
