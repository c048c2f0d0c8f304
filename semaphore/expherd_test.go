package semaphore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock/internal/lua"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/internal/waiters"
	"github.com/rlock-go/rlock/semaphore"
)

// expAttemptCounter counts the expirable semaphore's acquire scripts a
// Redis client sends (alone or in a replica-sync pipeline).
type expAttemptCounter struct{ n atomic.Int64 }

func (h *expAttemptCounter) count(cmd redis.Cmder) {
	if a := cmd.Args(); len(a) > 1 && (a[1] == lua.ExpAcquire.Hash() || a[1] == lua.Source(lua.ExpAcquire)) {
		h.n.Add(1)
	}
}

func (h *expAttemptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *expAttemptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}
func (h *expAttemptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

// How a holder of expHerdRun makes a permit available again.
type giveBack int

const (
	byRelease giveBack = iota // Permit.Release
	byExpiry                  // a lease of 30 ms that passes
	byAdding                  // AddPermits(1), keeping its permit
)

// expHerdRun runs clients × waiters goroutines (each client its own
// connection and hub) on an expirable semaphore of one permit, with no
// poll within the run, rounds times each: each takes a permit and makes
// one available again as how says (the next waiter gets it). It returns
// the refused acquire attempts per grant.
func expHerdRun(t *testing.T, b *redistest.Backend, clients, waiters, rounds int, how giveBack) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := redistest.Name(t)
	counters := make([]*expAttemptCounter, clients)
	sems := make([]*semaphore.Expirable, clients)
	for i := range clients {
		rdb := b.NewClient(t)
		counters[i] = &expAttemptCounter{}
		rdb.AddHook(counters[i])
		sems[i] = newExp(t, clientOn(t, rdb), name, semaphore.WithPoll(time.Hour))
	}
	_, err := sems[0].TrySetPermits(ctx, 1)
	require.NoError(t, err)
	var (
		wg     sync.WaitGroup
		inside atomic.Int64
		errs   = make(chan error, clients*waiters*rounds)
	)
	for i := range clients {
		for range waiters {
			wg.Go(func() {
				for range rounds {
					switch how {
					case byExpiry:
						if _, err := sems[i].Acquire(ctx, semaphore.WithLease(30*time.Millisecond)); err != nil {
							errs <- err
							return
						}
						continue
					case byAdding:
						_, err := sems[i].Acquire(ctx, semaphore.WithLease(time.Hour))
						if err == nil {
							err = sems[i].AddPermits(ctx, 1)
						}
						if err != nil {
							errs <- err
							return
						}
						continue
					}
					p, err := sems[i].Acquire(ctx)
					if err != nil {
						errs <- err
						return
					}
					if inside.Add(1) != 1 {
						errs <- fmt.Errorf("two holders of one permit")
					}
					inside.Add(-1)
					if err := p.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	total := int64(0)
	for _, c := range counters {
		total += c.n.Load()
	}
	n := int64(clients * waiters * rounds)
	return float64(total-n) / float64(n)
}

// TestExpirableReleaseWakesAboutOneWaiterAcrossClients: a release of an
// expirable semaphore's permit wakes about one waiter in all, not one in
// every client (as TestReleaseWakesAboutOneWaiterAcrossClients for the
// counting semaphore). Before, every client's hub woke min(count, its
// waiters), Redisson's rule.
func TestExpirableReleaseWakesAboutOneWaiterAcrossClients(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const clients, waiters = 4, 6
		perGrant := expHerdRun(t, b, clients, waiters, 5, byRelease)
		t.Logf("%d clients x %d waiters, releases: %.2f refused acquire attempts per grant", clients, waiters, perGrant)
		require.LessOrEqual(t, perGrant, 2.0, "a release of one permit woke waiters in several clients")
	})
}

// TestExpiredPermitWakesAboutOneWaiterAcrossClients: a permit whose lease
// passes reaches about one waiter in all. Before, every waiter of every
// client woke at the nearest expiry and tried.
func TestExpiredPermitWakesAboutOneWaiterAcrossClients(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const clients, waiters = 4, 3
		perGrant := expHerdRun(t, b, clients, waiters, 2, byExpiry)
		t.Logf("%d clients x %d waiters, lease expiry: %.2f refused acquire attempts per grant", clients, waiters, perGrant)
		require.LessOrEqual(t, perGrant, 2.0, "an expired permit woke waiters in several clients")
	})
}

// TestExpirableAddPermitsWakesAboutOneWaiterAcrossClients: AddPermits(1)
// on an expirable semaphore wakes about one waiter in all. Before, it
// designated nobody (the expirable semaphore's waiters did not register),
// so every client's hub woke one waiter.
func TestExpirableAddPermitsWakesAboutOneWaiterAcrossClients(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const clients, waiters = 4, 6
		perGrant := expHerdRun(t, b, clients, waiters, 3, byAdding)
		t.Logf("%d clients x %d waiters, AddPermits(1): %.2f refused acquire attempts per grant", clients, waiters, perGrant)
		require.LessOrEqual(t, perGrant, 2.0, "AddPermits(1) woke waiters in several clients")
	})
}

// registerGone registers a client that is gone (it crashed after a
// refused attempt; its registration has not lapsed) as waiting for
// semaphore name, through the registry's script, so that releases
// designate it first.
func registerGone(t *testing.T, ctx context.Context, rdb redis.Cmdable, name string) {
	t.Helper()
	res, err := lua.SemAcquire.Run(ctx, rdb, []string{name, "{" + name + "}:rlock_ops", "{" + name + "}:rlock_waiters"},
		1, "gone-client-attempt-"+name, 60000, waiters.CountingDesignation("12345"), 1500, "0").Int64Slice()
	require.NoError(t, err)
	require.Equal(t, int64(0), res[0], "refused, and registered")
}

// TestExpirableDesignatedClientGoneCostsAtMostAPoll: a release of an
// expirable semaphore's permit designates a registered client that is
// gone, so the other clients' hubs drop the count; a waiter of another
// client still gets the permit, at its next poll.
func TestExpirableDesignatedClientGoneCostsAtMostAPoll(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		name := redistest.Name(t)
		waiter := newExp(t, clientOn(t, b.NewClient(t)), name, semaphore.WithPoll(200*time.Millisecond))
		holder := newExp(t, clientOn(t, b.NewClient(t)), name)
		_, err := holder.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		p, err := holder.TryAcquire(ctx, semaphore.WithLease(time.Hour))
		require.NoError(t, err)
		require.NotNil(t, p)
		direct := b.NewClient(t)
		registerGone(t, ctx, direct, name)

		done := make(chan error, 1)
		go func() {
			_, err := waiter.Acquire(ctx, semaphore.WithLease(time.Hour))
			done <- err
		}()
		registry := "{" + name + "}:rlock_waiters"
		require.Eventually(t, func() bool { return direct.ZCard(ctx, registry).Val() == 2 },
			5*time.Second, 5*time.Millisecond, "the waiter's refused attempt registers its client")
		require.NoError(t, p.Release(ctx))
		require.NoError(t, <-done, "the waiter got the permit at its poll")
	})
}

// TestExpiryWatcherGoneCostsAtMostAPoll: the client watching the nearest
// expiry is gone (its watch has not lapsed), so nobody reclaims the
// permit at its expiry; a waiter of another client still gets it, at its
// next poll, its own attempt reclaiming it.
func TestExpiryWatcherGoneCostsAtMostAPoll(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		name := redistest.Name(t)
		waiter := newExp(t, clientOn(t, b.NewClient(t)), name, semaphore.WithPoll(200*time.Millisecond))
		holder := newExp(t, clientOn(t, b.NewClient(t)), name)
		_, err := holder.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		direct := b.NewClient(t)
		// A gone client watches every expiry up to an hour from now.
		until := time.Now().Add(time.Hour).UnixMilli()
		require.NoError(t, direct.Set(ctx, "{"+name+"}:rlock_watch",
			fmt.Sprintf("%d:%s", until, waiters.CountingDesignation("12345")), time.Hour).Err())
		p, err := holder.TryAcquire(ctx, semaphore.WithLease(300*time.Millisecond))
		require.NoError(t, err)
		require.NotNil(t, p)

		start := time.Now()
		_, err = waiter.Acquire(ctx, semaphore.WithLease(time.Hour))
		require.NoError(t, err, "the waiter got the permit at a poll after its expiry")
		require.Less(t, time.Since(start), 5*time.Second)
	})
}

// TestShortenedLeaseReachesWaiters: a waiter knows the nearest expiry,
// an hour away, and polls hourly; another client shortens that permit's
// lease. Its client takes the expiry watch (the new expiry is nearer
// than the one watched), reclaims the permit when the lease passes and
// designates the waiter's client. Before, the waiter slept until the
// expiry it had been told (its poll, here an hour).
func TestShortenedLeaseReachesWaiters(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		name := redistest.Name(t)
		wc := clientOn(t, b.NewClient(t))
		waiter := newExp(t, wc, name, semaphore.WithPoll(time.Hour))
		holder := newExp(t, clientOn(t, b.NewClient(t)), name)
		other := newExp(t, clientOn(t, b.NewClient(t)), name)
		_, err := holder.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		p, err := holder.TryAcquire(ctx, semaphore.WithLease(time.Hour))
		require.NoError(t, err)
		require.NotNil(t, p)

		done := make(chan error, 1)
		go func() {
			_, err := waiter.Acquire(ctx, semaphore.WithLease(time.Hour))
			done <- err
		}()
		require.Eventually(t, func() bool { return wc.Waiters().Waiters == 1 }, 5*time.Second, time.Millisecond)
		ok, err := other.UpdateLease(ctx, p.ID(), 50*time.Millisecond)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, <-done, "the waiter got the permit once its shortened lease passed")
	})
}

// TestExpiryWatcherCallFailingStopsWatching: a client watches the nearest
// expiry for its waiter (poll an hour); the holder's lease is then made
// longer, so at the watched expiry the watcher's call reclaims nothing and
// moves the watch to the new expiry, but every reply to it is lost. The
// watcher ended at that failed call, while the key said its client
// watched the new expiry: nobody reclaimed the permit when the lease
// passed, and the waiter slept until its poll. A failed call is now tried
// again (the script is safe to run twice) for as long as the watch's key
// lives.
func TestExpiryWatcherCallFailingStopsWatching(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		name := redistest.Name(t)
		proxy, rdb := b.NewProxiedClient(t, func(o *redis.Options) { o.ReadTimeout = 100 * time.Millisecond })
		redistest.LoadScripts(t, rdb)
		attempts := &expAttemptCounter{}
		rdb.AddHook(attempts)
		wc := clientOn(t, rdb)
		waiter := newExp(t, wc, name, semaphore.WithPoll(time.Hour))
		holder := newExp(t, clientOn(t, b.NewClient(t)), name)
		_, err := holder.TrySetPermits(ctx, 1)
		require.NoError(t, err)
		p, err := holder.TryAcquire(ctx, semaphore.WithLease(400*time.Millisecond))
		require.NoError(t, err)
		require.NotNil(t, p)

		done := make(chan error, 1)
		go func() {
			_, err := waiter.Acquire(ctx, semaphore.WithLease(time.Hour))
			done <- err
		}()
		// The waiter's first attempt and its retry at its subscription's
		// confirmation; then it sleeps (its poll is an hour): the next
		// scripts this client sends are its watcher's, at the expiry
		// 400 ms out.
		require.Eventually(t, func() bool { return wc.Waiters().Waiters == 1 && attempts.n.Load() == 2 },
			5*time.Second, time.Millisecond)
		proxy.DropReplies("evalsha", 8)
		ok, err := holder.UpdateLease(ctx, p.ID(), 1500*time.Millisecond)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, <-done, "the waiter got the permit once the longer lease passed")
		require.Positive(t, proxy.Dropped(), "the watcher's call at the first expiry lost its replies")
	})
}
