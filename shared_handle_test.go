package rlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rlock-go/rlock"
	"github.com/rlock-go/rlock/fair"
	"github.com/rlock-go/rlock/internal/redistest"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/redlock"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/rwlock"
)

// sharedKinds builds one handle of each kind whose goroutines must
// exclude each other, on c.
var sharedKinds = []struct {
	name string
	make func(t *testing.T, b *redistest.Backend, cs []*rlock.Client, name string) rlock.Locker
}{
	{"reentrant", func(t *testing.T, b *redistest.Backend, cs []*rlock.Client, name string) rlock.Locker {
		l, err := reentrant.New(cs[0], name)
		require.NoError(t, err)
		return l
	}},
	{"fair", func(t *testing.T, b *redistest.Backend, cs []*rlock.Client, name string) rlock.Locker {
		l, err := fair.New(cs[0], name)
		require.NoError(t, err)
		return l
	}},
	{"write", func(t *testing.T, b *redistest.Backend, cs []*rlock.Client, name string) rlock.Locker {
		rw, err := rwlock.New(cs[0], name)
		require.NoError(t, err)
		return rw.WriteLock()
	}},
	{"multilock", func(t *testing.T, b *redistest.Backend, cs []*rlock.Client, name string) rlock.Locker {
		var ms []rlock.Locker
		for _, n := range []string{"{" + name + "}a", "{" + name + "}b"} {
			l, err := reentrant.New(cs[0], n)
			require.NoError(t, err)
			ms = append(ms, l)
		}
		m, err := multilock.New(ms)
		require.NoError(t, err)
		return m
	}},
	{"redlock", func(t *testing.T, b *redistest.Backend, cs []*rlock.Client, name string) rlock.Locker {
		nodes := make([]*rlock.Client, 3) // independent servers
		for i := range nodes {
			var nb *redistest.Backend
			switch {
			case b.IsMini():
				nb = redistest.Mini(t)
			case b.IsReal():
				nb = redistest.Real(t)
			default:
				t.Skip("RedLock runs over independent servers, not one cluster")
			}
			nodes[i] = sharedClients(t, nb)[0]
		}
		r, err := redlock.New(nodes, name)
		require.NoError(t, err)
		return r
	}},
}

// TestSharedHandleExcludesGoroutines is the trap of a handle shared by
// goroutines: the handle was the owner, so a second goroutine's Lock
// re-entered the first's holding and up to 6 of 16 goroutines were inside
// the critical section at once.
func TestSharedHandleExcludesGoroutines(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		cs := sharedClients(t, b)
		for _, k := range sharedKinds {
			t.Run(k.name, func(t *testing.T) {
				l := k.make(t, b, cs, redistest.Name(t))
				hammer(t, l, 16, 4)
			})
		}
	})
}

func sharedClients(t *testing.T, b *redistest.Backend) []*rlock.Client {
	cs := make([]*rlock.Client, 3)
	for i := range cs {
		c, err := rlock.NewClient(b.Universal(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	return cs
}

// hammer has n goroutines take l rounds times each through one handle and
// checks that no two are inside at once.
func hammer(t *testing.T, l rlock.Locker, n, rounds int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n*rounds)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := l.Lock(ctx); err != nil {
					errs <- err
					return
				}
				now := inside.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				// Work inside: a round trip to Redis, while the others try.
				if _, err := l.IsHeld(ctx); err != nil {
					errs <- err
				}
				if inside.Load() != now {
					most.Store(max(most.Load(), inside.Load()))
				}
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, most.Load(), "goroutines inside the critical section at once")
	held, err := l.IsHeld(ctx)
	require.NoError(t, err)
	require.False(t, held, "the handle still holds after as many Unlocks as Locks")
}

// TestSharedHandleTryLockWhileAnotherGoroutineHolds: TryLock through a
// handle another goroutine holds re-entered (nil) instead of failing.
func TestSharedHandleTryLockWhileAnotherGoroutineHolds(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		cs := sharedClients(t, b)
		for _, k := range sharedKinds {
			t.Run(k.name, func(t *testing.T) {
				ctx := context.Background()
				l := k.make(t, b, cs, redistest.Name(t))
				require.NoError(t, l.Lock(ctx))
				done := make(chan error)
				go func() { done <- l.TryLock(ctx) }()
				require.ErrorIs(t, <-done, rlock.ErrNotObtained)
				require.NoError(t, l.Unlock(ctx))
				go func() { done <- l.TryLock(ctx) }()
				require.NoError(t, <-done)
				require.NoError(t, l.Unlock(ctx))
			})
		}
	})
}

// TestSharedHandleReentersThroughCtx: the holder re-enters with a ctx that
// descends from the holding's Ctx, at depth, and as many Unlocks free it.
func TestSharedHandleReentersThroughCtx(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		cs := sharedClients(t, b)
		for _, k := range sharedKinds {
			t.Run(k.name, func(t *testing.T) {
				ctx := context.Background()
				l := k.make(t, b, cs, redistest.Name(t))
				require.NoError(t, l.Lock(ctx))
				in := holdingCtx(l)
				for range 5 {
					require.NoError(t, l.TryLock(in))
					require.NoError(t, l.Lock(in))
				}
				for range 10 {
					require.NoError(t, l.Unlock(ctx))
				}
				held, err := l.IsHeld(ctx)
				require.NoError(t, err)
				require.True(t, held)
				require.NoError(t, l.Unlock(ctx))
				held, err = l.IsHeld(ctx)
				require.NoError(t, err)
				require.False(t, held)
				require.ErrorIs(t, l.Unlock(ctx), rlock.ErrNotHeld)
			})
		}
	})
}

func holdingCtx(l rlock.Locker) context.Context {
	return l.(interface{ Ctx() context.Context }).Ctx()
}

// TestSharedReadHandleSharesAndExcludesWriter: goroutines sharing a read
// handle read together; the write handle of the pair waits for them all,
// and keeps new readers out while it waits.
func TestSharedReadHandleSharesAndExcludesWriter(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		ctx := context.Background()
		c := sharedClients(t, b)[0]
		rw, err := rwlock.New(c, redistest.Name(t))
		require.NoError(t, err)
		r, w := rw.ReadLock(), rw.WriteLock()
		require.NoError(t, r.Lock(ctx))
		second := make(chan error)
		go func() { second <- r.Lock(ctx) }()
		require.NoError(t, <-second, "a second goroutine reads beside the first")
		wrote := make(chan error)
		go func() { wrote <- w.Lock(ctx) }()
		require.Eventually(t, func() bool {
			if err := r.TryLock(ctx); err != nil {
				return errors.Is(err, rlock.ErrNotObtained)
			}
			require.NoError(t, r.Unlock(ctx))
			return false
		}, 10*time.Second, time.Millisecond,
			"a waiting writer keeps new readers out")
		select {
		case err := <-wrote:
			t.Fatalf("the writer got in while two readers hold: %v", err)
		default:
		}
		require.NoError(t, r.Unlock(ctx))
		require.NoError(t, r.Unlock(ctx))
		require.NoError(t, <-wrote)
		// Downgrade through the write holding's Ctx.
		require.NoError(t, r.Lock(w.Ctx()))
		require.NoError(t, w.Unlock(ctx))
		require.ErrorIs(t, w.TryLock(ctx), rlock.ErrNotObtained)
		require.NoError(t, r.Unlock(ctx))
		// Upgrade through the read holding's Ctx is refused.
		require.NoError(t, r.Lock(ctx))
		require.ErrorIs(t, w.TryLock(r.Ctx()), rlock.ErrUpgrade)
		require.NoError(t, r.Unlock(ctx))
	})
}

// TestOwnersStillReenterAcrossHandles: rlock.WithOwner names an owner that
// spans handles and goroutines; it re-enters as before, past every gate.
func TestOwnersStillReenterAcrossHandles(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		c := sharedClients(t, b)[0]
		ctx := rlock.WithOwner(context.Background(), "job-7")
		name := redistest.Name(t)
		a, err := reentrant.New(c, name)
		require.NoError(t, err)
		require.NoError(t, a.Lock(ctx))
		done := make(chan error)
		go func() {
			l, err := reentrant.New(c, name)
			if err == nil {
				err = l.TryLock(ctx)
			}
			if err == nil {
				err = l.Unlock(ctx)
			}
			done <- err
		}()
		require.NoError(t, <-done)
		require.NoError(t, a.Unlock(ctx))
		require.False(t, errors.Is(a.Err(), rlock.ErrLockLost))
	})
}

// TestSharedHandleExcludesGoroutinesWithCancellation: goroutines whose
// Lock gives up (ctx ends while they wait at the handle or for Redis)
// leave no pass behind and let nobody in early.
func TestSharedHandleExcludesGoroutinesWithCancellation(t *testing.T) {
	redistest.EachWithCluster(t, func(t *testing.T, b *redistest.Backend) {
		cs := sharedClients(t, b)
		for _, k := range sharedKinds[:3] {
			t.Run(k.name, func(t *testing.T) {
				l := k.make(t, b, cs, redistest.Name(t))
				var inside, most, given atomic.Int32
				var wg sync.WaitGroup
				for g := range 16 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for r := range 6 {
							ctx := context.Background()
							if (g+r)%3 == 0 { // every third call may give up
								var cancel context.CancelFunc
								ctx, cancel = context.WithTimeout(ctx, time.Duration(r)*time.Millisecond)
								defer cancel()
							}
							if err := l.Lock(ctx); err != nil {
								if !errors.Is(err, context.DeadlineExceeded) {
									t.Error(err)
								}
								given.Add(1)
								continue
							}
							now := inside.Add(1)
							if _, err := l.IsHeld(context.Background()); err != nil {
								t.Error(err)
							}
							most.Store(max(most.Load(), now, inside.Load()))
							inside.Add(-1)
							if err := l.Unlock(context.Background()); err != nil {
								t.Error(err)
							}
						}
					}()
				}
				wg.Wait()
				require.EqualValues(t, 1, most.Load(), "goroutines inside the critical section at once")
				t.Logf("%d Lock calls gave up", given.Load())
				ctx := context.Background()
				require.NoError(t, l.TryLock(ctx), "a pass was left behind")
				require.NoError(t, l.Unlock(ctx))
			})
		}
	})
}

// TestSharedHandleExcludesGoroutinesWithLostReplies: replies lost on the
// way back (go-redis sends again; the scripts answer a re-send as the
// first) do not let two goroutines of one handle in at once, nor leave the
// lock held.
func TestSharedHandleExcludesGoroutinesWithLostReplies(t *testing.T) {
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) {
		p, rdb := b.NewProxiedClient(t, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
		c, err := rlock.NewClient(rdb)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		l, err := reentrant.New(c, redistest.Name(t))
		require.NoError(t, err)
		p.DropReplies("evalsha", 6)
		hammer(t, l, 16, 3)
		require.Positive(t, p.Dropped(), "no reply was lost")
	})
}
