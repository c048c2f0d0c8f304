package reentrant_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/waiters"
	"github.com/rlock-go/rlock/reentrant"
)

// commandHook counts a go-redis client's acquire script calls (attempts)
// once answered, so that a test that waits for a count knows the attempt
// is over; and its PTTLs (looks) once sent, so that a test can see a look
// that is never answered.
type commandHook struct{ attempts, looks atomic.Int64 }

func (h *commandHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *commandHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "pttl" {
			h.looks.Add(1)
		}
		err := next(ctx, cmd)
		if args := cmd.Args(); len(args) > 1 && args[1] == lua.Lock.Hash() {
			h.attempts.Add(1)
		}
		return err
	}
}
func (h *commandHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// acted is how many attempts and looks the client has sent.
func (h *commandHook) acted() int64 { return h.attempts.Load() + h.looks.Load() }

// Issue 15, the retry herd across clients: a release woke one waiter in
// every client with waiters, so with many clients each grant cost an
// attempt per client (base: 7.2 per grant here, 10 clients). With
// designations a grant costs about two attempts (the two designated
// clients') whatever the number of clients. Every waiter tries once
// before waiting and once more when its subscription is confirmed: those
// attempts, at most two per waiter, are allowed for on top, and one more
// per grant for such retries that land after the release (the test cannot
// order them before it without sleeping).
func TestHerdAcrossClientsAttemptsPerGrant(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const clients, perClient = 10, 4
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		name := redistest.Name(t)
		holder := newLock(t, clientOn(t, b.NewClient(t)), name)
		require.NoError(t, holder.Lock(ctx))

		hook := &commandHook{}
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range clients {
			rdb := b.NewClient(t)
			rdb.AddHook(hook)
			c := clientOn(t, rdb)
			for range perClient {
				l := newLock(t, c, name)
				wg.Go(func() {
					if err := l.Lock(ctx); err != nil {
						failed.Add(1)
						return
					}
					if err := l.Unlock(context.Background()); err != nil {
						failed.Add(1)
					}
				})
			}
			require.Eventually(t, func() bool { return c.Waiters().Waiters == perClient }, 10*time.Second, time.Millisecond, "client %d", i)
		}
		before := hook.attempts.Load()
		require.NoError(t, holder.Unlock(ctx))
		wg.Wait()
		require.Zero(t, failed.Load())
		grants := int64(clients * perClient)
		setup := 2 * grants
		attempts := hook.attempts.Load()
		t.Logf("%d attempts for %d grants (%d clients), %d of them before the release", attempts, grants, clients, before)
		require.LessOrEqual(t, attempts, setup+3*grants, "attempts beyond three per grant and two per waiter's setup")
	})
}

// herdSetup is a lock held by a holder (lease one minute, so that a waiter
// left to its own poll would wait that long), a live client b with one
// waiting call, and the registry rigged so that the next release
// designates the clients of tags and not b.
type herdSetup struct {
	name     string
	holder   *reentrant.Lock
	rdb      redis.UniversalClient
	b        *herdWaiter
	registry string
}

// herdWaiter is a client with one Lock call waiting, subscribed: its
// attempts (answered), and the call's ctx, cancel and result.
type herdWaiter struct {
	c      *rlock.Client
	l      *reentrant.Lock
	hook   commandHook
	ctx    context.Context
	cancel context.CancelFunc
	done   chan error // the Lock's error, or Unlock's after a grant if unlock
}

func newHerdSetup(t *testing.T, b *redistest.Backend) *herdSetup {
	ctx := context.Background()
	s := &herdSetup{name: redistest.Name(t), rdb: b.NewClient(t)}
	s.registry = base.Waiters(s.name)
	s.holder = newLock(t, clientOn(t, b.NewClient(t)), s.name, reentrant.WithLease(time.Minute))
	require.NoError(t, s.holder.Lock(ctx))
	s.b = s.waiter(t, b, true)
	return s
}

// waiter starts a Lock call on a new client and returns once it waits
// with its client registered and its subscription confirmed: the call has
// tried twice, once before waiting and once on the confirmation. (A
// client registered but not yet subscribed hears no designation; its
// waiter's retry on the confirmation makes up for it.) With unlock, a
// granted call unlocks at once.
func (s *herdSetup) waiter(t *testing.T, b *redistest.Backend, unlock bool) *herdWaiter {
	return s.waiterOn(t, b.NewClient(t), unlock)
}

// waiterOn is waiter on a client of rdb.
func (s *herdSetup) waiterOn(t *testing.T, rdb *redis.Client, unlock bool) *herdWaiter {
	w := &herdWaiter{done: make(chan error, 1)}
	rdb.AddHook(&w.hook)
	w.c = clientOn(t, rdb)
	w.l = newLock(t, w.c, s.name)
	w.ctx, w.cancel = context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(w.cancel)
	go func() {
		err := w.l.Lock(w.ctx)
		if err == nil && unlock {
			err = w.l.Unlock(context.Background())
		}
		w.done <- err
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, w.c.Waiters().Waiters == 1 && w.hook.attempts.Load() >= 2 && s.registered(c, waiters.Tag(w.c.ID())))
	}, 10*time.Second, time.Millisecond)
	return w
}

// registered reports whether tag is in the registry.
func (s *herdSetup) registered(t require.TestingT, tag string) bool {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	err := s.rdb.ZScore(context.Background(), s.registry, tag).Err()
	if err == redis.Nil {
		return false
	}
	require.NoError(t, err)
	return true
}

// first puts tags at the head of the registry (least recently attempted).
func (s *herdSetup) first(t *testing.T, tags ...string) {
	for i, tag := range tags {
		require.NoError(t, s.rdb.ZAdd(context.Background(), s.registry, redis.Z{Score: aheadOfRegistrations(len(tags), i), Member: tag}).Err())
	}
}

// aheadOfRegistrations is the registry score of the i-th of n rigged
// registrations: live for 20 s (designate.lua drops registrations whose
// score, in server milliseconds, has passed), and ahead of every real
// registration of a waiter on a lock with a minute's lease made in the
// last half minute, which lives for the lock's TTL and a grace more.
// (Regression: the scores were 100 s apart and 40 s or more in the past,
// so every rigged tag was dropped unheard and the tests below passed
// whatever designation did.)
func aheadOfRegistrations(n, i int) float64 {
	return float64(time.Now().Add(20*time.Second).UnixMilli() - int64(n-i)*100)
}

// releaseWakesB releases the holder and requires b's waiter to get the
// lock long before its own poll (the holder's minute) would have.
func (s *herdSetup) releaseWakesB(t *testing.T, why string) {
	require.NoError(t, s.holder.Unlock(context.Background()))
	select {
	case err := <-s.b.done:
		require.NoError(t, err, why)
	case <-time.After(15 * time.Second):
		t.Fatal(why)
	}
}

// A designated client that crashed (cut off without Close, which would
// unregister it) still counts as live until its registration lapses: the
// release designates a second client, which wakes its waiter. That waiter
// finds the lock free, and takes the crashed client off the registry: a
// registration that is never renewed is the oldest, so every release would
// name the crashed client first until it lapses.
func TestHerdCrashedDesignatedClientDoesNotStall(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		s := newHerdSetup(t, b)
		proxy, rdb := b.NewProxiedClient(t)
		crashed := s.waiterOn(t, rdb, false)
		proxy.Blackhole(true) // as a crash
		t.Cleanup(func() { proxy.Blackhole(false); proxy.ResetAll() })
		tag := waiters.Tag(crashed.c.ID())
		require.True(t, s.registered(t, tag))
		s.first(t, tag)
		s.releaseWakesB(t, "a crashed designated client left the release waking nobody")
		require.EventuallyWithT(t, func(c *assert.CollectT) { require.False(c, s.registered(c, tag)) }, 10*time.Second, time.Millisecond,
			"the crashed client is still registered, to be named first again")
	})
}

// Regression (issue 15): the second designee of a release looked at the
// lock (a PTTL) on every release, and tried for it when the look came
// before the first designee's attempt: 1.4 requests per contended grant
// on top of the grant's two (BenchmarkContended of ./reentrant, one CPU).
// It now waits up to a grace for a later release, which shows that the
// first acted, and looks only without one. Here the first designee (a)
// takes the lock and releases it at once, well within the grace (a minute
// here), and b, designated second, never looks.
func TestHerdSecondDesigneeLooksOnlyWithoutALaterRelease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		defer core.SetSecondGrace(time.Minute)()
		s := newHerdSetup(t, b)
		a := s.waiter(t, b, true)
		s.first(t, waiters.Tag(a.c.ID()), waiters.Tag(s.b.c.ID()))
		looks := s.b.hook.looks.Load()
		s.releaseWakesB(t, "b did not get the lock after a released it")
		require.NoError(t, <-a.done)
		require.Equal(t, looks, s.b.hook.looks.Load(), "b looked at the lock after a released it")
	})
}

// A designated client whose waiter just left passes the designation on.
// Two designated clients here: one that no longer exists (a tag nobody
// has) and one whose only waiter gave up.
func TestHerdDesignatedClientWithoutWaiterPassesOn(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		s := newHerdSetup(t, b)
		left := s.waiter(t, b, false)
		left.cancel()
		require.ErrorIs(t, <-left.done, context.Canceled)
		// The channel lingers (a second) with nobody waiting, the client
		// still registered: the release comes well within it.
		s.first(t, waiters.Tag("gone-"+s.name), waiters.Tag(left.c.ID()))
		s.releaseWakesB(t, "the designation of a client without waiters was not passed on")
	})
}

// A designated client whose woken waiter's attempt fails, with no other
// waiter of its own, passes the designation on; designated second, the
// waiter's look at the lock fails instead, and it passes the designation
// on just the same. The other designee is a tag nobody has.
func TestHerdDesignatedWakeUpWhoseAttemptFailsPassesOn(t *testing.T) {
	for _, second := range []bool{false, true} {
		t.Run(fmt.Sprintf("second=%v", second), func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
				s := newHerdSetup(t, b)
				failing := s.waiter(t, b, false)
				restore := core.FailNextWokenAttempt(failing.ctx, failing.cancel)
				defer restore()
				tags := []string{waiters.Tag(failing.c.ID()), waiters.Tag("gone-" + s.name)}
				if second {
					tags[0], tags[1] = tags[1], tags[0]
				}
				s.first(t, tags...)
				s.releaseWakesB(t, "the designation whose attempt failed was not passed on")
				require.ErrorIs(t, <-failing.done, context.Canceled)
			})
		})
	}
}

// A waiting call's first attempt registers its client with the lock
// before the client listens on the lock's channel, so a release in
// between designates it unheard. Its waiter tries again once the
// subscription is confirmed; but one that left before that passed
// nothing on, and the lock's other waiters slept until their poll (the
// holder's minute here). The client's pub/sub connection is slowed down
// (a proxy delaying every chunk by 300 ms) to hold that window open.
// (Found while fixing the herd tests' rigging.)
func TestHerdDesignationBeforeTheSubscriptionIsPassedOn(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		s := newHerdSetup(t, b)
		proxy, rdb := b.NewProxiedClient(t)
		c := clientOn(t, rdb)
		l := newLock(t, c, s.name)
		proxy.SetLatency(300 * time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- l.Lock(ctx) }()
		tag := waiters.Tag(c.ID())
		require.EventuallyWithT(t, func(ct *assert.CollectT) { require.True(ct, c.Waiters().Waiters == 1 && s.registered(ct, tag)) }, 30*time.Second, time.Millisecond)
		cancel() // its SUBSCRIBE is still on its way
		require.ErrorIs(t, <-done, context.Canceled)
		s.first(t, tag, waiters.Tag("gone-"+s.name))
		s.releaseWakesB(t, "the designation of a client not yet listening was not passed on")
	})
}

// Issue 15, the herd: a release designates two clients, the second in
// case the first is gone, and both woke a waiter that tried for the lock,
// so every grant cost two attempts (2.02-2.04 per grant at 50 clients).
// The second designee's waiter now looks first, and tries only if the
// lock is still free. Here the first designee (a) takes the lock before
// the second (b) acts on its wake-up; b must not try until a releases.
func TestHerdSecondDesigneeTriesOnlyIfTheLockIsFree(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		s := newHerdSetup(t, b)
		a := s.waiter(t, b, false)
		s.first(t, waiters.Tag(a.c.ID()), waiters.Tag(s.b.c.ID()))
		aHolds := make(chan struct{})
		restore := core.OnNextWakeUp(s.b.ctx, func() { <-aHolds })
		defer restore()
		bh := &s.b.hook
		acted, attempts := bh.acted(), bh.attempts.Load()

		require.NoError(t, s.holder.Unlock(context.Background()))
		require.NoError(t, <-a.done)
		close(aHolds)
		require.Eventually(t, func() bool { return bh.acted() > acted }, 10*time.Second, time.Millisecond,
			"b did not act on its wake-up")
		require.Equal(t, attempts, bh.attempts.Load(), "b tried for the lock a holds")
		require.NoError(t, a.l.Unlock(context.Background()))
		require.NoError(t, <-s.b.done)
		require.Equal(t, attempts+1, bh.attempts.Load(), "b's grant took more than one attempt")
	})
}

// A waiting Lock returns the moment its ctx ends, also while it looks at
// the lock after a wake-up as the second designee: the look runs on a
// background worker, since go-redis cannot abandon a read. The look goes
// to a server that never answers (a proxy that discards everything, and
// no read timeout).
func TestHerdSecondDesigneeLookReturnsWhenCtxEnds(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		s := newHerdSetup(t, b)
		proxy, rdb := b.NewProxiedClient(t, func(o *redis.Options) { o.ReadTimeout = -1 })
		slow := s.waiterOn(t, rdb, false)
		restore := core.OnNextWakeUp(slow.ctx, func() { proxy.Blackhole(true) })
		defer restore()
		defer proxy.ResetAll() // ends the read left waiting
		defer proxy.Blackhole(false)
		s.first(t, waiters.Tag("gone-"+s.name), waiters.Tag(slow.c.ID()))

		looks := slow.hook.looks.Load()
		require.NoError(t, s.holder.Unlock(context.Background()))
		require.Eventually(t, func() bool { return slow.hook.looks.Load() > looks }, 10*time.Second, time.Millisecond,
			"the second designee did not look")
		slow.cancel()
		select {
		case err := <-slow.done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(10 * time.Second):
			t.Fatal("Lock did not return when its ctx ended during its look")
		}
	})
}

// Redisson's waiters are woken by a release that designates rlock
// clients: the designations are integers Redisson ignores, and the "0"
// follows them. The double decodes messages as Redisson's LongCodec does
// and fails on anything else.
func TestHerdRedissonWaitersStillWoken(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		s := newHerdSetup(t, b)
		r := redistest.NewRedisson(b.NewClient(t), false)
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for thread := range 2 {
			wg.Go(func() {
				rl := r.Lock(s.name, int64(thread+1))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if err := rl.Lock(ctx, time.Minute); err != nil {
					errs <- fmt.Errorf("thread %d: %w", thread, err)
					return
				}
				errs <- rl.Unlock(context.Background())
			})
		}
		require.Eventually(t, func() bool { return r.Waits() >= 2 }, 10*time.Second, time.Millisecond)
		s.first(t, waiters.Tag("gone-"+s.name), waiters.Tag("gone2-"+s.name)) // b is not designated
		require.NoError(t, s.holder.Unlock(context.Background()))
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.NoError(t, <-s.b.done)
	})
}

// Regression (issue 15): every blocking Lock's grant ran ZREM on the
// lock's waiter registry, though a client that is not waiting for the lock
// (it has no channel for it) has no registration to take out: the
// registration was taken out when its channel was dropped. An uncontended
// Lock now sends the registry nothing.
func TestUncontendedLockLeavesTheRegistryAlone(t *testing.T) {
	b := redistest.Real(t) // INFO commandstats: real Redis only
	ctx := context.Background()
	rdb := b.NewClient(t)
	l := newLock(t, clientOn(t, rdb), redistest.Name(t))
	require.NoError(t, rdb.ConfigResetStat(ctx).Err())
	for range 10 {
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Unlock(ctx))
	}
	require.Zero(t, redistest.CommandStats(t, rdb)["zrem"], "registry commands of an uncontended Lock")
}

// The other side of TestUncontendedLockLeavesTheRegistryAlone: while the
// client's channel for the lock lingers after its waiter gave up, a grant
// from free to one of its calls still takes its registration out, so that
// no release designates a client without waiters.
func TestGrantWhileTheChannelLingersUnregistersTheClient(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		holder := newLock(t, clientOn(t, b.NewClient(t)), name, reentrant.WithLease(time.Minute))
		require.NoError(t, holder.Lock(ctx))
		c := clientOn(t, b.NewClient(t))
		waiting, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- newLock(t, c, name).Lock(waiting) }()
		s := &herdSetup{rdb: b.NewClient(t), registry: base.Waiters(name)}
		tag := waiters.Tag(c.ID())
		require.EventuallyWithT(t, func(ct *assert.CollectT) { require.True(ct, c.Waiters().Waiters == 1 && s.registered(ct, tag)) }, 10*time.Second, time.Millisecond)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		require.True(t, s.registered(t, tag), "a waiter that gives up leaves its registration to lapse")

		require.NoError(t, holder.Unlock(ctx))
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))
		require.False(t, s.registered(t, tag), "the grant took the registration out")
		require.NoError(t, l.Unlock(ctx))
	})
}

// A resubscription asks every waiter to retry, since messages may have
// been missed; a waiter that was waiting, as its client's second
// designation, for the first designee to act retries too, rather than
// waiting out the grace (a minute here). The first designee is a tag
// nobody has, so only the retry gets the lock.
func TestHerdResubscriptionEndsTheSecondDesigneesWait(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		defer core.SetSecondGrace(time.Minute)()
		s := newHerdSetup(t, b)
		proxy, rdb := b.NewProxiedClient(t, func(*redis.Options) {})
		second := s.waiterOn(t, rdb, true)
		s.first(t, waiters.Tag("gone-"+s.name), waiters.Tag(second.c.ID()))
		restore := core.OnNextWakeUp(second.ctx, proxy.ResetAll) // every connection, pub/sub included
		defer restore()
		require.NoError(t, s.holder.Unlock(context.Background()))
		select {
		case err := <-second.done:
			require.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Fatal("the resubscription did not end the second designee's wait")
		}
	})
}

// releaseWakesBWithin is releaseWakesB with the bound d.
func (s *herdSetup) releaseWakesBWithin(t *testing.T, d time.Duration, why string) {
	require.NoError(t, s.holder.Unlock(context.Background()))
	select {
	case err := <-s.b.done:
		require.NoError(t, err, why)
	case <-time.After(d):
		t.Fatal(why)
	}
}

// Regression: Client.Close left its client's registrations, and a release
// designates the two least recently registered clients, so with two
// closed clients named, every other client dropped the release's "0" and
// the live waiter slept until its poll (the holder's minute) with the lock
// free. Close now takes its client's registrations out.
func TestHerdClosedDesigneesDoNotStall(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		s := newHerdSetup(t, b)
		x, y := s.waiter(t, b, false), s.waiter(t, b, false)
		tags := []string{waiters.Tag(x.c.ID()), waiters.Tag(y.c.ID())}
		s.first(t, tags...)
		for _, w := range []*herdWaiter{x, y} {
			require.NoError(t, w.c.Close())
			require.ErrorIs(t, <-w.done, rlock.ErrClosed)
		}
		for _, tag := range tags {
			assert.False(t, s.registered(t, tag), "Close left the registration of %s", tag)
		}
		s.releaseWakesBWithin(t, 10*time.Second, "two closed designated clients left the release waking nobody")
	})
}

// Regression: a release depended on one of its two designees being alive.
// Two clients that are gone without unregistering (crashed: tags nobody
// has) named first, every other client dropped the release's "0", and
// the live waiter slept until its poll (the holder's minute) with the lock
// free. A client that drops a designated "0" now checks, a moment later,
// that the designees acted (a later release, or a held lock), and takes
// them off the registry and tries if they did not.
func TestHerdGoneDesigneesDoNotStall(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		s := newHerdSetup(t, b)
		tags := []string{waiters.Tag("gone-" + s.name), waiters.Tag("gone2-" + s.name)}
		s.first(t, tags...)
		s.releaseWakesBWithin(t, 10*time.Second, "two gone designated clients left the release waking nobody")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.False(c, s.registered(c, tags[0]) || s.registered(c, tags[1]))
		}, 10*time.Second, time.Millisecond, "the gone clients are still registered, to be named first again")
	})
}

// As TestHerdGoneDesigneesDoNotStall, with real clients whose connections
// are blackholed (cut off without Close) as the designees.
func TestHerdCutOffDesigneesDoNotStall(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		s := newHerdSetup(t, b)
		var tags []string
		for range 2 {
			proxy, rdb := b.NewProxiedClient(t)
			w := s.waiterOn(t, rdb, false)
			tags = append(tags, waiters.Tag(w.c.ID()))
			proxy.Blackhole(true)
			t.Cleanup(func() { proxy.Blackhole(false); proxy.ResetAll() })
		}
		s.first(t, tags...)
		s.releaseWakesBWithin(t, 10*time.Second, "two cut-off designated clients left the release waking nobody")
	})
}

const herdWaiterEnv = "RLOCK_TEST_HERD_WAITER" // "addr name clientID"

// TestHelperHerdWaiter is not a test: it is a child process of
// TestHerdKilledDesigneesDoNotStall. Its client waits for the lock, says
// so once registered, and waits to be killed.
func TestHelperHerdWaiter(t *testing.T) {
	if !redistest.IsHelperProcess() {
		t.Skip("helper process for TestHerdKilledDesigneesDoNotStall")
	}
	args := splitFields(os.Getenv(herdWaiterEnv))
	require.Len(t, args, 3)
	rdb := redis.NewClient(&redis.Options{Addr: args[0]})
	c, err := rlock.NewClient(rdb, rlock.WithClientID(args[2]))
	require.NoError(t, err)
	l, err := reentrant.New(c, args[1])
	require.NoError(t, err)
	go func() { _ = l.Lock(context.Background()) }()
	s := &herdSetup{rdb: rdb, registry: base.Waiters(args[1])}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.True(ct, c.Waiters().Waiters == 1 && s.registered(ct, waiters.Tag(args[2])))
	}, 10*time.Second, time.Millisecond)
	time.Sleep(100 * time.Millisecond) // a moment for the confirmation's retry (the parent rigs the registry after)
	os.Stdout.WriteString("waiting\n")
	select {} // until killed
}

// As TestHerdGoneDesigneesDoNotStall, with helper processes killed
// (SIGKILL) while they wait as the designees.
func TestHerdKilledDesigneesDoNotStall(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		s := newHerdSetup(t, b)
		var tags []string
		var children []*redistest.Child
		for i := range 2 {
			id := fmt.Sprintf("killed-%d-%s", i, s.name)
			child := redistest.StartHelperProcess(t, "TestHelperHerdWaiter", herdWaiterEnv+"="+b.Addr+" "+s.name+" "+id)
			child.WaitLine(t, "waiting", 20*time.Second)
			tags = append(tags, waiters.Tag(id))
			children = append(children, child)
		}
		for _, child := range children {
			child.Kill()
		}
		s.first(t, tags...)
		s.releaseWakesBWithin(t, 10*time.Second, "two killed designated clients left the release waking nobody")
	})
}
