package fair_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/redistest"
)

// mixedWaiter is one waiter of a mixed queue: a Redisson thread or an
// rlock handle.
type mixedWaiter struct {
	id   string
	lock func(ctx context.Context) error
	free func(ctx context.Context) error
}

// serverNow returns the server's clock in epoch ms.
func serverNow(t require.TestingT, rdb redis.UniversalClient) float64 {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	tm, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	return float64(tm.UnixMilli())
}

// queuedScores returns the queue's owners and scores (Redisson's view).
func queuedScores(t require.TestingT, rdb redis.UniversalClient, name string) ([]string, []float64) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	o, s, err := redistest.Scores(context.Background(), rdb, name)
	require.NoError(t, err)
	return o, s
}

func waitLen(t *testing.T, rdb redis.UniversalClient, name string, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) { o, _ := queuedScores(c, rdb, name); require.Len(c, o, n) },
		10*time.Second, time.Millisecond, "queue of %d", n)
}

// TestMixedQueueRedissonGrantKeepsRlockWaiters reproduces issue 14's first
// measurement: arrivals Redisson, rlock, Redisson, rlock, ... behind a
// Redisson holder. Each Redisson grant subtracts Redisson's thread wait
// time (5 min) from every queued score, which put every rlock waiter's
// score in the past; the next release pruned them without a word, and
// the lock sat free. Expected: grants in arrival order, each handed over
// by a wake-up (leases, queue polls and max-poll are far beyond the test's
// deadline), and no queued waiter ever with a score in the past.
func TestMixedQueueRedissonGrantKeepsRlockWaiters(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rdb := b.Universal(t)
		name := redistest.Name(t)
		rs := redistest.NewRedisson(b.Universal(t), false)
		rc := clientOn(t, b.Universal(t), rlock.WithMaxPoll(time.Hour))
		holder := rs.FairLock(name, 0)
		require.NoError(t, holder.Lock(ctx, time.Hour))

		var ws []mixedWaiter
		for i := 1; i <= 6; i++ {
			if i%2 == 1 {
				r := rs.FairLock(name, int64(i))
				ws = append(ws, mixedWaiter{fmt.Sprint("redisson-", i),
					func(ctx context.Context) error { return r.Lock(ctx, time.Hour) }, r.Unlock})
				continue
			}
			// The default queue timeout (30 s): polls every 10 s.
			l := newLock(t, rc, name, fair.WithLease(time.Hour))
			ws = append(ws, mixedWaiter{fmt.Sprint("rlock-", i), l.Lock, l.Unlock})
		}
		var mu sync.Mutex
		var order []string
		errs := make(chan error, len(ws))
		for i, w := range ws {
			go func() {
				if err := w.lock(ctx); err != nil {
					errs <- fmt.Errorf("%s: %w", w.id, err)
					return
				}
				mu.Lock()
				order = append(order, w.id)
				mu.Unlock()
				// Every queued waiter must still look alive to both
				// sides' pruning.
				_, scores := queuedScores(t, rdb, name)
				now := serverNow(t, rdb)
				for j, s := range scores {
					if s <= now {
						errs <- fmt.Errorf("after %s's grant: waiter %d's score lies %.0f ms in the past", w.id, j, now-s)
						return
					}
				}
				errs <- w.free(ctx)
			}()
			waitLen(t, rdb, name, i+1)
		}
		require.NoError(t, holder.Unlock(ctx))
		for range ws {
			require.NoError(t, <-errs)
		}
		want := make([]string, len(ws))
		for i, w := range ws {
			want[i] = w.id
		}
		require.Equal(t, want, order, "grants in arrival order")
	})
}

// TestMixedQueueRedissonGiveUpKeepsRlockWaiter reproduces issue 14's
// second measurement: a Redisson tryLock that gives up subtracts its wait
// from every waiter behind it; an rlock waiter behind it, whose score was
// now + its queue timeout, was pushed into the past and pruned. Here the
// Redisson wait (2 s) is longer than the rlock queue timeout (1.5 s).
func TestMixedQueueRedissonGiveUpKeepsRlockWaiter(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rdb := b.Universal(t)
		name := redistest.Name(t)
		rs := redistest.NewRedisson(b.Universal(t), false)
		rc := clientOn(t, b.Universal(t), rlock.WithMaxPoll(time.Hour))
		holder := newLock(t, rc, name, fair.WithLease(time.Hour))
		require.NoError(t, holder.Lock(ctx))
		quitter := rs.FairLock(name, 1)
		gaveUp := make(chan error, 1)
		go func() {
			ok, err := quitter.TryLock(ctx, 2*time.Second, time.Hour)
			if ok {
				err = fmt.Errorf("the Redisson waiter was granted a held lock")
			}
			gaveUp <- err
		}()
		waitLen(t, rdb, name, 1)
		l := newLock(t, rc, name, fair.WithLease(time.Hour), fair.WithQueueTimeout(1500*time.Millisecond))
		got := lockAsync(ctx, l)
		waitLen(t, rdb, name, 2)
		require.NoError(t, <-gaveUp)
		owners, scores := queuedScores(t, rdb, name)
		require.Equal(t, []string{owner(t, l)}, owners)
		require.Greater(t, scores[0], serverNow(t, rdb), "the rlock waiter's score was pushed into the past")
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-got)
		require.NoError(t, l.Unlock(ctx))
	})
}

// TestMixedQueueKeysKeepNoTTL reproduces issue 14's third measurement:
// rlock set a TTL on the queue keys, and Redisson's waiters were left in
// keys that then expired. Redisson never expires them (empty lists and
// sorted sets vanish on their own); neither may rlock.
func TestMixedQueueKeysKeepNoTTL(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rdb := b.Universal(t)
		name := redistest.Name(t)
		rs := redistest.NewRedisson(b.Universal(t), false)
		rc := clientOn(t, b.Universal(t))
		holder := newLock(t, rc, name, fair.WithLease(time.Hour))
		require.NoError(t, holder.Lock(ctx))
		r := rs.FairLock(name, 1)
		rgot := make(chan error, 1)
		go func() { rgot <- r.Lock(ctx, time.Hour) }()
		waitLen(t, rdb, name, 1)
		l := newLock(t, rc, name, fair.WithLease(time.Hour))
		got := lockAsync(ctx, l)
		waitLen(t, rdb, name, 2)
		for _, k := range []string{"redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}"} {
			ttl, err := rdb.PTTL(ctx, k).Result()
			require.NoError(t, err)
			require.Equal(t, time.Duration(-1), ttl, "%s must not expire", k)
		}
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-rgot)
		require.NoError(t, r.Unlock(ctx))
		require.NoError(t, <-got)
		require.NoError(t, l.Unlock(ctx))
	})
}

// TestPrunedRedissonWaiterIsTold reproduces issue 14's fourth
// measurement: pruning published nothing to the waiters it dropped. A
// Redisson waiter whose score lapsed while it still waits (its lock()
// waits for the holder's hour-long TTL) is pruned by an rlock script: it
// must be told, so that it polls and rejoins at once.
func TestPrunedRedissonWaiterIsTold(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rdb := b.Universal(t)
		name := redistest.Name(t)
		rs := redistest.NewRedisson(b.Universal(t), false)
		rc := clientOn(t, b.Universal(t))
		holder := newLock(t, rc, name, fair.WithLease(time.Hour))
		require.NoError(t, holder.Lock(ctx))
		r := rs.FairLock(name, 1)
		rgot := make(chan error, 1)
		go func() { rgot <- r.Lock(ctx, time.Hour) }()
		waitLen(t, rdb, name, 1)
		require.Eventually(t, func() bool { return rs.Waits() > 0 }, 10*time.Second, time.Millisecond, "asleep")
		// The score lapses, as a live Redisson waiter's does after five
		// minutes (Redisson issue #3004).
		require.NoError(t, rdb.ZAdd(ctx, "redisson_lock_timeout:{"+name+"}",
			redis.Z{Score: serverNow(t, rdb) - 1000, Member: r.Owner()}).Err())
		// An rlock attempt prunes it.
		require.ErrorIs(t, newLock(t, rc, name).TryLock(ctx), rlock.ErrNotObtained)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			o, s := queuedScores(c, rdb, name)
			require.Len(c, o, 1)
			require.Greater(c, s[0], serverNow(c, rdb))
		}, 3*time.Second, time.Millisecond, "the pruned waiter was told and rejoined")
		require.NoError(t, holder.Unlock(ctx))
		require.NoError(t, <-rgot)
		require.NoError(t, r.Unlock(ctx))
	})
}

// TestClusterRedissonFairWakeUps: on the 3+3 cluster, fair-lock wake-ups
// cross between a Redisson client in either publish mode and an rlock
// client in the default mode, on names in every master's slots: a
// Redisson release wakes the rlock head waiter on its own channel, and an
// rlock release or force unlock wakes the Redisson head waiter. Leases,
// queue polls and max-poll are an hour: only a wake-up hands over in time.
func TestClusterRedissonFairWakeUps(t *testing.T) {
	cl := redistest.SharedCluster(t)
	for _, sharded := range []bool{true, false} {
		t.Run(map[bool]string{true: "sharded", false: "classic"}[sharded], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rs := redistest.NewRedisson(cl.NewClient(t), sharded)
			rc := clientOn(t, cl.NewClient(t), rlock.WithMaxPoll(time.Hour))
			rdb := cl.NewClient(t)
			base := redistest.Name(t)
			thread := int64(0)
			for _, m := range cl.Masters(t) {
				for _, r := range cl.SlotRanges(t, m) {
					name := redistest.KeyInSlot(base, r[0])
					thread++
					rl := rs.FairLock(name, thread)
					l := newLock(t, rc, name, fair.WithLease(time.Hour), fair.WithQueueTimeout(time.Hour))
					// Redisson holds, rlock waits.
					require.NoError(t, rl.Lock(ctx, time.Hour))
					got := lockAsync(ctx, l)
					waitLen(t, rdb, name, 1)
					require.Eventually(t, func() bool { return rc.Waiters().Waiters == 1 }, 10*time.Second, time.Millisecond)
					require.NoError(t, rl.Unlock(ctx))
					require.NoError(t, <-got, "%s: rlock woken by Redisson", name)
					// rlock holds, Redisson waits; first a release, then a
					// force unlock.
					for _, force := range []bool{false, true} {
						before := rs.Waits()
						rgot := make(chan error, 1)
						go func() { rgot <- rl.Lock(ctx, time.Hour) }()
						require.Eventually(t, func() bool { return rs.Waits() > before }, 10*time.Second, time.Millisecond)
						if force {
							_, err := l.ForceUnlock(ctx)
							require.NoError(t, err)
						} else {
							require.NoError(t, l.Unlock(ctx))
						}
						require.NoError(t, <-rgot, "%s: Redisson woken by rlock (force %v)", name, force)
						if !force {
							require.NoError(t, rl.Unlock(ctx))
							require.NoError(t, l.Lock(ctx))
						}
					}
					require.NoError(t, rl.Unlock(ctx))
				}
			}
		})
	}
}
