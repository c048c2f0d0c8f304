package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/latch"
	"github.com/rlock-go/rlock/semaphore"
)

// semClient is one rlock client whose every connection goes through its
// own lost-reply proxy.
type semClient struct {
	proxy *redistest.Proxy
	c     *rlock.Client
}

func newSemClient(t *testing.T, b *redistest.Backend, opts ...rlock.ClientOption) semClient {
	t.Helper()
	proxy, rdb := b.NewProxiedClient(t, func(o *redis.Options) { o.MaxRetries = 3 })
	c, err := rlock.NewClient(rdb, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return semClient{proxy: proxy, c: c}
}

// TestFaultSemaphoreNeverOverPermits: clients × workers take and give back
// permits of one counting semaphore while the replies of random scripts
// are lost after they ran (go-redis re-sends them). The model lives
// outside Redis: a counter of the workers inside, checked against the
// permits at every entry. At the end the count is back where it started:
// no re-sent acquire took twice, no re-sent release returned twice.
func TestFaultSemaphoreNeverOverPermits(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const permits, clients, workers, rounds = 3, 4, 4, 25
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		redistest.LoadScripts(t, b.NewClient(t))
		name := redistest.Name(t)
		cs := make([]semClient, clients)
		sems := make([]*semaphore.Semaphore, clients)
		for i := range cs {
			cs[i] = newSemClient(t, b)
			s, err := semaphore.New(cs[i].c, name, semaphore.WithPoll(50*time.Millisecond))
			require.NoError(t, err)
			sems[i] = s
		}
		ok, err := sems[0].TrySetPermits(ctx, permits)
		require.NoError(t, err)
		require.True(t, ok)

		var (
			inside, peak, over atomic.Int64
			wg                 sync.WaitGroup
			errs               = make(chan error, clients*workers)
		)
		for i := range clients {
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
					for range rounds {
						if rng.IntN(3) == 0 { // lose the reply of this client's next script
							cs[i].proxy.DropNextReply("evalsha")
						}
						if err := sems[i].Acquire(ctx, 1); err != nil {
							errs <- fmt.Errorf("acquire: %w", err)
							return
						}
						n := inside.Add(1)
						if n > permits {
							over.Add(1)
						}
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
						_, _ = sems[i].AvailablePermits(ctx) // work: a round trip inside
						inside.Add(-1)
						if err := sems[i].Release(ctx, 1); err != nil {
							errs <- fmt.Errorf("release: %w", err)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		dropped := 0
		for _, c := range cs {
			dropped += c.proxy.Dropped()
		}
		n, err := sems[0].AvailablePermits(ctx)
		require.NoError(t, err)
		t.Logf("%d acquisitions, %d replies lost, peak %d of %d permits", clients*workers*rounds, dropped, peak.Load(), permits)
		require.Zero(t, over.Load(), "more holders than permits")
		require.Positive(t, dropped, "no reply was lost")
		require.EqualValues(t, permits, n, "permits taken twice or returned twice")
	})
}

// TestFaultExpirableDeadHolderReturnsWithinLease: a client holds every
// permit of an expirable semaphore without a lease (its watchdog renews
// them), then is cut off (a black hole: it stops renewing, as a killed
// process does). Another client's blocked Acquire gets a permit once the
// last renewed lease runs out, not before (checked against the holder's
// own Until), and within a lease and a poll after it; the holder's permit
// reports its loss.
func TestFaultExpirableDeadHolderReturnsWithinLease(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		const lease = 2 * time.Second
		const poll = 100 * time.Millisecond
		ctx := context.Background()
		holder := newSemClient(t, b, rlock.WithWatchdogLease(lease))
		other := newSemClient(t, b)
		name := redistest.Name(t)
		he, err := semaphore.NewExpirable(holder.c, name, semaphore.WithPoll(poll))
		require.NoError(t, err)
		oe, err := semaphore.NewExpirable(other.c, name, semaphore.WithPoll(poll))
		require.NoError(t, err)
		ok, err := he.TrySetPermits(ctx, 2)
		require.NoError(t, err)
		require.True(t, ok)
		p1, err := he.Acquire(ctx)
		require.NoError(t, err)
		p2, err := he.Acquire(ctx)
		require.NoError(t, err)
		first := p1.Until()
		require.Eventually(t, func() bool { return p1.Until().After(first.Add(lease / 4)) },
			5*lease, 10*time.Millisecond, "the watchdog renews a permit taken without a lease")

		holder.proxy.Blackhole(true)
		cut := time.Now()
		until := p1.Until()
		if u := p2.Until(); u.After(until) {
			until = u
		}
		actx, cancel := context.WithTimeout(ctx, 3*lease+time.Second)
		defer cancel()
		got, err := oe.Acquire(actx)
		granted := time.Now()
		require.NoError(t, err, "the dead holder's permits did not come back within %v", 3*lease)
		require.Len(t, got.ID(), 32)
		require.False(t, granted.Before(until), "a permit was granted at %v, before the holder's lease ran out at %v", granted, until)
		t.Logf("the holder's Until was %v after the cut; granted %v after the cut, %v after that Until",
			until.Sub(cut).Round(time.Millisecond), granted.Sub(cut).Round(time.Millisecond), granted.Sub(until).Round(time.Millisecond))
		select {
		case <-p1.Done():
		case <-time.After(2 * lease):
			t.Fatal("the cut-off holder's permit never reported its loss")
		}
		require.Error(t, p1.Err())
		holder.proxy.Blackhole(false)
		require.NoError(t, got.Release(ctx))
	})
}

// TestFaultLostReplyEverySemaphoreAndLatchScript: the reply of every
// semaphore and latch script is lost once after it ran, and go-redis
// re-sends it; the state after each call is the model's (a re-sent
// acquire takes once, a re-sent release returns once, a re-sent count
// down counts once).
func TestFaultLostReplyEverySemaphoreAndLatchScript(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		redistest.LoadScripts(t, b.NewClient(t))
		sc := newSemClient(t, b)
		name := redistest.Name(t)
		s, err := semaphore.New(sc.c, name+"-sem")
		require.NoError(t, err)
		e, err := semaphore.NewExpirable(sc.c, name+"-exp")
		require.NoError(t, err)
		l, err := latch.New(sc.c, name+"-latch")
		require.NoError(t, err)

		avail := func(want int64, what string) {
			t.Helper()
			n, err := s.AvailablePermits(ctx)
			require.NoError(t, err)
			require.Equal(t, want, n, what)
		}
		expState := func(wantAvail, wantHeld int64, what string) {
			t.Helper()
			a, err := e.AvailablePermits(ctx)
			require.NoError(t, err)
			h, err := e.AcquiredPermits(ctx)
			require.NoError(t, err)
			require.Equal(t, [2]int64{wantAvail, wantHeld}, [2]int64{a, h}, what)
		}
		count := func(want int64, what string) {
			t.Helper()
			n, err := l.Count(ctx)
			require.NoError(t, err)
			require.Equal(t, want, n, what)
		}
		dropped := 0
		lose := func(what string, call func() error) {
			t.Helper()
			sc.proxy.DropNextReply("evalsha")
			require.NoError(t, call(), what)
			dropped++
			require.Equal(t, dropped, sc.proxy.Dropped(), "%s: its reply was lost", what)
			sc.proxy.DropReplies("", 0)
		}

		lose("TrySetPermits", func() error { _, err := s.TrySetPermits(ctx, 5); return err })
		avail(5, "set once")
		lose("Acquire", func() error { return s.Acquire(ctx, 2) })
		avail(3, "a re-sent acquire takes once")
		lose("TryAcquire", func() error {
			ok, err := s.TryAcquire(ctx, 1)
			if err == nil && !ok {
				err = fmt.Errorf("not granted")
			}
			return err
		})
		avail(2, "a re-sent try-acquire takes once")
		lose("Release", func() error { return s.Release(ctx, 1) })
		avail(3, "a re-sent release returns once")
		lose("AddPermits", func() error { return s.AddPermits(ctx, 2) })
		avail(5, "added once")
		lose("AddPermits(-1)", func() error { return s.AddPermits(ctx, -1) })
		avail(4, "taken away once")
		lose("DrainPermits", func() error { _, err := s.DrainPermits(ctx); return err })
		avail(0, "drained")
		lose("Release after drain", func() error { return s.Release(ctx, 3) })
		avail(3, "returned once")

		lose("expirable TrySetPermits", func() error { _, err := e.TrySetPermits(ctx, 2); return err })
		expState(2, 0, "set once")
		var p1, p2 *semaphore.Permit
		lose("expirable Acquire", func() (err error) { p1, err = e.Acquire(ctx); return err })
		expState(1, 1, "a re-sent acquire takes one permit")
		lose("expirable TryAcquire", func() (err error) {
			p2, err = e.TryAcquire(ctx, semaphore.WithLease(time.Minute))
			if err == nil && p2 == nil {
				err = fmt.Errorf("not granted")
			}
			return err
		})
		expState(0, 2, "a re-sent try-acquire takes one permit")
		lose("UpdateLease", func() error {
			ok, err := e.UpdateLease(ctx, p2.ID(), 2*time.Minute)
			if err == nil && !ok {
				err = fmt.Errorf("not updated")
			}
			return err
		})
		expState(0, 2, "a lease update changes no count")
		lose("expirable Release", func() error { return e.Release(ctx, p1.ID()) })
		expState(1, 1, "a re-sent release returns once")
		lose("expirable TryRelease", func() error {
			ok, err := e.TryRelease(ctx, p2.ID())
			if err == nil && !ok {
				err = fmt.Errorf("not released")
			}
			return err
		})
		expState(2, 0, "a re-sent try-release returns once")
		lose("expirable AddPermits", func() error { return e.AddPermits(ctx, 1) })
		expState(3, 0, "added once")
		lose("expirable DrainPermits", func() error { _, err := e.DrainPermits(ctx); return err })
		expState(0, 0, "drained once")
		lose("expirable AddPermits after drain", func() error { return e.AddPermits(ctx, 2) })
		expState(2, 0, "added once")

		lose("latch TrySetCount", func() error { _, err := l.TrySetCount(ctx, 3); return err })
		count(3, "set once")
		lose("latch CountDown", func() error { return l.CountDown(ctx) })
		count(2, "a re-sent count down counts once")
		lose("latch CountDown", func() error { return l.CountDown(ctx) })
		count(1, "a re-sent count down counts once")
		lose("latch Delete", func() error { _, err := l.Delete(ctx); return err })
		count(0, "deleted")
	})
}
