package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/base"
	"github.com/rlock-go/rlock/internal/core"
	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/waiters"
	"github.com/rlock-go/rlock/reentrant"
)

// Regression tests for the defects of the reliability review, each named
// after its bug.

// Defect 1: ForceUnlock ran on a free lock and deleted nothing; its reply
// was lost; another owner took the lock; go-redis re-sent the script, which
// deleted the new holder's lock.
func TestResentForceUnlockDoesNotDeleteNewHolder(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t)
		c := clientOn(t, viaProxy)
		redistest.LoadScripts(t, viaProxy)
		other := newLock(t, newClient(t, b), name)

		proxy.DropNextReplyThen("evalsha", func() {
			if err := other.TryLock(ctx); err != nil {
				t.Errorf("the other owner could not take the free lock: %v", err)
			}
		})
		deleted, err := newLock(t, c, name).ForceUnlock(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, proxy.Dropped())
		require.False(t, deleted, "the lock was free when the force unlock ran")
		held, err := other.IsHeld(ctx)
		require.NoError(t, err)
		require.True(t, held, "the re-sent force unlock deleted the new holder's lock")
		require.NoError(t, other.Err())
		require.NoError(t, other.Unlock(ctx))
	})
}

// noRetries turns go-redis's retries off, so a lost reply is an error.
func noRetries(o *redis.Options) { o.MaxRetries = -1 }

// Defect 2: after an Unlock whose outcome was unknown (the server
// decremented, the reply was lost), the next Unlock sent the stale count,
// was taken for a re-send of the first and changed nothing: the lock was
// renewed for ever and nobody could take it again.
func TestNextUnlockAfterUnknownOutcomeReleases(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t, noRetries)
		c := clientOn(t, viaProxy)
		redistest.LoadScripts(t, viaProxy)
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Lock(l.Ctx())) // re-entry

		proxy.DropNextReply("evalsha")
		require.Error(t, l.Unlock(ctx), "the release ran but its reply was lost")
		n, err := l.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n, "the lost release ran")

		require.NoError(t, l.Unlock(ctx), "the owner's last hold")
		requireFree(t, b, name)
	})
}

// Defect 2, re-entry form: a re-entry whose reply was lost returned an
// error; the owner unlocked once (its one successful Lock) and the lock
// stayed held, renewed for ever.
func TestUnlockAfterLostReentryReplyReleases(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t, noRetries)
		c := clientOn(t, viaProxy)
		redistest.LoadScripts(t, viaProxy)
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))

		proxy.DropNextReply("evalsha")
		require.Error(t, l.TryLock(l.Ctx()), "the re-entry ran but its reply was lost")
		require.NoError(t, l.Unlock(ctx), "the owner's one successful Lock")
		requireFree(t, b, name)

		// A blocking Lock outlives the lost reply: it settles and tries
		// again, and the owner has exactly the holds it was told of.
		require.NoError(t, l.Lock(ctx))
		proxy.DropNextReply("evalsha")
		require.NoError(t, l.Lock(l.Ctx())) // re-entry
		require.Equal(t, 2, proxy.Dropped())
		n, err := l.HoldCount(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, l.Unlock(ctx))
		requireFree(t, b, name)
	})
}

// Defect 2, abandoned form: a re-entry granted after its caller's ctx ended
// is released again in the background; when that release's reply was lost,
// the owner's next Unlock left the extra hold behind for ever.
func TestUnlockAfterFailedCleanupOfAbandonedReentryReleases(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t, noRetries)
		c := clientOn(t, viaProxy)
		redistest.LoadScripts(t, viaProxy)
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))

		actx, cancel := context.WithCancel(l.Ctx()) // re-entry, with a cancel of its own
		defer cancel()
		// The re-entry is granted, then ctx ends and the clean-up release's
		// reply is lost.
		returned, restore := core.AbandonNextGrant(actx, func() {
			proxy.DropNextReply("evalsha")
			cancel()
		})
		defer restore()
		err := l.Lock(actx)
		returned()
		require.ErrorIs(t, err, context.Canceled)
		require.Eventually(t, func() bool { return proxy.Dropped() == 1 }, 5*time.Second, time.Millisecond)

		require.NoError(t, l.Unlock(ctx), "the owner's one successful Lock")
		requireFree(t, b, name)
	})
}

// requireFree checks, through a client of its own, that another owner can
// take the lock called name at once.
func requireFree(t *testing.T, b *redistest.Backend, name string) {
	t.Helper()
	ctx := context.Background()
	n, err := b.NewClient(t).Exists(ctx, name).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the lock outlived its owner's last successful Unlock")
	other := newLock(t, newClient(t, b), name)
	require.NoError(t, other.TryLock(ctx))
	require.NoError(t, other.Unlock(ctx))
}

// Defect 3: a re-entry with an explicit lease set the TTL of a lock the
// watchdog renews to that lease, while the watchdog kept its schedule: the
// lock expired under its holder, who was told nothing.
func TestReentryWithShortLeaseKeepsWatchdogProtection(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		l := newLock(t, newClient(t, b), name)
		require.NoError(t, l.Lock(ctx))                                // watchdog mode: a 30 s lease
		require.NoError(t, l.LockLease(l.Ctx(), 200*time.Millisecond)) // re-entry
		ttl, err := l.TTL(ctx)
		require.NoError(t, err)
		require.Greater(t, ttl, 10*time.Second, "the re-entry shortened a lease the watchdog renews")
		require.NoError(t, l.Unlock(ctx))
		ttl, err = l.TTL(ctx)
		require.NoError(t, err)
		require.Greater(t, ttl, 10*time.Second, "releasing the re-entry shortened the lease")
		require.NoError(t, l.Err())
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, l.Err())
	})
}

// Defect 3, explicit form: a re-entry with a shorter explicit lease cut
// the lease its owner asked for on the outer hold.
func TestReentryWithShorterLeaseNeverShortensTheLock(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		l := newLock(t, newClient(t, b), name)
		require.NoError(t, l.LockLease(ctx, time.Minute))
		require.NoError(t, l.LockLease(l.Ctx(), 200*time.Millisecond)) // re-entry
		ttl, err := l.TTL(ctx)
		require.NoError(t, err)
		require.Greater(t, ttl, 30*time.Second, "the re-entry shortened the outer hold's lease")
		require.NoError(t, l.Unlock(ctx))
		ttl, err = l.TTL(ctx)
		require.NoError(t, err)
		require.Greater(t, ttl, 30*time.Second, "releasing the re-entry shortened the lease")
		require.NoError(t, l.Unlock(ctx))
	})
}

// Defect 7: a waiter woken by a release whose attempt then failed (here:
// its ctx ended between the wake-up and the attempt) consumed the wake-up;
// the client's other waiters slept until the TTL they had seen while the
// lock was free.
func TestWakeUpOfFailedAttemptIsPassedOn(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		// A long max-poll: waiters move only when woken or at the TTL.
		rdb := b.NewClient(t)
		scriptsDone := &scriptCounter{}
		rdb.AddHook(scriptsDone)
		c := clientOn(t, rdb, rlock.WithMaxPoll(time.Minute))
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.Lock(ctx)) // a 30 s lease

		firstCtx, cancelFirst := context.WithCancel(ctx)
		defer cancelFirst()
		first, second := newLock(t, c, name), newLock(t, c, name)
		firstDone := make(chan error, 1)
		go func() { firstDone <- first.Lock(firstCtx) }()
		// It tried, subscribed, and tried again once the subscription was
		// confirmed: now it sleeps on the TTL.
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 1 && scriptsDone.n.Load() == 2 },
			5*time.Second, time.Millisecond)
		secondCtx, cancelSecond := context.WithTimeout(ctx, 10*time.Second)
		defer cancelSecond()
		secondDone := make(chan error, 1)
		go func() { secondDone <- second.Lock(secondCtx) }()
		require.Eventually(t, func() bool { return c.Waiters().Waiters == 2 }, 5*time.Second, time.Millisecond)

		restore := core.FailNextWokenAttempt(firstCtx, cancelFirst)
		defer restore()
		require.NoError(t, holder.Unlock(ctx))
		require.ErrorIs(t, <-firstDone, context.Canceled)
		require.NoError(t, <-secondDone, "the wake-up the failed attempt consumed was not passed on")
		require.NoError(t, second.Unlock(ctx))
	})
}

// Defect 8: the hold's mutex was taken before anything watched ctx, so a
// Lock waited past its ctx behind an earlier abandoned attempt of the same
// owner that was stuck in go-redis's read timeout.
func TestLockReturnsAtCtxEndBehindAbandonedAttempt(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t, func(o *redis.Options) {
			o.ReadTimeout = 3 * time.Second
			o.MaxRetries = -1
		})
		c := clientOn(t, viaProxy)
		redistest.LoadScripts(t, viaProxy)
		l := newLock(t, c, name)
		proxy.Blackhole(true)
		t.Cleanup(func() { proxy.Blackhole(false); proxy.ResetAll() })

		try := func(op func(context.Context) error) time.Duration {
			cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := op(cctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			return time.Since(start)
		}
		try(l.Lock) // abandoned; its attempt waits out the read timeout
		require.Less(t, try(l.Lock), time.Second, "Lock waited behind the abandoned attempt")
		require.Less(t, try(l.TryLock), time.Second, "TryLock waited behind the abandoned attempt")
		require.Less(t, try(l.Unlock), time.Second, "Unlock waited behind the abandoned attempt")
		require.Less(t, try(func(ctx context.Context) error { return l.SetLease(ctx, time.Minute) }), time.Second,
			"SetLease waited behind the abandoned attempt")
	})
}

// Defect 9: the client kept a record of every lock taken with an explicit
// lease and left to expire, so a service locking per request leaked
// memory without bound.
func TestExpiredExplicitLeasesAreForgotten(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := newClient(t, b)
		n := 100_000
		switch {
		case b.IsMini(): // every script scans miniredis's keys
			n = 2_000
		case testing.Short() || raceEnabled:
			n = 5_000 // the scale run is the plain one on redis-server
		}
		prefix := redistest.Name(t) + ":"
		var wg sync.WaitGroup
		const workers = 16
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := w; i < n; i += workers {
					l, err := reentrant.New(c, prefix+strconv.Itoa(i))
					if err == nil {
						err = l.TryLockLease(ctx, 5*time.Millisecond)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return core.Records(c) == 0 }, 30*time.Second, 10*time.Millisecond,
			"the client still keeps records of %d expired leases", core.Records(c))
	})
}

// Defect 10: a renewal that ran on the server after the last release, and
// whose reply was read before Unlock stopped the renewal, ended the holding
// period with ErrLockLost although Unlock succeeded.
func TestCleanUnlockIsNotReportedAsLoss(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t)
		c := clientOn(t, viaProxy, shortWatchdog(300*time.Millisecond))
		redistest.LoadScripts(t, viaProxy)
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))

		// The release runs; before its reply reaches Unlock, the watchdog
		// renews and finds the lock gone. go-redis then re-sends the
		// release, which answers from its latch.
		proxy.DropNextReplyThen("evalsha", func() {
			lost := c.WatchdogStats().Lost
			deadline := time.Now().Add(5 * time.Second)
			for c.WatchdogStats().Lost == lost && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond) // polling a counter, not synchronising
			}
		})
		require.NoError(t, l.Unlock(ctx))
		require.Equal(t, 1, proxy.Dropped())
		<-l.Done()
		require.NoError(t, l.Err(), "a clean Unlock was reported as a loss")
	})
}

// A nil ctx panicked in every entry point, while the docs promise "never a
// panic".
func TestNilContextIsAnErrorNotAPanic(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		var nilCtx context.Context
		c := newClient(t, b)
		l := newLock(t, c, redistest.Name(t))
		for what, op := range map[string]func() error{
			"Lock":         func() error { return l.Lock(nilCtx) },
			"TryLock":      func() error { return l.TryLock(nilCtx) },
			"LockLease":    func() error { return l.LockLease(nilCtx, time.Second) },
			"TryLockLease": func() error { return l.TryLockLease(nilCtx, time.Second) },
			"SetLease":     func() error { return l.SetLease(nilCtx, time.Second) },
			"Unlock":       func() error { return l.Unlock(nilCtx) },
			"ForceUnlock":  func() error { _, err := l.ForceUnlock(nilCtx); return err },
			"IsLocked":     func() error { _, err := l.IsLocked(nilCtx); return err },
			"IsHeld":       func() error { _, err := l.IsHeld(nilCtx); return err },
			"HoldCount":    func() error { _, err := l.HoldCount(nilCtx); return err },
			"TTL":          func() error { _, err := l.TTL(nilCtx); return err },
			"Owner":        func() error { _, err := l.Owner(nilCtx); return err },
		} {
			var err error
			require.NotPanics(t, func() { err = op() }, what)
			require.ErrorIs(t, err, rlock.ErrInvalidArgument, what)
		}
	})
}

// Unlock after Close returned ErrClosed and left the lock held until its
// lease ran out; it releases now.
func TestUnlockAfterCloseReleases(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		c, err := rlock.NewClient(b.NewClient(t))
		require.NoError(t, err)
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Lock(l.Ctx())) // re-entry
		require.NoError(t, c.Close())
		require.ErrorIs(t, l.Err(), rlock.ErrClosed)
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, l.Unlock(ctx))
		requireFree(t, b, name)
	})
}

// A blocking Lock returned the first transient Redis error (an i/o timeout
// during a short outage) with most of its ctx left; it keeps trying until
// ctx ends now.
func TestLockKeepsTryingThroughTransientErrors(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t, func(o *redis.Options) {
			o.ReadTimeout = 100 * time.Millisecond
			o.DialTimeout = 100 * time.Millisecond
			o.MaxRetries = -1
		})
		c := clientOn(t, viaProxy)
		redistest.LoadScripts(t, viaProxy)
		holder := newLock(t, newClient(t, b), name)
		require.NoError(t, holder.LockLease(ctx, time.Minute))

		// The waiter's first attempt meets the outage.
		proxy.Blackhole(true)
		lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		got := make(chan error, 1)
		go func() { got <- newLock(t, c, name).Lock(lctx) }()
		require.Never(t, func() bool { return len(got) > 0 }, 500*time.Millisecond, 10*time.Millisecond,
			"Lock returned a transient error with its ctx alive")
		proxy.Blackhole(false)
		proxy.ResetAll()
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-got)

		// When ctx ends during an outage, the error says both.
		proxy.Blackhole(true)
		dctx, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel2()
		err := newLock(t, c, name).Lock(dctx) // held by the waiter above
		require.ErrorIs(t, err, context.DeadlineExceeded)
		var netErr interface{ Timeout() bool }
		require.True(t, errors.As(err, &netErr), "the last Redis error is wrapped too: %v", err)
	})
}

// scriptCounter is a go-redis hook that counts the script calls answered
// without an error (a NOSCRIPT before the EVAL fallback is not counted).
type scriptCounter struct{ n atomic.Int64 }

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); err == nil && (name == "evalsha" || name == "eval") {
			h.n.Add(1)
		}
		return err
	}
}

func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Issue 15: every last release left a latch key of its own, living the
// replay window, so keys (and, on miniredis, the time of every command)
// grew with the release rate. An owner's releases share one latch key;
// since the latch-per-lock fix, every owner's releases of a lock do.
func TestLatchKeysBoundedByOwners(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		rdb := b.NewClient(t)
		c := newClient(t, b)
		a, z := newLock(t, c, name), newLock(t, c, name)
		for range 50 {
			for _, l := range []*reentrant.Lock{a, z} {
				require.NoError(t, l.Lock(ctx))
				require.NoError(t, l.Unlock(ctx))
			}
		}
		keys, err := rdb.Keys(ctx, "*"+name+"*").Result()
		require.NoError(t, err)
		require.Equal(t, 1, len(keys), "one latch key per lock")
	})
}

// Issue 15 (latch per owner): the re-send of a last release whose reply
// was lost answers from its latch even when another owner took the lock
// and released it in between, and when the same owner's earlier release
// left its own record.
func TestResentUnlockAfterAnotherOwnersCycle(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t)
		c := clientOn(t, viaProxy)
		redistest.LoadScripts(t, viaProxy)
		l := newLock(t, c, name)
		other := newLock(t, newClient(t, b), name)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Unlock(ctx)) // an earlier record of the owner's
		require.NoError(t, l.Lock(ctx))
		proxy.DropNextReplyThen("evalsha", func() {
			require.NoError(t, other.Lock(ctx))
			require.NoError(t, other.Unlock(ctx))
		})
		require.NoError(t, l.Unlock(ctx), "the re-send answers from the latch")
		require.Equal(t, 1, proxy.Dropped())
		<-l.Done()
		require.NoError(t, l.Err(), "a clean Unlock was reported as a loss")
	})
}

// Issue 15 (latch per owner): a re-sent last release still tells a lost
// hold from its own earlier run: when the holds were gone before the
// release ran (here deleted behind the owner's back), the owner's earlier
// latch record does not make it a success.
func TestUnlockOfLostHoldIsNotAnsweredFromEarlierLatch(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		rdb := b.NewClient(t)
		c := newClient(t, b)
		l := newLock(t, c, name)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Unlock(ctx)) // leaves the owner's latch record
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, rdb.Del(ctx, name).Err())
		require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld)
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
	})
}

// A very late copy of an owner's last release (left in a frozen server's
// socket, run after the owner took the lock again) must not release the
// new holding: the lock's latch still names that request, so the copy is
// answered as the original was and changes nothing.
func TestLateCopyOfLastReleaseSparesTheNextHolding(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		rdb := b.NewClient(t)
		l := newLock(t, newClient(t, b), name)
		field, err := l.Owner(ctx)
		require.NoError(t, err)
		latch := base.DerivedKey(base.LatchPrefix, name)
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Unlock(ctx))
		records, err := rdb.Get(ctx, latch).Result()
		require.NoError(t, err, "the last release records its request in the lock's latch")
		request, _, _ := strings.Cut(strings.TrimPrefix(records, "\n"), "\n") // the newest record
		require.NoError(t, l.Lock(ctx))

		// The late copy: the same arguments the release sent; and again
		// with an rlock client registered as waiting, which a release
		// designates after the same latch write.
		registry := base.Waiters(name)
		for _, registered := range []bool{false, true} {
			keys := []string{name, base.Channel(name), latch}
			if registered {
				keys = append(keys, registry)
				require.NoError(t, rdb.ZAdd(ctx, registry, redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: waiters.Tag("other-" + name)}).Err())
			}
			res, err := lua.ReleaseReply(lua.Unlock.Run(ctx, rdb, keys,
				int64(30000), field, 1, base.UnlockMessage, int64(60000), "c", request, 2))
			require.NoError(t, err)
			require.Equal(t, []int64{1, 0}, res, "answered as the original release was (registered: %v)", registered)
			n, err := l.HoldCount(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, n, "the late copy released the owner's next holding (registered: %v)", registered)
		}
		require.NoError(t, l.Unlock(ctx))
	})
}

// After a TryLock whose reply was lost and whose settling read failed too,
// the hold it may have taken is given back in the background. HoldCount,
// the owner's next call, read the server's count without waiting for that:
// it answered 1, and the owner believed it held a lock that was being given
// back (seen as an exclusion violation in the fault runs). HoldCount now
// settles first, as every call of the owner does.
func TestHoldCountAfterUnknownAcquireSettlesFirst(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		proxy, viaProxy := b.NewProxiedClient(t, func(o *redis.Options) { o.MaxRetries = -1 })
		// Without replica sync, the acquire is the first command: a lost
		// reply to INFO replication, before it, is a certain failure.
		c := clientOn(t, viaProxy, rlock.WithoutReplicaSync())
		redistest.LoadScripts(t, viaProxy)
		l := newLock(t, c, name)
		proxy.DropReplies("$", 2) // the acquire's reply, then the settling read's
		require.Error(t, l.TryLock(ctx), "the reply was lost")
		proxy.SetLatency(200 * time.Millisecond) // the background give-back takes two slow round trips
		n, err := l.HoldCount(ctx)
		proxy.SetLatency(0)
		require.NoError(t, err)
		require.Zero(t, n, "HoldCount reported a hold that is being given back")
		require.Eventually(t, func() bool {
			n, err := b.NewClient(t).Exists(ctx, name).Result()
			return err == nil && n == 0
		}, 5*time.Second, 5*time.Millisecond)
	})
}

// Regression (issue 15): a last release with rlock waiters registered read
// the owner's replay latch (GET) and then wrote it (SET): two commands
// where the uncontended release's one SET ... GET does both. It now takes
// the same path up to the designation, so a contended grant runs one
// command less.
func TestContendedLastReleaseReadsTheLatchInItsWrite(t *testing.T) {
	b := redistest.Real(t) // INFO commandstats: real Redis only
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := redistest.Name(t)
	holder := newLock(t, clientOn(t, b.NewClient(t)), name)
	wc := clientOn(t, b.NewClient(t))
	waiter := newLock(t, wc, name)
	require.NoError(t, holder.Lock(ctx))
	done := make(chan error, 1)
	go func() { done <- waiter.Lock(ctx) }()
	admin := b.NewClient(t)
	require.Eventually(t, func() bool {
		return wc.Waiters().Waiters == 1 && admin.Exists(ctx, base.Waiters(name)).Val() == 1
	}, 10*time.Second, time.Millisecond)
	stats := redistest.CommandsDuring(t, admin, func() {
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-done)
	})
	require.Zero(t, stats["get"], "latch reads besides its write: %v", stats)
	require.Equal(t, int64(1), stats["set"], "latch writes: %v", stats)
	require.NoError(t, waiter.Unlock(ctx))
}

// Regression (issue 15): every refused attempt of a waiting call extended
// the lock's waiter registry (PEXPIRE) to the registration's life, which
// under contention, where the lock is granted again with a full lease
// between attempts, was every time: a command per attempt. The registry
// is now extended to twice the registration's life when it would not
// outlive it, so a run of registrations extends it once.
func TestRegistrationsExtendTheRegistryOnce(t *testing.T) {
	b := redistest.Real(t) // INFO commandstats: real Redis only
	ctx := context.Background()
	name := redistest.Name(t)
	rdb := b.NewClient(t)
	redistest.LoadScripts(t, rdb)
	holder := newLock(t, clientOn(t, b.NewClient(t)), name, reentrant.WithLease(time.Minute))
	require.NoError(t, holder.Lock(ctx))
	registry := base.Waiters(name)
	const attempts = 5
	stats := redistest.CommandsDuring(t, rdb, func() {
		for i := range attempts {
			// granted again, with a full lease (a little longer each time, so
			// that each registration outlives the one before whatever the
			// clock's millisecond)
			require.NoError(t, rdb.PExpire(ctx, name, time.Minute+time.Duration(i)*time.Second).Err())
			res, err := lua.AcquireReply(lua.Lock.Run(ctx, rdb, []string{name, base.DerivedKey(base.TokenPrefix, name), registry},
				int64(30000), "waiter:"+strconv.Itoa(i), 0, "0", waiters.Tag("waiting-"+name), "0", int64(1000)))
			require.NoError(t, err)
			require.Equal(t, int64(0), res[0], "refused: the holder holds the lock")
		}
	})
	pexpires := stats["pexpire"] - attempts // the test's own
	require.Equal(t, int64(1), pexpires, "registry extensions in %d registrations", attempts)
	require.NoError(t, holder.Unlock(ctx))
}

// Regression (issue 15): a contended last release published the tags of
// the two clients it designated in a message each, then the "0": three
// messages to every subscriber of the lock, per release. The two tags now
// go in one message, which a Redisson subscriber still decodes as a Java
// long (and ignores, as it ignores any number but 0 and 1). An older
// rlock client's longer tag still goes alone, as that client reads it.
func TestContendedReleaseDesignatesInOneMessage(t *testing.T) {
	const older = "4611686018427387905" // the largest tag of an rlock before this change
	a, b := waiters.Tag("a"), waiters.Tag("b")
	redistest.Each(t, func(t *testing.T, be *redistest.Backend) {
		for _, c := range []struct {
			name string
			tags []string
			want []string // what a subscriber hears
		}{
			{"current", []string{a, b}, []string{"1" + nineDigits(t, a) + nineDigits(t, b), base.UnlockMessage}},
			{"older", []string{older, b}, []string{older, b, base.UnlockMessage}},
		} {
			t.Run(c.name, func(t *testing.T) {
				got := releaseMessages(t, be, c.tags)
				require.Equal(t, c.want, got, "designations, then the unlock message")
				for _, m := range got {
					n, err := strconv.ParseInt(m, 10, 64)
					require.NoError(t, err, "a Redisson subscriber decodes %q as a Java long", m)
					require.True(t, n > 1 || m == base.UnlockMessage, "Redisson acts on 0 and 1")
				}
			})
		}
	})
}

// nineDigits is tag padded with zeros to nine digits.
func nineDigits(t *testing.T, tag string) string {
	n, err := strconv.Atoi(tag)
	require.NoError(t, err)
	return fmt.Sprintf("%09d", n)
}

// releaseMessages releases a lock with the clients of tags registered as
// waiting, and returns what a subscriber of its channel heard, up to the
// unlock message.
func releaseMessages(t *testing.T, b *redistest.Backend, tags []string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := redistest.Name(t)
	rdb := b.NewClient(t)
	holder := newLock(t, clientOn(t, rdb), name)
	require.NoError(t, holder.Lock(ctx))
	for i, tag := range tags {
		live := float64(time.Now().Add(time.Minute).UnixMilli() + int64(i))
		require.NoError(t, rdb.ZAdd(ctx, base.Waiters(name), redis.Z{Score: live, Member: tag}).Err())
	}
	sub := b.NewClient(t).Subscribe(ctx, base.Channel(name))
	defer func() { _ = sub.Close() }()
	_, err := sub.Receive(ctx) // the subscription's confirmation
	require.NoError(t, err)

	require.NoError(t, holder.Unlock(ctx))
	var got []string
	for len(got) == 0 || got[len(got)-1] != base.UnlockMessage {
		select {
		case m := <-sub.Channel():
			got = append(got, m.Payload)
		case <-ctx.Done():
			t.Fatalf("no unlock message; heard %q", got)
		}
	}
	return got
}

// Latch keys piled up with short-lived handles: every handle is an owner,
// and every owner's last release left a latch key of its own for the
// replay window, so a service that makes a handle per request left one
// key per release (thousands on miniredis, whose commands slowed with
// them). The releases of a lock now share one latch key, whatever the
// handles and owners.
func TestLatchKeysBoundedWithHandlePerOperation(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		name := redistest.Name(t)
		rdb := b.NewClient(t)
		c := newClient(t, b)
		const releases = 100
		for range releases {
			l := newLock(t, c, name) // a new handle, so a new owner, per operation
			require.NoError(t, l.Lock(ctx))
			require.NoError(t, l.Unlock(ctx))
		}
		keys, err := rdb.Keys(ctx, "*"+name+"*").Result()
		require.NoError(t, err)
		require.LessOrEqual(t, len(keys), 1, "%d keys left by %d releases of one lock, among them %q", len(keys), releases, keys[0])
		records, err := rdb.Get(ctx, base.DerivedKey(base.LatchPrefix, name)).Result()
		require.NoError(t, err)
		// At least the lock's last 32 releases; the older ones are cut
		// back to 31 once longer than 48 records (see set_latch).
		kept := strings.Count(records, "\n")
		require.GreaterOrEqual(t, kept, 32, "the latch keeps at least the lock's last 32 releases")
		require.LessOrEqual(t, kept, 49, "the latch is cut back once longer than 48 records")
	})
}
